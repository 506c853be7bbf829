"""Keep what was paid for when judging fails: the generations of every live task.

lm-eval generates for every task first and judges one task at a time. When
judging one task fails, the generations of all tasks (a group) exist only in
memory; this module writes them to one replay file (``--model
mathjudge-replay``) so a rerun judges them without generating again.

The rescue path must never be the thing that fails: rows are written as
ASCII-escaped JSON (a lone surrogate round-trips as ``\\ud800``), to a
temporary file that is fsynced and then renamed, so the file is either
complete or absent. The folder is 0700 and the file 0600. When the disk under
the cache folder is full (or failing), the file goes to a new private folder
under the system's temporary folder instead, and the message says where. A task
whose responses are media records the folders they were made in (``media_dirs``),
so the replay attaches them again (a VLM judge reads media only from there).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
import weakref
from typing import Any, Iterable

from ._startup import REPLAY_MODEL
from .files import describe_disk_problem, disk_problem, private_dir, write_atomic
from .redact import redact

log = logging.getLogger(__name__)

GENERATIONS_DIR = "generations"

# Tasks whose generations exist in memory (weak: a finished task is not kept alive).
_LIVE: "weakref.WeakSet[Any]" = weakref.WeakSet()


def track(task: Any) -> None:
    """Remember a task whose generations must survive a failure of any task."""
    _LIVE.add(task)


def keep_generations(cache_dir: str) -> str:
    """Save every live task's raw generations in one replay file; say how to reuse it. Never raises."""
    try:
        rows = list(_live_rows())
        if not rows:
            return "No generations were kept."
        path = save_generations(cache_dir, rows)
    except Exception as exc:  # noqa: BLE001 - the error being reported matters more than this one
        log.debug("saving generations failed", exc_info=True)
        if disk_problem(exc) is not None:
            return (f"The generations could not be saved, neither in {os.path.join(cache_dir, GENERATIONS_DIR)} "
                    f"nor in the temporary folder: {redact(describe_disk_problem(tempfile.gettempdir(), exc))}. "
                    "Free space and rerun (they were not saved).")
        return f"The generations could not be saved ({redact(str(exc))})."
    return (f"The generations of {len({r[0] for r in rows})} task(s) are saved in {path}: rerun with "
            f"--model {REPLAY_MODEL} --model_args path={path} to judge them without generating again.")


def _live_rows():
    from .generators import media_dirs

    for task in list(_LIVE):
        folders = media_dirs(task.config.task)
        for inst in getattr(task, "_instances", None) or []:
            if inst.resps and isinstance(inst.resps[0], str):
                yield task.config.task, inst.doc_id, inst.doc, inst.resps[0], folders


def save_generations(cache_dir: str, rows: Iterable[tuple]) -> str:
    """Write (task, doc_id, doc, response[, media folders]) rows to a new replay file under the cache
    folder, atomically."""
    from .replay import question_of

    lines = [json.dumps({"task": task, "doc_id": doc_id, "question": question_of(doc), "response": response,
                         **({"media_dirs": list(more[0])} if more and more[0] else {})},
                        ensure_ascii=True, default=str) + "\n" for task, doc_id, doc, response, *more in rows]
    name = f"generations-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{time.time_ns() % 10**9:09d}.jsonl"
    folder = os.path.join(cache_dir, GENERATIONS_DIR)
    try:
        private_dir(folder)
        write_atomic(os.path.join(folder, name), "".join(lines))
        return os.path.join(folder, name)
    except OSError as exc:
        if disk_problem(exc) is None:
            raise
        log.warning("the generations cannot be saved in %s: %s; saving them in the temporary folder instead",
                    folder, describe_disk_problem(folder if os.path.isdir(folder) else cache_dir, exc))
    spare = tempfile.mkdtemp(prefix="lm_eval_mathjudge-generations-")  # new and 0700: nobody else's folder
    write_atomic(os.path.join(spare, name), "".join(lines))
    return os.path.join(spare, name)
