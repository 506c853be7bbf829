"""The ``e2e`` and ``local_judge`` marks, declared by each test and enforced while it runs.

A test is end to end when it runs ``lm_eval`` or ``mathjudge`` (in the test process through
``tests/inprocess.py`` or ``tests/e2e.py``, or lm-eval's ``simple_evaluate``) or starts any process
(``subprocess``, ``os.fork``/``exec``/``posix_spawn``/``system``, ``multiprocessing``). Such a test
says so: ``pytestmark = pytest.mark.e2e`` in its module, or ``@pytest.mark.e2e`` on the test where a
module mixes. One kind of process is allowed outside e2e, under its own mark: the local judge's
math-verify workers (``backends/local.py``), which the answer-policy tables judge through. A test
marked ``local_judge`` may start those and nothing else.

``tests/conftest.py`` arms this guard around every test not marked e2e (its fixtures' set-up and
tear-down included), and the test fails with "mark this test e2e" even when the code it runs
swallows the error. The error raised where the process would start is an ``OSError``
(``ChildProcessError``), so the code under test takes its usual path for a process that cannot
start instead of hanging on a half-made one.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import pytest

# Audit events that start a process (os.spawn* forks; multiprocessing is caught at Process.start).
_PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.system"})
_armed: list[tuple[str, bool]] = []  # the running test (node id, marked local_judge) while it is not marked e2e
_found: list[str] = []  # what that test did that needs the mark


class UnmarkedE2E(ChildProcessError):
    """Raised where a test not marked e2e starts a process or runs the CLI."""


def require_e2e(what: str) -> None:
    """Fail the running test unless it is marked e2e: it ``what`` (says what it did)."""
    if _armed:
        message = f"{_armed[0][0]} {what}: mark this test e2e (pytest.mark.e2e; docs/development.md, Tests)"
        _found.append(message)
        raise UnmarkedE2E(message)


def _audit(event: str, args: tuple) -> None:
    if event in _PROCESS_EVENTS and _armed and not (_armed[0][1] and _local_worker(event, args)):
        require_e2e(f"starts a process ({event} {_command(args)})")


def _local_worker(event: str, args: tuple) -> bool:
    """Whether this process is one of the local judge's workers."""
    local = sys.modules.get("lm_eval_mathjudge.backends.local")
    command = args[1] if event == "subprocess.Popen" else None
    return local is not None and isinstance(command, (list, tuple)) and list(command[1:3]) == ["-c", local._BOOT]


def _command(args: tuple) -> str:
    command = args[1] if len(args) > 1 else args[0] if args else ""
    return " ".join(map(str, command))[:120] if isinstance(command, (list, tuple)) else str(command)[:120]


def install() -> None:
    """Once per process: the audit hook, multiprocessing, and lm-eval's evaluator when it loads."""
    import multiprocessing.process
    import multiprocessing.util
    import platform

    platform.processor()  # asked by SDKs for their user agent; runs `uname -p` once a process (cached)
    sys.addaudithook(_audit)
    start, spawn = multiprocessing.process.BaseProcess.start, multiprocessing.util.spawnv_passfds

    def guarded_start(self):
        require_e2e(f"starts a process (multiprocessing {self.name})")
        return start(self)

    def guarded_spawn(path, args, passfds):  # the resource tracker, a forkserver, a spawned process
        require_e2e(f"starts a process (multiprocessing {_command((path, args))})")
        return spawn(path, args, passfds)

    multiprocessing.process.BaseProcess.start = guarded_start
    multiprocessing.util.spawnv_passfds = guarded_spawn
    evaluator = sys.modules.get("lm_eval.evaluator")
    if evaluator is not None:
        evaluator.simple_evaluate = _guarded(evaluator.simple_evaluate)
    else:
        sys.meta_path.insert(0, _EvaluatorFinder())


class _EvaluatorFinder:
    """Guards ``lm_eval.evaluator.simple_evaluate`` as the module loads (importing it up front costs ~1 s)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None):
        if name != "lm_eval.evaluator":
            return None
        import importlib.util

        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            load = spec.loader.exec_module

            def exec_module(module):
                load(module)
                module.simple_evaluate = _guarded(module.simple_evaluate)

            spec.loader.exec_module = exec_module
        return spec


def _guarded(simple_evaluate):
    @functools.wraps(simple_evaluate)
    def guarded(*args, **kwargs):
        require_e2e("runs lm-eval's simple_evaluate")
        return simple_evaluate(*args, **kwargs)

    return guarded


class armed:
    """Around one phase of a test not marked e2e: the guard is on; what it found fails the phase."""

    def __init__(self, item: Any) -> None:
        self.on = item.get_closest_marker("e2e") is None
        self.test = (item.nodeid, item.get_closest_marker("local_judge") is not None)
        self.outer: tuple[list, list[str]] = ([], [])

    def __enter__(self) -> None:
        if self.on:
            self.outer = (_armed[:], _found[:])
            _armed[:], _found[:] = [self.test], []

    def __exit__(self, kind, value, traceback) -> None:
        if not self.on:
            return
        found = _found[:]
        _armed[:], _found[:] = self.outer
        if found:  # also when the code under test caught the error, or failed another way because of it
            pytest.fail(found[0], pytrace=False)
