"""The resume notice of a run, and ``mathjudge resume``: one command that resumes a judged run whenever it died.

A judged ``lm_eval`` run with an ``--output_path`` keeps a small JSON notice in that folder,
``mathjudge-resume-<time>-<pid>.json`` (0600, written whole: a temporary file, then a rename), from
the moment its judged tasks are built; it is rewritten at every change of what a resume needs:

    started     no generation kept yet: the resume is the run's own command
    generating  the run's generations file (``<cache_dir>/generations/run-….jsonl``, one name for the
                whole run) holds each generation as it finished: the resume replays it and asks the
                run's own model only for the others (``fallback=``)
    judging     the file holds every generation: the resume replays it, with no model at all

The judge cache answers every verdict already paid for, so a resume pays the model only for what it
never finished and the judge only for what it never answered. The notice goes when the process ends
without an uncaught error (lm-eval has written the results by then), and a run that resumes another
(its own command again, or a replay of its file) takes the other's notice over: a notice left in a
folder is a run that did not finish. ``mathjudge resume OUT`` runs the newest one's command from the
folder that run was started in, with the run's ``MATHJUDGE_*`` settings (its cache folder above all;
redacted, like the command) where the resuming environment does not set them; a notice file names one
run exactly. Writing a notice never fails a run.
"""

from __future__ import annotations

import atexit
import glob
import json
import logging
import os
import shlex
import shutil
import sys
import time
from datetime import datetime
from typing import Any

from ..calls import stop
from ..calls.workers import notice
from ..core.errors import ConfigError
from ..core.files import write_atomic
from ..core.redact import redact
from ..settings.schema import ENV_PREFIX
from .commands import option_value, option_values, replay_args

log = logging.getLogger(__name__)

PREFIX = "mathjudge-resume-"
VERSION = 1
_OUTPUT_OPTIONS = ("--output_path", "-o")
# This run's notice: "path" and "data" (what is written); empty until the run's judged tasks are built.
_NOTICE: dict[str, Any] = {}
_STAGES = {"started": "no generation had been kept yet, so its own command runs again",
           "generating": "its generations file holds those that had finished: the model is asked only for the others",
           "judging": "its generations file holds every generation: no model call"}


# ---------------------------------------------------------------------- written by the run
def begin() -> None:
    """The run's judged tasks are built: write its notice (rank 0 of an ``lm_eval`` run with an output
    folder; once) and say, once, the command that resumes it whatever happens next."""
    if _NOTICE or stop.command() != "lm_eval":
        return
    args = sys.argv[1:]
    folder = output_folder(args)
    if folder is None:
        return
    stamp = datetime.now().strftime("%Y%m%dT%H%M%S%f")
    _NOTICE["path"] = os.path.join(folder, f"{PREFIX}{stamp}-{os.getpid()}.json")
    _NOTICE["data"] = {"version": VERSION, "program": "lm_eval", "cwd": os.getcwd(), "argv": _shown(args),
                       "env": {k: redact(v) for k, v in os.environ.items() if k.startswith(ENV_PREFIX)},
                       "started": time.time(), "stage": "started", "file": None, "resume": _shown(args)}
    if not _write():
        return
    _supersede(folder, args)
    atexit.unregister(_at_exit)  # once per process, however many runs it holds
    atexit.register(_at_exit)
    notice(f"mathjudge: should this run die, `mathjudge resume {shlex.quote(folder)}` resumes it (paying only for "
           "what is missing)")


def note(path: str, complete: bool) -> None:
    """The run's generations are in ``path`` now: every one (``complete``), or those finished so far."""
    data = _NOTICE.get("data")
    if data is None:
        return
    args = sys.argv[1:]
    data.update(stage="judging" if complete else "generating", file=path,
                resume=_shown(replay_args(args, path, fallback=not complete)), updated=time.time())
    _write()


def process_exit(failed: bool) -> None:
    """The process ends: without an uncaught error the run finished (lm-eval wrote its results), so its
    notice goes; after one it stays and ``mathjudge resume`` finds it."""
    path = _NOTICE.get("path")
    if path is None or failed:
        return
    try:
        os.remove(path)
    except OSError:
        pass


def _at_exit() -> None:
    process_exit(failed=getattr(sys, "last_value", None) is not None)


def output_folder(args: list[str]) -> str | None:
    """The folder lm-eval writes this run's results under (``--output_path``; a ``.json`` path's folder)."""
    given = option_value(args, _OUTPUT_OPTIONS)
    if not given:
        return None
    path = os.path.abspath(os.path.expanduser(given))
    return os.path.dirname(path) if path.endswith(".json") else path


def _shown(args: list[str]) -> list[str]:
    return [redact(arg) for arg in args]  # a key in --model_args never reaches the disk


def _write() -> bool:
    try:
        os.makedirs(os.path.dirname(_NOTICE["path"]), exist_ok=True)
        write_atomic(_NOTICE["path"], json.dumps(_NOTICE["data"], indent=1, ensure_ascii=True) + "\n")
        return True
    except Exception as exc:  # noqa: BLE001 - the notice must never be what fails the run
        log.warning("could not write the resume notice %s (%s); the commands printed still resume the run",
                    _NOTICE["path"], redact(str(exc)))
        return False


def _supersede(folder: str, args: list[str]) -> None:
    """A run that resumes another (the same command again, or a replay of the other's file) takes its
    notice over: the older one is not left to be resumed a second time."""
    given = ",".join(option_values(args, ("--model_args", "-a"))).split(",")
    replayed = {part[len("path="):] for part in given if part.startswith("path=")}
    for other in notices(folder):
        if other == _NOTICE["path"]:
            continue
        data = _read(other)
        if data is not None and data.get("cwd") == os.getcwd() and (
                data.get("argv") == _shown(args) or data.get("file") in replayed):
            try:
                os.remove(other)
            except OSError:
                pass


# ---------------------------------------------------------------------- mathjudge resume
def notices(folder: str) -> list[str]:
    """The notices in ``folder``, newest first."""
    found = glob.glob(os.path.join(glob.escape(os.path.abspath(folder)), f"{PREFIX}*.json"))
    return sorted(found, key=lambda p: (_read(p) or {}).get("started") or 0, reverse=True)


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) and data.get("version") == VERSION else None


def find(path: str) -> tuple[str, dict[str, Any], list[str]]:
    """The notice to resume from ``path`` (a notice file, or the run's output folder; its model sub-folder
    works too), its content, and the other unfinished runs there."""
    if os.path.isfile(path):
        data = _read(path)
        if data is None:
            raise ConfigError(f"{path} is not a resume notice (a mathjudge-resume-*.json a run left in its "
                              "--output_path); pass the run's output folder or that file")
        return path, data, []
    if not os.path.isdir(path):
        raise ConfigError(f"mathjudge resume: {path} does not exist; pass the --output_path of the run to resume")
    found = [p for p in notices(path) if _read(p) is not None] or [
        p for p in notices(os.path.dirname(os.path.abspath(path))) if _read(p) is not None]
    if not found:
        raise ConfigError(f"mathjudge resume: no run to resume in {path}: a judged lm_eval run keeps a "
                          f"{PREFIX}*.json in its --output_path until it ends, and none is there (every run "
                          "that wrote there finished, or was not given this --output_path); to run again, "
                          "rerun its command")
    return found[0], _read(found[0]), found[1:]


def command(data: dict[str, Any]) -> tuple[str, list[str]]:
    """(folder to run in, argv) of the notice's resume; a missing file or a redacted key is an error."""
    args = [str(a) for a in data.get("resume") or []]
    if data.get("file") and not os.path.isfile(data["file"]):
        raise ConfigError(f"mathjudge resume: the run's generations file {data['file']} is gone (deleted with "
                          "mathjudge cache --clear-generations, or a cache folder that was cleaned), so its "
                          "generations cannot be replayed; the run's own command starts it over: "
                          f"{shlex.join(['lm_eval', *map(str, data.get('argv') or [])])}")
    if any("***" in a for a in args):
        raise ConfigError("mathjudge resume: the run's command held a credential, kept only redacted (***); run "
                          "it with the key put back (or given by environment variable): "
                          + shlex.join(["lm_eval", *args]))
    return str(data.get("cwd") or os.getcwd()), args


def describe(path: str, data: dict[str, Any]) -> str:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(data.get("started") or 0))
    return f"{path}: a run started {started}; {_STAGES.get(data.get('stage'), 'unknown stage')}"


def run(target: str, *, show_only: bool = False, listing: bool = False) -> int:
    """``mathjudge resume``: print the command that resumes the run, then run it in its folder."""
    if listing:
        folder = target if os.path.isdir(target) else os.path.dirname(target)
        for path in notices(folder):
            data = _read(path)
            if data is not None:
                print(describe(path, data))
        return 0
    path, data, others = find(target)
    cwd, args = command(data)
    line = shlex.join(["lm_eval", *args])
    if show_only:
        env = [f"{k}={shlex.quote(str(v))}" for k, v in sorted((data.get("env") or {}).items()) if k not in os.environ]
        print(" ".join([*([f"cd {shlex.quote(cwd)} &&"] if cwd != os.getcwd() else []), *env, line]))
        return 0
    print(f"mathjudge resume: {describe(path, data)}\nmathjudge resume: running {line}"
          + (f"\nmathjudge resume: {len(others)} other unfinished run(s) there: mathjudge resume --list "
             f"{shlex.quote(target)}" if others else ""), file=sys.stderr, flush=True)
    _restore_settings(data)
    os.chdir(cwd)
    program = _program("lm_eval")
    os.execv(program[0], [*program, *args])
    return 0  # not reached


def _restore_settings(data: dict[str, Any]) -> None:
    """The run's MATHJUDGE_* settings (its cache folder, above all: the verdicts paid for are there), where
    this environment does not set them; a variable set here wins (a judge endpoint moved, say)."""
    restored = {k: str(v) for k, v in (data.get("env") or {}).items()
                if str(k).startswith(ENV_PREFIX) and k not in os.environ and "***" not in str(v)}
    os.environ.update(restored)
    if restored:
        print("mathjudge resume: as the run had them: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in
                                                                   sorted(restored.items())), file=sys.stderr)


def _program(name: str) -> list[str]:
    """The console script beside this interpreter (the same environment), else on PATH, else ``-m``."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    if os.access(beside, os.X_OK):
        return [beside]
    found = shutil.which(name)
    return [found] if found else [sys.executable, "-m", name]
