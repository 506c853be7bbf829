"""The real ``lm_eval`` CLI, run inside the test process.

A fresh ``lm_eval`` process spends most of its time starting: importing lm-eval and
indexing its whole task folder (about 15,000 YAML files). In one process both happen
once; each run then costs what the evaluation itself costs. ``run_cli`` calls the
console script's own entry point with its own ``sys.argv``, environment, standard
streams and logging, one run at a time, and maps its end to an exit code the way the
interpreter would (``SystemExit``; an uncaught exception goes through ``sys.excepthook``
and exits 1, or with the code the plugin's hook raises for an error of ours). Between runs it resets the plugin's process-wide
state, so each run starts
as a new process would.

What this cannot reproduce is the process itself: interpreter start-up (the ``.pth``
hook, ``PYTHONPATH``), environment variables that libraries read once at import
(``HF_HOME``), signals and kills. Those runs keep a real process (``tests/e2e.py``).
"""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import os
import sys
import threading
from importlib import metadata
from pathlib import Path
from typing import Any, Callable
from unittest import mock

from tests.marks import require_e2e

_LOCK = threading.Lock()  # one run at a time: a run owns os.environ, sys.argv, the working folder, the streams
_ENTRIES: dict[str, Callable[[], Any]] = {}


def run_cli(script: str, argv: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``script argv...`` run in this process under ``env`` (in ``cwd``)."""
    require_e2e(f"runs {script} in process")
    entry = _entry(script)
    out, err = io.StringIO(), io.StringIO()
    with _LOCK:
        _share_task_index()
        saved_env, saved_argv, saved_cwd = dict(os.environ), sys.argv, os.getcwd()
        if cwd is not None:
            os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = [script, *argv]
        try:
            # the process's own streams too: what writes to sys.__stderr__ (the error hook) is this run's
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _logging_to(err), \
                    mock.patch.object(sys, "__stderr__", err), mock.patch.object(sys, "__stdout__", out):
                code, raised = _exit_code(entry, err)
                _process_exit(raised)
        finally:
            os.chdir(saved_cwd)
            sys.argv = saved_argv
            os.environ.clear()
            os.environ.update(saved_env)
            reset_plugin_state()
    return code, out.getvalue(), err.getvalue()


def _entry(script: str) -> Callable[[], Any]:
    if script not in _ENTRIES:
        (point,) = [e for e in metadata.entry_points(group="console_scripts") if e.name == script]
        _ENTRIES[script] = point.load()
    return _ENTRIES[script]


def _exit_code(entry: Callable[[], Any], err: io.StringIO) -> tuple[int, bool]:
    """Run the entry point; its exit code as the interpreter would give it, and whether an uncaught
    exception ended it."""
    try:
        code = entry()  # the console script passes main()'s return value to sys.exit
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0, False
        print(exc.code, file=err)
        return 1, False
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - what an uncaught exception does at the top of a process
        try:
            sys.excepthook(*sys.exc_info())
        except SystemExit as exc:  # the plugin's hook (_startup) ends a run of ours with its exit code
            return (exc.code if isinstance(exc.code, int) else 1), True
        return 1, True
    return (code if isinstance(code, int) and not isinstance(code, bool) else int(code is not None)), False


def _process_exit(raised: bool) -> None:
    """What the plugin does as a process exits (its ``atexit`` hook): a finished run's resume notice goes."""
    resume = sys.modules.get("lm_eval_mathjudge.harness.resume")
    if resume is not None:
        resume.process_exit(failed=raised)


@contextlib.contextmanager
def _logging_to(stream: io.StringIO):
    """Log records reach ``stream`` as they would reach a process's stderr.

    lm-eval's handler writes to the stream it was built with: point it at this run's.
    A record of another logger that finds no handler would go to ``logging.lastResort``
    (WARNING and above, the bare message) in a process; here pytest's handlers sit on the
    root logger, so a handler of the same kind stands in for it.
    """
    handlers = [h for name in ("lm_eval", "") for h in logging.getLogger(name or None).handlers
                if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
                and type(h).__module__.startswith("logging")]
    previous = [h.setStream(stream) for h in handlers]
    last_resort = logging.StreamHandler(stream)
    last_resort.setLevel(logging.WARNING)
    root = logging.getLogger()
    root.addHandler(last_resort)
    try:
        yield
    finally:
        root.removeHandler(last_resort)
        for handler, before in zip(handlers, previous):
            handler.setStream(before)


# The plugin's process-wide state: (module, name). A name bound at module level to an empty container
# is state by this project's habit; tests/test_inprocess.py fails when one is missing here.
PROCESS_STATE = (
    ("lm_eval_mathjudge.audit", "_DONE"),  # audits made in this process
    ("lm_eval_mathjudge.backends.local", "_POOLS"),  # local judge worker pools (closed, not just forgotten)
    ("lm_eval_mathjudge.calls.limits", "_LIMITS"),  # per-backend rate limits
    ("lm_eval_mathjudge.calls.stop", "_state"),  # a stop asked for, the handlers installed
    ("lm_eval_mathjudge.core.files", "_REPORTED"),  # disk problems already reported
    ("lm_eval_mathjudge.generators", "_PROVENANCE"),  # which generator made each task's media
    ("lm_eval_mathjudge.harness.recovery", "_LIVE"),  # tasks whose generations must survive a stop
    ("lm_eval_mathjudge.harness.recovery", "_WANTED"),
    ("lm_eval_mathjudge.harness.recovery", "_FINISHED"),
    ("lm_eval_mathjudge.harness.recovery", "_RANK"),
    ("lm_eval_mathjudge.harness.recovery", "_WHOLE"),  # files holding the generations of every rank
    ("lm_eval_mathjudge.harness.stream", "_STREAMED"),  # generations whose judge requests start as they arrive
    ("lm_eval_mathjudge.harness.stream", "_EARLY"),  # the run's early judge calls
    ("lm_eval_mathjudge.compat", "_WATCHERS"),  # who is told of each finished generation
    ("lm_eval_mathjudge.harness.recovery", "_SOURCES"),  # the run's file: each judged instance's doc, by key
    ("lm_eval_mathjudge.harness.recovery", "_STREAM"),  # the run's generations file: its folder, path, keys written
    ("lm_eval_mathjudge.harness.resume", "_NOTICE"),  # the run's resume notice
    ("lm_eval_mathjudge.harness.entry", "_PENDING"),  # judged tasks waiting for the run's judging pass
    ("lm_eval_mathjudge.judging.cache", "_MOVED"),  # network cache folders already warned about
    ("lm_eval_mathjudge.judging.cache", "_OPEN_OWNERS"),  # lease owners of caches open in this process
    ("lm_eval_mathjudge.judging.client", "_PREFLIGHTED"),  # judges checked in this process
)


def reset_plugin_state() -> None:
    """What a new process would start without (``PROCESS_STATE``), and lm-eval's signal handlers back."""
    import importlib

    for module_name, name in PROCESS_STATE:
        module = sys.modules.get(module_name)
        if module is None:
            continue
        value = getattr(module, name)
        if module_name.endswith("backends.local"):
            for worker_pool in list(value):
                worker_pool.close()
        if module_name.endswith("calls.stop"):
            _reset_stop(module)
        elif module_name.endswith("recovery") and name == "_RANK":
            value[:] = [0]
        else:
            value.clear()
    importlib.invalidate_caches()
    gc.collect()


def _reset_stop(stop) -> None:
    """A run that ended between installing its signal handlers and releasing them leaves them behind."""
    import signal

    with stop._lock:
        for signum, handler in stop._state.previous.items():
            signal.signal(signum, handler)
        stop._state = stop._State()


# ---------------------------------------------------------------------- one task index per session
_INDEX: dict[Path, dict] = {}


def _share_task_index() -> None:
    """Index lm-eval's own task folder once per session; other folders (ours, a test's) every run.

    lm-eval copies an entry's config before it builds a task from it, so the entries can be shared.
    Versions whose index works differently are left alone: their runs only index once more.
    """
    try:
        from lm_eval.tasks import _index
    except ImportError:
        return
    build = getattr(_index.TaskIndex, "build", None)
    if build is None or getattr(build, "_shared", False):
        return
    builtin = Path(_index.__file__).resolve().parent

    def shared_build(paths, *, resolve_includes=True):
        index: dict = {}
        for root in paths:
            root_path = Path(root).resolve()
            if root_path == builtin and resolve_includes:
                if root_path not in _INDEX:
                    _INDEX[root_path] = build([root], resolve_includes=True)
                part = _INDEX[root_path]
            else:
                part = build([root], resolve_includes=resolve_includes)
            for name, entry in part.items():
                if name in index:
                    _index.log.warning("Task '%s' from %s overrides existing task from %s", name,
                                       entry.yaml_path, index[name].yaml_path)
                index[name] = entry
        return index

    shared_build._shared = True
    _index.TaskIndex.build = staticmethod(shared_build)
