"""Keep what was paid for: the generations of every judged task, and the command that resumes from them.

lm-eval generates for every task first, then judges one task at a time. Before judging starts
(``checkpoint``, so also before a batch job is submitted or a budget checked), the generations of
every judged task, all docs, are written to one replay file; every stop (a judge failure, a budget or
dry run, a batch left running, a signal) names it with the one command that resumes from it
(``--model mathjudge-replay``: only what the judge cache lacks is judged).

During generation: lm-eval's models report each generation as it finishes (``CacheHook.add_partial``;
``compat.watch_generations``). Each one of a judged task is appended at once to the run's generations
file (``generations/run-*.jsonl``: one record per line, written whole and fsynced), named on stderr with
its resume command when the first one arrives, so even a SIGKILL loses no finished generation: the
replay model answers from the file and asks the run's own model (``fallback=``) only for the others.
They are also kept in memory, and a stop by a signal writes them to lm-eval's own generation cache
(resume: the same command with ``--use_cache``). Once every generation is in the content-named file
(``checkpoint``), the run's file becomes a second name of it: the file keeps its name for the whole
run, so the command printed at the first generation resumes it at any later moment (then with no model
call). The run's resume notice (``resume.py``) follows each change, for ``mathjudge resume``.

The rescue path must never be the thing that fails: rows are written as ASCII-escaped JSON (a lone
surrogate round-trips as ``\\ud800``), to a temporary file that is fsynced and then renamed, so the
file is either complete or absent. The folder is 0700 and the files 0600. A file is named by its
content, so saving the same generations again (a resume, a replay) reuses it. When the disk under the
cache folder is full (or failing), the file goes to a new private folder under the system's temporary
folder instead, and the message says where. A task whose responses are media records the folders they
were made in (``media_dirs``), so the replay attaches them again (a VLM judge reads media only from there).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
import threading
import time
import weakref
from typing import Any, Iterable

from .. import compat
from .._startup import REPLAY_MODEL
from ..calls import stop
from ..calls.workers import notice
from ..core.docs import question_of
from ..core.files import (append_line, describe_disk_problem, disk_problem, fsync_dir, private_dir,
                           write_atomic)
from ..core.redact import redact
from . import resume
from .commands import live_resume_command, option_value, option_values, resume_command, shell_command

log = logging.getLogger(__name__)

GENERATIONS_DIR = "generations"

# Tasks whose generations exist in memory, by their run entry (``entry.py``: a name, lm-eval's instances,
# the ranks; weak: a finished task's entry is not kept alive; by id: an entry need not be hashable), with the
# lm-eval cache key of each instance's request (what CacheHook.add_partial reports a finished generation under).
_LIVE: dict[int, tuple[weakref.ref[Any], list[str | None]]] = {}
_WANTED: set[str] = set()  # those keys: generations of judged tasks
_FINISHED: dict[str, str] = {}  # key -> generation, as lm-eval's model finished it (until judging starts)
_RANK = [0]  # this process's rank (lm-eval names its cache files by it)
_WHOLE: dict[str, str] = {}  # cache folder -> the file holding the generations of every rank (a run of several)
# The run's generations file: key -> (task, doc_id, question) of each judged instance, where to write (cache
# folder, then the file once the first generation came), and the keys written (a key is appended once).
_SOURCES: dict[str, list[tuple[str, int, str | None]]] = {}
_STREAM: dict[str, Any] = {}  # "cache_dir", "path", "written" (a set), "broken"; empty until the first task
_STREAM_LOCK = threading.Lock()
RUN_PREFIX = "run-"  # the run's generations file (the rest of its name: time, process, rank)


def track(task: Any, rank: int = 0, cache_dir: str | None = None) -> None:
    """Remember a task (its run entry: ``name``, ``instances``, ``world``) whose generations must survive a
    failure, a stop or a kill of any task; ``cache_dir``: where its generations are appended as they finish
    (the first task's folder)."""
    instances = task.instances or []
    keys = [compat.generation_key(inst.args) if getattr(inst, "request_type", None) == "generate_until" else None
            for inst in instances]
    _LIVE[id(task)] = (weakref.ref(task, lambda _, key=id(task): _LIVE.pop(key, None)), keys)
    _WANTED.update(k for k in keys if k is not None)
    with _STREAM_LOCK:
        for inst, key in zip(instances, keys):
            if key is not None:
                _SOURCES.setdefault(key, []).append((task.name, inst.doc_id, question_of(inst.doc)))
        if cache_dir and _STREAM.get("cache_dir") is None:
            _STREAM["cache_dir"] = cache_dir
    _RANK[0] = rank
    if cache_dir and rank == 0:
        resume.begin()
    compat.watch_generations(note_generation)


def note_generation(attr: str, args: Any, result: Any) -> None:
    """One generation an lm-eval model just finished; kept (and appended to the run's file) if a judged
    task asked for it."""
    if attr != "generate_until" or not _WANTED or not isinstance(result, str):
        return
    key = compat.generation_key(args)
    if key in _WANTED:
        _FINISHED[key] = result
        _append_generation(key, result)


def _append_generation(key: str, response: str) -> None:
    """Append one finished generation to the run's generations file, each record whole and fsynced. Never
    raises: a disk that fails here is said once, and the generations stay in memory as before."""
    from ..generators import media_dirs

    with _STREAM_LOCK:
        written = _STREAM.setdefault("written", set())
        if _STREAM.get("broken") or _STREAM.get("cache_dir") is None or key in written:
            return
        try:
            if _STREAM.get("path") is None:
                _STREAM["path"] = _run_file()
                notice(f"mathjudge: each generation of the judged tasks is saved in {_STREAM['path']} as it "
                       f"finishes; should this run die, resume with {live_resume_command(_STREAM['path'])} "
                       "(it asks the model only for the others)")  # while lm-eval's bar is drawn
            for task, doc_id, question in _SOURCES.get(key, ()):
                append_line(_STREAM["path"], _record_line(task, doc_id, question, response, media_dirs(task)))
            if not written:
                resume.note(_STREAM["path"], complete=False)
            written.add(key)
        except Exception as exc:  # noqa: BLE001 - keeping generations must never break the model
            _STREAM["broken"] = True
            log.warning("the generations cannot be saved as they finish (%s); they are kept in memory and saved "
                        "before judging", redact(str(exc)))


def _run_file() -> str:
    """This run's generations file (rank by rank): one name from its first generation to the end of the run."""
    folder = os.path.join(_STREAM["cache_dir"], GENERATIONS_DIR)
    private_dir(folder)
    name = f"{RUN_PREFIX}{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-rank{_RANK[0]}.jsonl"
    return os.path.join(folder, name)


def _complete_run_file(saved: str) -> None:
    """Every generation is in ``saved`` now: the run's file becomes a second name of it (a copy where a
    link cannot be made), so the command printed at the first generation replays them all, with no model
    call. A run whose model reported no generation gets its file (and the line naming it) here. When the
    run's file cannot be completed, the notice and a line name ``saved`` instead; the rest of the run
    goes on with the file as it was."""
    with _STREAM_LOCK:
        path, cache_dir = _STREAM.pop("path", None), _STREAM.get("cache_dir")
        _STREAM.pop("written", None)
        _SOURCES.clear()
    if cache_dir is None or (path is None and _replays_a_file()):
        return
    said, target = path is not None, path
    try:
        target = target or _run_file()
        _second_name(saved, target)
    except Exception as exc:  # noqa: BLE001 - the saved file is whole: name it instead
        log.debug("the run's generations file could not be completed", exc_info=True)
        said, target = False, saved
        log.warning("the generations are saved in %s (%s could not be made complete: %s)", saved, path,
                    redact(str(exc)))
    resume.note(target, complete=True)
    if not said:
        notice(f"mathjudge: every generation of the judged tasks is saved in {target}; should this run die, resume "
               f"with {resume_command(target)} (it judges only what the judge cache does not hold)")


def _second_name(saved: str, path: str) -> None:
    """``path`` names the content of ``saved`` from now on, in one step (a hard link, else a copy)."""
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        os.link(saved, tmp)
    except OSError:
        with open(saved, "rb") as fh:
            write_atomic(tmp, fh.read(), tmp=f"{tmp}.copy")
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path))


def _replays_a_file() -> bool:
    """The run replays a file of generations with no model behind it: that file, and this command, resume it."""
    args = sys.argv[1:]
    given = ",".join(option_values(args, ("--model_args", "-a")))
    return option_value(args, ("--model", "-M")) == REPLAY_MODEL and "fallback=" not in given


def _rows() -> tuple[list[tuple[str, int, dict, str, list[str]]], int, dict[str, str]]:
    """(task, doc_id, doc, response, media folders) of every generation there is, the number asked for,
    and the generations that exist only because lm-eval's model reported them (a stop during generation)."""
    from ..generators import media_dirs

    rows, total, partial = [], 0, {}
    for ref, keys in list(_LIVE.values()):
        task = ref()
        if task is None:
            continue
        folders = media_dirs(task.name)
        for inst, key in zip(task.instances or [], keys):
            total += 1
            if inst.resps and isinstance(inst.resps[0], str):
                rows.append((task.name, inst.doc_id, inst.doc, inst.resps[0], folders))
            elif key is not None and key in _FINISHED:
                rows.append((task.name, inst.doc_id, inst.doc, _FINISHED[key], folders))
                partial[key] = _FINISHED[key]
    return rows, total, partial


def checkpoint(cache_dir: str) -> str | None:
    """Before judging: write every live task's generations (all docs) to disk; the file's path.

    Called by each judged task before it judges; a second call with the same generations writes nothing.
    In a run of several ranks (every rank calls this for the same tasks) the rows of every rank are
    gathered and each rank writes the same one file, so a stop on any rank names all the docs.
    """
    rows, total, _ = _rows()
    world = _world()
    if world.size > 1:  # a collective: before any rank returns early
        shares = world.gather((rows, total))
        rows, total = [row for share, _ in shares for row in share], sum(count for _, count in shares)
    if not rows or len(rows) < total:
        return None
    _FINISHED.clear()  # generation is over: the instances hold every response now
    _WANTED.clear()
    try:
        path = save_generations(cache_dir, rows)
    except Exception as exc:  # noqa: BLE001 - judging goes on: the verdicts are cached either way
        log.warning("could not save the generations before judging (%s); judging goes on", redact(str(exc)))
        return None
    if world.size > 1:
        _WHOLE[cache_dir] = path
    _complete_run_file(path)
    log.info("the generations of %d task(s) are saved in %s", len({r[0] for r in rows}), path)
    return path


def _world() -> Any:
    """The ranks of the live tasks (lm-eval gives every task of a run the same)."""
    from ..core.ranks import World

    for ref, _ in list(_LIVE.values()):
        task = ref()
        if task is not None and isinstance(getattr(task, "world", None), World):
            return task.world
    return World()


def keep_generations(cache_dir: str, *, none: str = "No generations were kept.") -> str:
    """Save every generation there is (if not saved yet) and say how to resume from it. Never raises."""
    try:
        rows, total, partial = _rows()
        if not rows:
            return none
        if partial and len(rows) < total:
            return _keep_partial(cache_dir, partial, total)
        whole = _WHOLE.get(cache_dir)  # every rank's generations, saved by checkpoint
        path = whole if whole and os.path.isfile(whole) else save_generations(cache_dir, rows)
        if whole and path == whole:
            return (f"The generations of every rank ({len({r[0] for r in rows})} task(s)) are saved in {path}: "
                    f"resume with {resume_command(path)} (it judges only what the judge cache does not hold).")
    except Exception as exc:  # noqa: BLE001 - the error being reported matters more than this one
        log.debug("saving generations failed", exc_info=True)
        return f"The generations could not be saved ({redact(str(exc))})."
    return (f"The generations of {len({r[0] for r in rows})} task(s) are saved in {path}: resume with "
            f"{resume_command(path)} (it judges only what the judge cache does not hold).")


def stop_message(cache_dir: str) -> str | None:
    """What a stop (``stop.py``) says: the generations kept and the command that resumes; None if none."""
    text = keep_generations(cache_dir, none="")
    return text or None


def _keep_partial(cache_dir: str, finished: dict[str, str], total: int) -> str:
    """A stop during generation: the finished generations into lm-eval's generation cache."""
    given = option_value(sys.argv[1:], ("--use_cache", "-c"))
    if given is not None and stop.command() == "lm_eval":  # lm-eval's own --use_cache stored each one as it finished
        return (f"{len(finished)} of {total} generations of the judged tasks had finished; --use_cache {given} "
                f"holds them: resume with the same command ({shell_command(sys.argv[1:])}), which asks the model "
                "only for the others.")
    folder = os.path.join(cache_dir, GENERATIONS_DIR)
    private_dir(folder)
    prefix = os.path.join(folder, f"lm-eval-cache-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    path = compat.generation_cache_file(prefix, _RANK[0])
    compat.write_generation_cache(path, finished)
    again = (shell_command([*sys.argv[1:], "--use_cache", prefix]) if stop.command() == "lm_eval"
             else f"--use_cache {prefix}")
    return (f"{len(finished)} of {total} generations of the judged tasks had finished; they are saved in lm-eval's "
            f"generation cache {path}: resume with {again}, which asks the model only for the others.")


def save_generations(cache_dir: str, rows: Iterable[tuple]) -> str:
    """Write (task, doc_id, doc, response[, media folders]) rows to a replay file under the cache folder,
    atomically; on a full or failing disk, to a new private temporary folder.

    The file is named by its content: the same rows saved again find their file and write nothing.
    """
    text = "".join(_record_line(task, doc_id, question_of(doc), response, more[0] if more else ())
                   for task, doc_id, doc, response, *more in rows)
    name = f"generations-{hashlib.sha256(text.encode()).hexdigest()[:16]}.jsonl"
    folder = os.path.join(cache_dir, GENERATIONS_DIR)
    try:
        private_dir(folder)
        path = os.path.join(folder, name)
        if not _holds(path, text):
            write_atomic(path, text)
        return path
    except OSError as exc:
        if disk_problem(exc) is None:
            raise
        log.warning("the generations cannot be saved in %s: %s; saving them in the temporary folder instead",
                    folder, describe_disk_problem(folder if os.path.isdir(folder) else cache_dir, exc))
    spare = tempfile.mkdtemp(prefix="lm_eval_mathjudge-generations-")  # new and 0700: nobody else's folder
    write_atomic(os.path.join(spare, name), text)
    return os.path.join(spare, name)


def _record_line(task: str, doc_id: int, question: str | None, response: str, folders: Iterable[str]) -> str:
    """One generation as a replay record (``harness/replay.py`` reads it), ASCII-escaped JSON."""
    folders = list(folders or ())
    return json.dumps({"task": task, "doc_id": doc_id, "question": question, "response": response,
                       **({"media_dirs": folders} if folders else {})}, ensure_ascii=True, default=str) + "\n"


def _holds(path: str, text: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read() == text.encode()
    except OSError:
        return False
