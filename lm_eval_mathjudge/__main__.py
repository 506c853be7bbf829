"""``mathjudge`` (or ``python -m lm_eval_mathjudge``): maintenance and report commands.

    tasks-dir                     print the folder of task YAMLs (for --include_path)
    resume RUN_DIR                resume a judged lm_eval run that died, paying only for what is missing
    cache [--cache-dir DIR]       where the judge cache lives and how big it is
    cache --clear                 delete the judge cache (only its files; saved generations are kept)
    cache --list                  list the saved generations (what a stopped or dry run kept)
    cache --clear-generations     delete the saved generations
    cache --merge A B [--into C]  fold judge caches (one per host or job) into one (judging/cache_merge.py)
    leaderboard, diff, agreement, calibrate, rejudge   compare, calibrate, re-judge runs (reports)
    audit                         how gullible the configured judge is (lm_eval_mathjudge.audit)

Errors of ours end the command with one block and the exit codes of ``core/errors.py``; a
misspelt command or option gets a suggestion (``Parser``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

PROG = "mathjudge"


class Parser(argparse.ArgumentParser):
    """argparse with ``did you mean`` for a misspelt subcommand, option or choice, and examples kept as written."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        from .core.errors import did_you_mean

        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            message += did_you_mean(choice[1], re.findall(r"'([^']*)'", choice[2]))
        unknown = re.match(r"unrecognized arguments: (.*)", message)
        if unknown:
            options = self._every_option()
            message += "".join(did_you_mean(arg.split("=", 1)[0], options)
                               for arg in unknown[1].split() if arg.startswith("--"))
        super().error(message)

    def parse_known_args(self, args=None, namespace=None):
        argv = list(sys.argv[1:] if args is None else args)
        self._refuse_unknown_options(argv)  # before argparse asks for missing arguments: the typo is the news
        return super().parse_known_args(argv, namespace)

    def parse_args(self, args=None, namespace=None):
        """Arguments left over are reported by the subcommand they were given to, with its usage."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            (self._subcommand(getattr(parsed, "command", None)) or self).error(
                f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def _refuse_unknown_options(self, argv: list[str]) -> None:
        """An option this parser does not know (nor abbreviates) is an error of this parser, with its usage;
        a parser with subcommands looks only before the subcommand's name."""
        known = [s for s in self._option_string_actions if s.startswith("--")]
        nested = self._subcommand_action() is not None
        for arg in argv:
            if arg == "--" or (nested and not arg.startswith("-")):
                return
            name = arg.split("=", 1)[0]
            if name.startswith("--") and not any(option.startswith(name) for option in known):
                self.error(f"unrecognized arguments: {arg}")

    def _subcommand_action(self):
        return next((a for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)

    def _subcommand(self, name: str | None) -> argparse.ArgumentParser | None:
        action = self._subcommand_action()
        return action.choices.get(name) if action is not None and name else None

    def _every_option(self) -> list[str]:
        found = [s for s in self._option_string_actions if s.startswith("--")]
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for parser in action.choices.values():
                    found += [s for s in parser._option_string_actions if s.startswith("--")]
        return sorted(set(found))


def example(*lines: str) -> str:
    """The epilog that ends a command's help: one or more commands to copy."""
    return "example" + ("s" if len(lines) > 1 else "") + ":\n" + "\n".join(f"  {line}" for line in lines)


def _version() -> str:
    """The installed distribution's version (the package's own ``__init__`` is a room above this one)."""
    from importlib import metadata

    try:
        return metadata.version("lm-eval-mathjudge")
    except metadata.PackageNotFoundError:  # a source tree on sys.path, never installed
        return "unknown (not installed)"


def build_parser() -> Parser:
    from .reports import cli as reports_cli  # argparse only; each command imports its own modules

    parser = Parser(prog=PROG, description="Reports and maintenance for lm_eval_mathjudge runs "
                                           "(the judged tasks themselves run inside lm_eval).",
                    epilog=example("mathjudge leaderboard results/ --out board",
                                   "mathjudge rejudge results/*/samples_gsm8k_gpt4em_*.jsonl --judge local "
                                   "--output_path rejudged",
                                   "mathjudge <command> --help"))
    parser.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    sub.add_parser("tasks-dir", help="print the folder of the task YAMLs (for lm_eval --include_path)",
                   description="Print the folder of this plugin's task YAMLs, for lm_eval --include_path "
                               "when the start-up hook is off (MATHJUDGE_NO_AUTOLOAD=1).",
                   epilog=example("lm_eval --include_path \"$(mathjudge tasks-dir)\" --tasks gsm8k_gpt4em ..."))
    resume = sub.add_parser("resume", help="resume a judged lm_eval run that died (a kill, a crash, a stop)",
                            description="Resume a judged lm_eval run that did not finish, whatever stopped it and "
                                        "when: the model is asked only for the generations it never finished "
                                        "and the judge only for the verdicts it never gave. RUN_DIR is the run's "
                                        "--output_path, where the run keeps a mathjudge-resume-*.json until it "
                                        "ends; the newest such run there is resumed (or name the file).",
                            epilog=example("mathjudge resume out/", "mathjudge resume --print out/",
                                           "mathjudge resume --list out/"))
    resume.add_argument("run", metavar="RUN_DIR", help="the run's --output_path folder, or one of its "
                                                        "mathjudge-resume-*.json files")
    shown = resume.add_mutually_exclusive_group()
    shown.add_argument("--print", action="store_true", dest="show_only",
                       help="print the lm_eval command that resumes the run, and run nothing")
    shown.add_argument("--list", action="store_true", help="list the unfinished runs in RUN_DIR, newest first")
    cache = sub.add_parser("cache", help="show or clear the judge cache and the saved generations",
                           description="Show the judge cache (replies already paid for), list the saved "
                                       "generations (kept when a run stops, a dry run or a budget refusal), "
                                       "or delete either.",
                           epilog=example("mathjudge cache", "mathjudge cache --list",
                                          "mathjudge cache --clear-generations",
                                          "mathjudge cache --merge host-a/cache host-b/cache --into merged"))
    what = cache.add_mutually_exclusive_group()
    what.add_argument("--clear", action="store_true", help="delete the judge cache files (saved generations are kept)")
    what.add_argument("--list", action="store_true", help="list the saved generations files (size, age, records)")
    what.add_argument("--clear-generations", action="store_true",
                      help="delete the saved generations files (the judge cache is kept)")
    cache.add_argument("--cache-dir", metavar="DIR",
                       help="the cache folder (default: judge_cache_dir / MATHJUDGE_CACHE_DIR, else "
                            "~/.cache/lm_eval_mathjudge)")
    from .judging import cache_merge  # argparse only; merging imports its modules when it runs

    cache_merge.add_arguments(cache)
    reports_cli.add_commands(sub, example)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command; a reader that stops reading (``mathjudge ... | head``) ends it quietly."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return code
    except BrokenPipeError:
        _drop_stdout()
        return 0


def _drop_stdout() -> None:
    """Nothing more reaches the closed pipe (the interpreter's flush at exit included)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (a test's capture): nothing to redirect
        pass
    finally:
        os.close(devnull)


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    from .reports import cli as reports_cli

    if args.command in reports_cli.COMMANDS:
        return reports_cli.run(args)
    if args.command == "resume":
        from .harness import resume

        return reports_cli.guarded(args.command, lambda: resume.run(args.run, show_only=args.show_only,
                                                                    listing=args.list))
    if args.command == "tasks-dir":
        from ._startup import tasks_dir

        print(tasks_dir())
        return 0
    if args.merge:
        from .judging import cache_merge

        return reports_cli.guarded(args.command, lambda: cache_merge.run(args))
    return reports_cli.guarded(args.command, lambda: _cache(args))


def _cache(args) -> int:
    folder = args.cache_dir or _default_cache_dir()
    if args.list or args.clear_generations:
        return _generations(folder, clear=args.clear_generations)
    return _judge_cache(folder, clear=args.clear)


def _default_cache_dir() -> str:
    from .settings.layers import resolve_settings

    return resolve_settings("exact_match", None, None).resolved_cache_dir()


def _judge_cache(folder: str, clear: bool) -> int:
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
            print(f"kept the saved generations in {generations} (mathjudge cache --clear-generations deletes them)")
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


def _generations(folder: str, clear: bool) -> int:
    """List (or delete) the files the runs saved their generations in: only ours, by name."""
    from .harness.recovery import GENERATIONS_DIR, RUN_PREFIX

    where = os.path.join(folder, GENERATIONS_DIR)
    files = sorted(os.path.join(where, name) for name in (os.listdir(where) if os.path.isdir(where) else ())
                   if name.startswith(("generations-", RUN_PREFIX)) and name.endswith(".jsonl"))
    if not files:
        print(f"{where}: no saved generations")
        return 0
    if clear:
        for path in files:
            os.remove(path)
        print(f"deleted {len(files)} saved generations file(s) from {where}")
        return 0
    now = time.time()
    print(f"{len(files)} saved generations file(s) in {where} (judge one with lm_eval --model mathjudge-replay "
          "--model_args path=FILE ...):")
    for path in files:
        size, age = os.path.getsize(path), (now - os.path.getmtime(path)) / 3600
        with open(path, "rb") as fh:
            records = sum(1 for line in fh if line.strip())
        print(f"  {os.path.basename(path)}  {records:>6} records  {size / 1e3:>9.1f} kB  {_age(age)}")
    return 0


def _age(hours: float) -> str:
    return f"{hours * 60:.0f} min ago" if hours < 1 else f"{hours:.0f} h ago" if hours < 48 else f"{hours / 24:.0f} days ago"


if __name__ == "__main__":
    sys.exit(main())
