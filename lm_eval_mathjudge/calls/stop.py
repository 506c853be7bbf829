"""Stopping on SIGINT or SIGTERM without losing what was paid for: one mechanism for every wait.

    first signal    nothing new starts: the pool submits no call, and every wait of ours (retry
                    backoff, a lease, the rate limiter, a batch poll, a video poll) ends at its next
                    tick by raising ``Stopped``; the calls in flight get up to ``GRACE_S`` to finish
                    and store their replies (a countdown on the progress bar); then the savers run
                    (the generations of every judged task), one line says how to resume, and the
                    process exits 130 (SIGINT) or 143 (SIGTERM)
    second signal   the savers run and the process exits at once (replies are stored as they arrive)

Handlers are installed while our code has something to protect (``guard``: from the first judged
task's requests to the end of its judging, a generator's batch, a rejudge) and the previous ones are
put back when the last guard is released. A handler runs in the main thread between any two
bytecodes, so it only sets flags and writes with ``os.write``. When the main thread is not in one of
our polling loops (``polling``) nothing would notice the flag (lm-eval generating with its own model,
our code keying requests), so the handler ends the run itself: savers, the line, exit. The process
exits only when it is one of our commands (``lm_eval``, ``mathjudge``); a host that called lm-eval
from Python (a notebook) gets ``Stopped``, a ``SystemExit``, raised in its main thread instead.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from ..core.errors import Stopped

GRACE_S = 10.0  # how long the calls in flight may take to finish after the first signal
TICK_S = 0.2  # how often a wait of ours looks at the flag
SIGNALS = ("SIGINT", "SIGTERM")

Saver = Callable[[], "str | None"]  # saves what it protects; returns the sentence that says how to resume


class _State:
    def __init__(self) -> None:
        self.signum: int | None = None  # the first signal (None: no stop requested)
        self.real = False  # a handler saw a real signal (a simulated stop never exits the process)
        self.finishing = False
        self.finished: str | None = None  # the final line, once said
        self.polling = 0  # the main thread is inside this many polling loops
        self.savers: dict[str, tuple[Saver, int]] = {}  # key -> (saver, guards holding it)
        self.previous: dict[int, object] = {}  # signal -> the handler before ours


_state = _State()
_lock = threading.Lock()  # guards and releases (never taken inside a signal handler)


def requested() -> bool:
    """True once a stop was asked for: start nothing new."""
    return _state.signum is not None


def check() -> None:
    """Raise ``Stopped`` when a stop was asked for (call before starting anything that costs)."""
    if _state.signum is not None:
        raise stopped()


def stopped() -> Stopped:
    """The exception that unwinds a stopped run (exit code 128 + signal number)."""
    signum = _state.signum or signal.SIGINT
    return Stopped(128 + int(signum), signal=_name(signum))


def sleep(seconds: float) -> None:
    """``time.sleep`` that wakes on a stop: raises ``Stopped`` instead of sleeping on (or before)."""
    deadline = time.monotonic() + max(0.0, seconds)
    while True:
        check()
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, TICK_S))


@contextmanager
def polling() -> Iterator[None]:
    """Marks a loop of the main thread that looks at ``requested()`` at least every ``TICK_S``: a first
    signal there only sets the flag, and the loop winds down on its own."""
    main = threading.current_thread() is threading.main_thread()
    if main:
        _state.polling += 1
    try:
        yield
    finally:
        if main:
            _state.polling -= 1


# ---------------------------------------------------------------------- guards
def guard(key: str, saver: Saver) -> None:
    """Protect a stretch of work: install the handlers (main thread only) and keep ``saver`` until
    ``release(key)``. Guards of the same key share one saver and are counted."""
    with _lock:
        if _state.finished is not None:  # a host (a notebook) starts a new run after a stopped one: afresh
            _state.signum, _state.real, _state.finished, _state.savers = None, False, None, {}
        held = _state.savers.get(key)
        _state.savers[key] = (held[0] if held else saver, (held[1] if held else 0) + 1)
        if threading.current_thread() is threading.main_thread() and not _state.previous:
            _install()


def release(key: str) -> None:
    """The stretch ``guard(key, ...)`` began is over; the last release puts the old handlers back."""
    with _lock:
        held = _state.savers.get(key)
        if held is None:
            return
        if held[1] > 1:
            _state.savers[key] = (held[0], held[1] - 1)
        else:
            del _state.savers[key]
        if not _state.savers and _state.previous and threading.current_thread() is threading.main_thread():
            _restore()


@contextmanager
def guarded(key: str, saver: Saver) -> Iterator[None]:
    """``guard`` for a with-block; a ``Stopped`` leaving it runs the savers and says how to resume."""
    guard(key, saver)
    try:
        yield
    except Stopped:
        raise finish() from None
    finally:
        release(key)


def _install() -> None:
    for name in SIGNALS:
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        current = signal.getsignal(signum)
        if current is signal.SIG_IGN:  # ignored on purpose (nohup, a scheduler): leave it so
            continue
        try:
            signal.signal(signum, _handle)
        except (ValueError, OSError):  # not the main thread of the main interpreter
            continue
        _state.previous[signum] = current


def _restore() -> None:
    for signum, handler in _state.previous.items():
        try:
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        except (ValueError, OSError):
            pass
    _state.previous.clear()


# ---------------------------------------------------------------------- the stop
def _handle(signum: int, frame: object) -> None:
    """The signal handler: flags only, unless nothing of ours would notice them."""
    _state.real = True
    if _state.finishing:  # the savers are running: the exit follows them
        return
    if _state.signum is None:
        _state.signum = signum
        if _state.polling:  # our loop winds down: say so, and how to skip the wait
            again = "Ctrl-C again" if signum == signal.SIGINT else "a second signal"
            _write(f"mathjudge: {_name(signum)} received: no new call starts; waiting up to {GRACE_S:g} s for the "
                   f"calls in flight to finish and be stored ({again} quits at once)")
            return
    raise finish()  # in our own commands finish() exits; elsewhere the main thread unwinds from here


def request(signum: int = signal.SIGINT) -> None:
    """Ask for a stop as a first signal would, without a signal (tests; never exits the process)."""
    if _state.signum is None:
        _state.signum = signum


def finish() -> Stopped:
    """Run every saver once and say, in one line, what was kept and how to resume.

    After a real signal in one of the commands our code runs in (``lm_eval``, ``mathjudge``) the process
    then exits (``os._exit``: worker threads still waiting on a call must not hold the exit up);
    otherwise (a simulated stop, or a host such as a notebook that should outlive the run) the
    ``Stopped`` to raise is returned.
    """
    if _state.finished is None and not _state.finishing:
        _state.finishing = True
        try:
            said = [text for text in (_run(saver) for saver, _ in list(_state.savers.values())) if text]
            _state.finished = (f"mathjudge: stopped by {_name(_state.signum or signal.SIGINT)}. "
                               + (" ".join(said) or "Nothing had finished yet: rerun the same command."))
            _write(_state.finished)
        finally:
            _state.finishing = False
    if _state.real and command() is not None:
        _exit_process(stopped().code)
    return stopped()


_COMMANDS = {"lm_eval": "lm_eval", "lm-eval": "lm_eval", "mathjudge": "mathjudge", "lm_eval_mathjudge": "mathjudge"}


def command() -> str | None:
    """"lm_eval" or "mathjudge" when this process is that command (nothing else of value lives in it),
    None for any other host (a script or notebook that called lm-eval from Python)."""
    program = sys.argv[0] if sys.argv else ""
    name = os.path.basename(program)
    if name == "__main__.py":  # python -m lm_eval, python -m lm_eval_mathjudge
        name = os.path.basename(os.path.dirname(program))
    return _COMMANDS.get(name)


def _run(saver: Saver) -> str | None:
    try:
        return saver()
    except Exception as exc:  # noqa: BLE001 - one saver failing must not keep the others from running
        return f"(could not save: {type(exc).__name__})"


def _exit_process(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a stream interrupted mid-write, or closed
            pass
    os._exit(code)


def _write(line: str) -> None:
    """One line on stderr, written around any buffer (the main thread may be inside a print)."""
    try:
        os.write(2, ("\n" + line + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def _name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def reset() -> None:
    """Forget a stop and every guard, and put the handlers back (tests, and a process that goes on)."""
    with _lock:
        if _state.previous and threading.current_thread() is threading.main_thread():
            _restore()
        _state.__init__()
