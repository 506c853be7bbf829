"""The judging line: one progress line for a run's judge requests, from the first streamed call to the last.

It shows what a person watching a run needs and nothing it cannot back: requests done of the total,
failures, the spend so far, a rate and ETA measured on the last ``WINDOW`` real calls only, and the
replies that cost no call (the cache: no time, no money) counted apart. Before a real call has
finished there is no rate, so none is shown; a judge that stalls sees its rate fall as the clock runs
on, instead of keeping the rate of its last burst.

tqdm draws the line (its own rate and ETA are left out of the format: they count every update, cached
replies and calls started early alike). The counts come first and the bar last, so a narrow terminal
loses bar, then the cached count, never the counts. The clock is injectable, so tests step it.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from typing import Any, Callable

WINDOW = 50  # real calls the rate is measured over
FORMAT = "{desc}: {n_fmt}/{total_fmt}, {line} |{bar}|"  # ``line``: ``Meter.text`` (tqdm's postfix adds a comma)


class Meter:
    """Counts finished judge requests and draws them on one line (or, disabled, only counts).

    ``finished`` is told about each request once: how many real ``calls`` it took (0: none, e.g. a
    reply from the cache, or a request not sent), whether its reply was ``cached``, and whether it
    ``failed``. ``spend`` returns the USD spent so far (None: a judge without a price). ``expect``
    revises the total; ``close`` ends the drawing (the counting goes on) and ``reopen`` draws again.
    ``set_postfix``/``set_postfix_str`` add a note after the counts (retries, a stop's countdown).
    """

    def __init__(self, total: int, desc: str, enabled: bool = True, *, spend: Callable[[], float | None] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.total, self.desc, self.enabled = total, desc, enabled
        self.done = self.failed = self.cached = 0
        self.tagged: Counter[str] = Counter()
        self.spend = spend
        self._clock = clock
        self._started = clock()
        self._calls: deque[float] = deque(maxlen=WINDOW + 1)  # when each of the last real calls finished
        self._notes: dict[str, Any] = {}
        self._note = ""
        self._lock = threading.Lock()
        self._bar = _open(total, desc, 0, self.text()) if enabled else None

    # ------------------------------------------------------------------ counting
    def finished(self, *, calls: int = 1, cached: bool = False, failed: bool = False, tag: str | None = None) -> None:
        """One request finished; ``tag`` counts it under a name too (``tagged``), for a caller's totals."""
        with self._lock:
            self.done += 1
            if tag is not None:
                self.tagged[tag] += 1
            self.failed += failed
            self.cached += cached
            if calls and not cached:
                self._calls.append(self._clock())
            self._draw(advance=1)

    def expect(self, total: Callable[[Meter], int] | int) -> None:
        """The new total, or a function of this meter's counts that gives it (read under the lock, so
        nothing finishes in between)."""
        with self._lock:
            self.total = total(self) if callable(total) else total
            if self._bar is not None:
                self._bar.total = self.total
            self._draw(force=True)

    def reopen(self, desc: str) -> None:
        """Draw again, under a new name and on a line of its own, the counts kept and the rate measured
        afresh. A line opened beside another bar (lm-eval's, while the model generates) sits below it; once
        that bar is gone, tqdm would keep drawing it one row down, over whatever is printed next."""
        with self._lock:
            self.desc = desc
            self._calls.clear()
            self._started = self._clock()
            if self._bar is not None:
                self._bar.close()
            self._bar = _open(self.total, desc, self.done, self.text()) if self.enabled else None

    # ------------------------------------------------------------------ what the line says
    def rate(self) -> float | None:
        """Real calls per second over the last ``WINDOW`` of them, up to now (None before the first)."""
        now = self._clock()
        if not self._calls:
            return None
        if len(self._calls) > WINDOW:  # a full window: the calls after its oldest stamp, over the time since it
            count, since = WINDOW, self._calls[0]
        else:  # fewer: every real call since the line began
            count, since = len(self._calls), self._started
        span = now - since
        return count / span if span > 0 else None

    def eta(self) -> float | None:
        """Seconds until the requests left are done at the current rate (every one of them a real call)."""
        rate = self.rate()
        left = max(0, self.total - self.done)
        if not left:
            return 0.0
        return left / rate if rate else None

    def text(self) -> str:
        """The counts, most important first: a narrow terminal cuts the line from its end."""
        parts = [f"{self.failed} failed"]
        if self.spend is not None:
            usd = self.spend()
            parts.append("USD unknown" if usd is None else f"{usd:.4f} USD")
        rate, eta = self.rate(), self.eta()
        if rate is not None:
            parts.append(f"{rate:.1f} req/s")
        if eta is not None and self.done < self.total:
            parts.append(f"ETA {_clock_text(eta)}")
        if self.cached:
            parts.append(f"{self.cached} cached")
        notes = ", ".join(f"{k}={v}" for k, v in self._notes.items())
        return ", ".join(parts + [n for n in (notes, self._note) if n])

    # ------------------------------------------------------------------ tqdm's bar interface (retries, stop)
    def set_postfix(self, refresh: bool = True, **values: Any) -> None:
        with self._lock:
            self._notes = dict(values)
            self._draw(force=refresh)

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        with self._lock:
            self._note = text
            self._draw(force=refresh)

    def close(self) -> None:
        """Stop drawing (the line stays on the screen when it is the top one); counting goes on."""
        with self._lock:
            if self._bar is not None:
                self._draw(force=True)
                self._bar.close()
                self._bar = None

    def _draw(self, advance: int = 0, force: bool = False) -> None:
        """Called with the lock held. The text is built only when tqdm will draw it (its ``mininterval``
        has passed) or when ``force``d: a pass of 50,000 cached replies builds it a few times a second."""
        bar = self._bar
        if bar is None:
            return
        if force or bar._time() - getattr(bar, "last_print_t", 0) >= bar.mininterval:
            bar.line = self.text()
        if advance:
            bar.update(advance)
        elif force:
            bar.refresh()


def _open(total: int, desc: str, initial: int, text: str) -> Any:
    from tqdm import tqdm  # lazy: a run without a line never imports it

    class Line(tqdm):
        line = text  # drawn by tqdm's __init__ already

        @property
        def format_dict(self) -> dict[str, Any]:
            return {**super().format_dict, "line": self.line}

    # leave=None: the finished line stays when it is the top bar, and goes when it was drawn below another
    return Line(total=total, desc=desc, initial=initial, unit="req", bar_format=FORMAT, dynamic_ncols=True,
                leave=None)


def _clock_text(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"
