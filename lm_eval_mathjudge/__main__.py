"""``python -m lm_eval_mathjudge`` (or ``mathjudge``): maintenance and report commands.

    tasks-dir                     print the folder of task YAMLs (for --include_path)
    cache [--cache-dir DIR]       where the judge cache lives and how big it is
    cache --clear [--cache-dir]   delete the judge cache (only its files; saved generations are kept)
    leaderboard, diff, agreement, calibrate, rejudge   compare, calibrate and re-judge runs (reports)
    audit                         how gullible the configured judge is (lm_eval_mathjudge.audit)
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lm_eval_mathjudge")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("tasks-dir", help="print the task folder")
    cache = sub.add_parser("cache", help="show or clear the judge cache")
    cache.add_argument("--clear", action="store_true", help="delete the cache file (saved generations are kept)")
    cache.add_argument("--cache-dir", help="the cache folder (default: as the tasks resolve it)")
    from .reports import cli as reports_cli  # argparse only; each command imports its own modules

    reports_cli.add_commands(sub)
    args = parser.parse_args(argv)
    if args.command in reports_cli.COMMANDS:
        return reports_cli.run(args)
    if args.command == "tasks-dir":
        from ._startup import tasks_dir

        print(tasks_dir())
        return 0
    return _cache(args.cache_dir or _default_cache_dir(), clear=args.clear)


def _default_cache_dir() -> str:
    from .settings.layers import resolve_settings

    return resolve_settings("exact_match", None, None).resolved_cache_dir()


def _cache(folder: str, clear: bool) -> int:
    from .harness.recovery import GENERATIONS_DIR
    from .judging.cache import FILE_NAME, SQLITE_SUFFIXES, ReplyCache

    path = os.path.join(folder, FILE_NAME)
    generations = os.path.join(folder, GENERATIONS_DIR)
    if clear:  # only the cache's own files: the folder may be shared, and generations are paid work
        for suffix in SQLITE_SUFFIXES:
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        print(f"cleared the judge cache in {folder}")
        if os.path.isdir(generations) and os.listdir(generations):
            print(f"kept the saved generations in {generations} (delete them yourself when no longer needed)")
        return 0
    if not os.path.exists(path):
        print(f"{path}: no judge cache yet")
        return 0
    cache = ReplyCache(folder)
    try:
        print(f"{path}: {len(cache)} judge replies, {os.path.getsize(path) / 1e6:.1f} MB")
    finally:
        cache.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
