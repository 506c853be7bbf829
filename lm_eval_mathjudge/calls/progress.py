"""The judging line: one progress line for a run's judge requests, from the first streamed call to the last.

It shows what a person watching a run needs and nothing it cannot back: requests done of the total,
failures, the spend so far, the replies taken from the cache (apart: they cost nothing and take no
time), and a rate and ETA measured on the last ``WINDOW`` real calls only. Before a real call has
finished there is no rate, so none is shown; a judge that stalls sees its rate fall as the clock runs
on, instead of keeping the rate of its last burst.

tqdm draws the line (its own rate and ETA are left out of the format: they count every update, cached
replies and calls that were started early alike). The clock is injectable, so tests step it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Callable

WINDOW = 50  # real calls the rate is measured over
FORMAT = "{desc}: {n_fmt}/{total_fmt} |{bar}| {line}"  # ``line``: ``Meter.text`` (tqdm's postfix adds a comma)


class Meter:
    """Counts finished judge requests and draws them on one line (or, disabled, only counts).

    ``finished`` is told about each request once: ``cached`` (no call was made for it: the cache, a
    reply another task or process paid for) or a real call, and whether it ``failed``. ``spend``
    returns the USD spent so far (None: a judge without a price). ``expect`` revises the total.
    ``set_postfix``/``set_postfix_str`` add a note after the counts (retries, a stop's countdown).
    """

    def __init__(self, total: int, desc: str, enabled: bool = True, *, spend: Callable[[], float | None] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.total, self.desc = total, desc
        self.done = self.failed = self.cached = 0
        self.spend = spend
        self._clock = clock
        self._started = clock()
        self._calls: deque[float] = deque(maxlen=WINDOW + 1)  # when each of the last real calls finished
        self._notes: dict[str, Any] = {}
        self._note = ""
        self._lock = threading.Lock()
        self._bar = _open(total, desc) if enabled else None
        self._draw(force=True)

    # ------------------------------------------------------------------ counting
    def finished(self, *, cached: bool = False, failed: bool = False) -> None:
        with self._lock:
            self.done += 1
            self.failed += failed
            if cached:
                self.cached += 1
            else:
                self._calls.append(self._clock())
            self._draw(advance=1)

    def update(self, n: int = 1) -> None:
        """A pool's count of finished items (each a real call)."""
        for _ in range(n):
            self.finished()

    def expect(self, total: int) -> None:
        with self._lock:
            self.total = total
            if self._bar is not None:
                self._bar.total = total
            self._draw(force=True)

    def reopen(self, desc: str) -> None:
        """Go on under a new name on a line of its own, the counts kept: a line opened beside another bar
        (lm-eval's, while the model generates) sits below it, and once that bar is gone, tqdm would keep
        drawing it one row down, over whatever is printed next."""
        with self._lock:
            self.desc = desc
            if self._bar is not None:
                self._bar.leave = False
                self._bar.close()
                self._bar = _open(self.total, desc, initial=self.done)
            self._draw(force=True)

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
        parts = [f"{self.failed} failed"]
        usd = self.spend() if self.spend is not None else None
        if self.spend is not None:
            parts.append("USD unknown" if usd is None else f"{usd:.4f} USD")
        if self.cached:
            parts.append(f"{self.cached} cached")
        rate, eta = self.rate(), self.eta()
        if rate is not None:
            parts.append(f"{rate:.1f} req/s")
        if eta is not None and self.done < self.total:
            parts.append(f"ETA {_clock_text(eta)}")
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
        with self._lock:
            if self._bar is not None:
                self._draw(force=True)
                self._bar.close()
                self._bar = None

    def __enter__(self) -> Meter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _draw(self, advance: int = 0, force: bool = False) -> None:
        """Called with the lock held: the text is always current; tqdm redraws at its own pace (mininterval)
        unless ``force``d."""
        if self._bar is None:
            return
        self._bar.line = self.text()
        if advance:
            self._bar.update(advance)
        elif force:
            self._bar.refresh()


def _open(total: int, desc: str, initial: int = 0) -> Any:
    from tqdm import tqdm  # lazy: a run without a line never imports it

    class Line(tqdm):
        line = ""

        @property
        def format_dict(self) -> dict[str, Any]:
            return {**super().format_dict, "line": self.line}

    return Line(total=total, desc=desc, initial=initial, unit="req", bar_format=FORMAT, dynamic_ncols=True)


def _clock_text(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"
