"""An offline judge with the exact-match contract, built on math-verify.

It reads the response under the answer policy (``answers``: credit only a
response that commits to one final answer), compares that answer with the
gold short answer (math-verify for equivalence) and writes a reply in the same
two-line format as an LLM judge, so the same parser, cache and metrics apply.
Uses: air-gapped runs, demos, and a free first stage before an LLM judge.

Some answers never finish: ``\\boxed{10^{10^{10}}}`` or ``\\boxed{100000000!}``
make sympy build numbers with billions of digits. math-verify's own timeouts
use SIGALRM, which works only in the main thread and cannot interrupt one long
C-level operation, so each comparison (both extractions and the check) runs in
a worker process (``local_worker``) under a wall-clock limit. A worker that
overruns is killed and replaced; its sample becomes a counted ``timeout``
failure (``JudgeRefusal``) while the other workers go on.

Workers are started lazily with ``subprocess`` (a fresh interpreter: no fork
of a threaded parent, no re-import of the caller's ``__main__`` as the
multiprocessing "spawn" method would do, nothing imported from the working
folder) and reused. A worker that fails to start is reported at once with
the tail of its stderr. They are killed by
``close()``, by an ``atexit`` hook, and they exit by themselves when the
parent's end of their stdin closes (the parent died).
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import queue
import subprocess
import sys
import threading
import weakref
from importlib import metadata
from typing import Any

from ..core.errors import ConfigError, FatalJudgeError, JudgeRefusal
from ..core.types import JudgeRequest, Reply
from ..settings.schema import JudgeSettings

LOCAL_JUDGE_VERSION = 5  # bump when the answer policy or the reply wording changes (part of cache keys)
ITEM_TIME_LIMIT = 10.0  # seconds for one comparison; math-verify's own defaults are 5 s per stage
START_TIME_LIMIT = 120.0  # seconds for a worker to import math-verify (slow disks, busy machines)
WORKER_MODULE = "lm_eval_mathjudge.backends.local_worker"
STDERR_TAIL_LINES = 12  # of a worker's stderr, quoted when it fails
STDERR_LINE_CHARS = 2000
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A worker must not import from the working folder: a stray inspect.py there (or a folder named like this
# package) would shadow the real module, as `python -m` lets it. So the interpreter runs this code, which
# drops the working folder from sys.path before anything else is imported, and finds this package where
# the parent found it (an editable install included). `-I` would drop PYTHONPATH too; `-P` needs 3.11.
_BOOT = ("import os, sys; here = os.getcwd(); "
         "sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != here]; "
         "sys.argv[1] in sys.path or sys.path.append(sys.argv[1]); "
         f"from {WORKER_MODULE} import main; main()")


def create(settings: JudgeSettings, judge: str) -> LocalBackend:
    if judge != "exact_match":
        raise ConfigError(f"the local judge only speaks the exact-match contract, not {judge!r}; "
                          "use judge_backend=gemini or openai for the VLM judge")
    # Workers start on demand, one per call in flight; how many calls are in flight is the client's
    # (judge_concurrency: judging/client.py), so the pool may be as large as the machine has CPUs.
    return LocalBackend(workers=os.cpu_count() or 1)


class LocalBackend:
    def __init__(self, workers: int = 1, time_limit: float = ITEM_TIME_LIMIT):
        self._pool = _WorkerPool(max(1, min(workers, os.cpu_count() or 1)))
        self._time_limit = time_limit
        self._version = metadata.version("math-verify")

    def identity(self) -> dict[str, Any]:
        return {"backend": "local", "model": "math-verify", "version": self._version,
                "local_judge": LOCAL_JUDGE_VERSION}

    def complete(self, request: JudgeRequest) -> Reply:
        gold_text = str(request.fields["answer"])
        result = self._pool.run({"answer": gold_text, "response": str(request.fields["response"]),
                                 "question": str(request.fields.get("question", "")),
                                 "limit": self._time_limit}, self._time_limit)
        if "error" in result:
            raise JudgeRefusal(f"the local judge could not compare this response: {result['error']}",
                               kind="local_error")
        analysis = " ".join(str(result["reason"]).split())  # one line: the parser reads lines
        if result["outcome"] == "undecided":  # not a verdict: a counted failure alone, the LLM's call in a cascade
            raise JudgeRefusal(_clean(f"the local rule cannot decide this response: {analysis}"), kind="undecided")
        verdict = "Correct" if result["outcome"] == "correct" else "Incorrect"
        return Reply(text=_clean(f"Error Analysis: {analysis}\nFinal Verdict: {verdict}"))

    def answer_classes(self, gold: str, responses: list[str], question: str = "") -> list[int | None]:
        """The equivalence class of each response's final answer (None: no one final answer), for maj@k.
        One worker job for the k responses, with k items' time."""
        limit = self._time_limit * max(1, len(responses))
        result = self._pool.run({"answer": gold, "responses": responses, "question": question, "limit": limit},
                                limit)
        if "error" in result:
            raise JudgeRefusal(f"the local rule could not read these answers: {result['error']}", kind="local_error")
        return [c if isinstance(c, int) else None for c in result["classes"]][:len(responses)]

    def close(self) -> None:
        self._pool.close()


def _clean(text: str) -> str:
    # A lone surrogate copied from the response cannot be stored as UTF-8: write it as an escape.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


_EXITED: dict = {"exited": True}


class _Worker:
    """One worker process and the threads that read its result lines and its stderr."""

    def __init__(self):
        env = dict(os.environ)
        env["MATHJUDGE_NO_AUTOLOAD"] = "1"  # the worker needs no lm-eval start-up hook
        self.process = subprocess.Popen(
            [sys.executable, "-c", _BOOT, _PACKAGE_ROOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env, text=True, encoding="ascii", errors="replace", bufsize=1)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        threading.Thread(target=self._read, daemon=True, name="mathjudge-local-reader").start()
        self._stderr = threading.Thread(target=self._read_stderr, daemon=True, name="mathjudge-local-stderr")
        self._stderr.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)  # EOF: the worker exited

    def _read_stderr(self) -> None:
        """Pass the worker's stderr on (library warnings) and keep its last lines for a failure message."""
        while line := self.process.stderr.readline(STDERR_LINE_CHARS):
            self._tail.append(line.rstrip("\n"))
            try:
                sys.stderr.write(line)
            except (OSError, ValueError):  # the parent's stderr is closed: the tail is still kept
                pass

    def stderr_tail(self) -> str:
        """The worker's last stderr lines (after it exited: waits briefly for the pipe to drain)."""
        if self.process.poll() is not None:
            self._stderr.join(timeout=2.0)
        lines = [line for line in self._tail if line.strip()]
        return " | ".join(lines) if lines else "it wrote nothing to stderr"

    def receive(self, limit: float) -> dict | None:
        """The next message; None if the worker is silent for ``limit`` s; ``_EXITED`` if it is gone."""
        try:
            line = self._lines.get(timeout=limit)
        except queue.Empty:
            return None
        return _EXITED if line is None else json.loads(line)

    def send(self, job: dict) -> None:
        self.process.stdin.write(json.dumps(job, ensure_ascii=True) + "\n")
        self.process.stdin.flush()

    def kill(self) -> None:
        try:
            self.process.stdin.close()
        except OSError:  # broken pipe: it is gone already
            pass
        self.process.kill()
        self.process.wait()


class _WorkerPool:
    """At most ``size`` workers, started on demand and reused; one job per worker at a time."""

    def __init__(self, size: int):
        self._size = size
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._count = 0  # workers running or starting
        self._ready = threading.Condition()
        self._closed = False
        _POOLS.add(self)

    def run(self, job: dict, limit: float) -> dict:
        worker = self._acquire()
        try:
            worker.send(job)
            result = worker.receive(limit)
        except OSError:  # broken pipe: the worker died between jobs
            result = _EXITED
        if result is None or result is _EXITED:
            self._discard(worker)
            if result is None:
                raise JudgeRefusal(f"math-verify took more than {limit:g} s on this response; "
                                   "it was stopped and the sample counted as failed", kind="timeout")
            raise JudgeRefusal(f"the local judge's worker process died on this response (exit code "
                               f"{worker.process.returncode}: out of CPU time or memory?; its stderr: "
                               f"{worker.stderr_tail()})", kind="local_error")
        self._release(worker)
        return result

    def _acquire(self) -> _Worker:
        with self._ready:
            while not self._closed and not self._idle and self._count >= self._size:
                self._ready.wait()
            if self._closed:
                raise FatalJudgeError("the local judge is closed", kind="closed")
            if self._idle:
                return self._idle.pop()
            self._count += 1  # reserve the slot; start the worker outside the lock
        try:
            worker = _Worker()
        except OSError as exc:
            self._free_slot()
            raise FatalJudgeError(f"cannot start the local judge's worker ({exc})", kind="local_start") from None
        with self._ready:
            self._all.add(worker)
        started = worker.receive(START_TIME_LIMIT)
        if started is None or not started.get("ready"):
            self._discard(worker)  # killed, so its stderr is complete
            what = (f"did not start within {START_TIME_LIMIT:g} s" if started is None else
                    f"exited while starting (exit code {worker.process.returncode})")
            raise FatalJudgeError(
                f"the local judge's math-verify worker {what}; its stderr: {worker.stderr_tail()}. Check that "
                f"`{sys.executable} -c 'import math_verify'` works", kind="local_start")
        return worker

    def _release(self, worker: _Worker) -> None:
        with self._ready:
            if not self._closed:
                self._idle.append(worker)
                self._ready.notify()
                return
        self._discard(worker)

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._ready:
            if worker in self._all:
                self._all.discard(worker)
                self._count -= 1
            self._ready.notify()

    def _free_slot(self) -> None:
        with self._ready:
            self._count -= 1
            self._ready.notify()

    def close(self) -> None:
        """Stop every idle worker now; a busy one stops when its job ends (or at exit)."""
        with self._ready:
            self._closed = True
            idle, self._idle = self._idle, []
            self._ready.notify_all()
        for worker in idle:
            self._discard(worker)

    def kill_all(self) -> None:
        """At interpreter exit: every worker, busy ones included."""
        self.close()
        with self._ready:
            workers = list(self._all)
        for worker in workers:
            self._discard(worker)


_POOLS: weakref.WeakSet[_WorkerPool] = weakref.WeakSet()


@atexit.register
def _kill_workers() -> None:
    for pool in list(_POOLS):
        pool.kill_all()
