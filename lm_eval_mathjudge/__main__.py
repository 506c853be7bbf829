"""``python -m lm_eval_mathjudge``: small maintenance commands.

    tasks-dir        print the folder of task YAMLs (for --include_path)
    cache            print where the judge cache lives and how big it is
    cache --clear    delete the judge cache (replies and saved generations)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lm_eval_mathjudge")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("tasks-dir", help="print the task folder")
    cache = sub.add_parser("cache", help="show or clear the judge cache")
    cache.add_argument("--clear", action="store_true", help="delete the cache folder")
    args = parser.parse_args(argv)
    if args.command == "tasks-dir":
        from ._startup import tasks_dir

        print(tasks_dir())
        return 0
    return _cache(clear=args.clear)


def _cache(clear: bool) -> int:
    from .cache import FILE_NAME
    from .config import resolve_settings

    folder = resolve_settings("exact_match", None, None).resolved_cache_dir()
    if clear:
        shutil.rmtree(folder, ignore_errors=True)
        print(f"removed {folder}")
        return 0
    path = os.path.join(folder, FILE_NAME)
    if not os.path.exists(path):
        print(f"{path} (empty)")
        return 0
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]
    print(f"{path}: {rows} judge replies, {os.path.getsize(path) / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
