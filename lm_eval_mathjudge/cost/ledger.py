"""What was spent: the cost of the usage the backends recorded, and the run's ledger of it (rows, tables).

Cost comes from the usage the backends record per reply: ``prompt_tokens``,
``completion_tokens``, and OpenAI's ``reasoning_tokens`` (already *inside*
completion_tokens) or Gemini's ``thoughts_tokens`` (billed on top of
completion_tokens); ``cached_tokens`` (inside prompt_tokens) is billed at the
cached-input rate when a backend records it. Replies that came from a batch job
are recorded apart (``batch_usage``) and billed at batch rates.

A model without a price (``prices.py``) has cost None: shown as "unknown",
listed by name, never replaced by a guess; when its endpoint is why (a judge
not served by its vendor), the table and the block say so, once per judge.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Iterable, Mapping

from ..core.errors import ConfigError
from ..settings.schema import judge_label
from . import prices

@dataclass(frozen=True)
class Tokens:
    """Token counts of recorded usage; ``completion`` is the visible reply, ``thinking`` the hidden part."""
    prompt: int = 0
    cached: int = 0  # inside prompt
    completion: int = 0
    thinking: int = 0

    @property
    def output(self) -> int:
        return self.completion + self.thinking

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(self.prompt + other.prompt, self.cached + other.cached, self.completion + other.completion,
                      self.thinking + other.thinking)


def tokens_of(usage: Mapping[str, Any] | None) -> Tokens:
    """Read the backends' usage keys (summed over calls) into Tokens."""
    u = {k: v for k, v in (usage or {}).items() if isinstance(v, int) and not isinstance(v, bool)}
    prompt, completion = u.get("prompt_tokens", 0), u.get("completion_tokens", 0)
    cached = min(prompt, u.get("cached_tokens", 0))
    if "thoughts_tokens" in u:  # Gemini: thoughts are billed on top of the candidates
        return Tokens(prompt, cached, completion, u["thoughts_tokens"])
    reasoning = min(completion, u.get("reasoning_tokens", 0))  # OpenAI: reasoning is inside completion_tokens
    return Tokens(prompt, cached, completion - reasoning, reasoning)


@dataclass(frozen=True)
class Cost:
    online: float | None
    batch: float | None

    @property
    def total(self) -> float | None:
        return None if self.online is None or self.batch is None else self.online + self.batch


def usd(tokens: Tokens, price: prices.Price | None, batch: bool = False) -> float | None:
    """USD for ``tokens`` at ``price`` (summed usage is billed at the base tier); 0 tokens cost 0."""
    if tokens == Tokens():
        return 0.0
    rates = price.rates(batch) if price is not None else None
    if rates is None:
        return None
    cached_rate = price.cached_input if price.cached_input is not None and not batch else rates[0]
    return ((tokens.prompt - tokens.cached) * rates[0] + tokens.cached * cached_rate
            + tokens.output * rates[1]) / 1e6


def spent_so_far(clients: Iterable[Any]) -> Callable[[], float | None]:
    """What ``clients`` (judge clients) have spent so far, in USD, online and batch (None when one of them
    has no price): the judging line's figure, read while their calls go on."""
    clients, priced = list(clients), []

    def spent() -> float | None:
        if not priced:  # priced when first shown: a line that is never drawn reads no prices
            priced.extend((client, read_price(client.settings)[0]) for client in clients)
        costs = [cost_at(client.stats.usage.copy(), client.stats.batch_usage.copy(), price).total
                 for client, price in priced]
        return None if None in costs else sum(costs)
    return spent


def read_price(settings: Any) -> tuple[prices.Price | None, str | None]:
    """A judge's price, or None and why its ``judge_prices`` could not be read. Never raises: what a judge
    already spent is reported whatever its override says (the cost table says what is wrong with it)."""
    try:
        return prices.price_for(settings), None
    except ConfigError as exc:
        return None, str(exc)


def cost_of(usage: Mapping[str, Any] | None, batch_usage: Mapping[str, Any] | None, settings: Any,
            overrides: Mapping[str, prices.Price] | None = None) -> Cost:
    """USD of the online replies (``usage``) and of the batch replies (``batch_usage``) of one judge."""
    return cost_at(usage, batch_usage, prices.price_for(settings, overrides))


def cost_at(usage: Mapping[str, Any] | None, batch_usage: Mapping[str, Any] | None,
            price: prices.Price | None) -> Cost:
    """USD of online and batch usage at one judge's ``price`` (None: unknown)."""
    return Cost(online=usd(tokens_of(usage), price), batch=usd(tokens_of(batch_usage), price, batch=True))


@dataclass(frozen=True)
class Row:
    requests: int = 0
    calls: int = 0
    cached: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    thinking_tokens: int = 0
    duplicates: int = 0  # requests that repeated another word for word: judged once
    usd_online: float | None = 0.0
    usd_batch: float | None = 0.0
    unpriced: tuple[str, ...] = ()

    @property
    def usd(self) -> float | None:
        return None if self.usd_online is None or self.usd_batch is None else self.usd_online + self.usd_batch

    def __add__(self, other: Row) -> Row:
        def add(a, b):
            return None if a is None or b is None else a + b
        return Row(*(getattr(self, f) + getattr(other, f) for f in _COUNTS), usd_online=add(self.usd_online,
                   other.usd_online), usd_batch=add(self.usd_batch, other.usd_batch),
                   unpriced=tuple(dict.fromkeys(self.unpriced + other.unpriced)))

    def as_dict(self) -> dict[str, Any]:
        return {**{f: getattr(self, f) for f in _COUNTS}, "usd_online": _round(self.usd_online),
                "usd_batch": _round(self.usd_batch), "usd": _round(self.usd), "unpriced": list(self.unpriced)}


_COUNTS = ("requests", "calls", "cached", "failed", "prompt_tokens", "completion_tokens", "thinking_tokens",
           "duplicates")


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _sum_known(rows: Iterable[Row]) -> Row:
    """Counts summed; USD summed over the priced rows (the unpriced are named in ``unpriced``).

    USD stays None (unknown) only when no row is priced, as in ``combine``.
    """
    rows = list(rows)
    total = Row()
    for row in rows:
        total = total + replace(row, usd_online=row.usd_online or 0.0, usd_batch=row.usd_batch or 0.0)
    if rows and all(row.usd is None for row in rows):
        total = replace(total, usd_online=None, usd_batch=None)
    return total


class Ledger:
    """Per task and per judge: calls made, served from cache, failed; tokens; USD online and batch.

    Thread-safe; one per run. ``record`` adds (several records of one task and judge accumulate).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, dict[str, Row]] = {}
        self._prices: dict[str, prices.Price | None] = {}
        self._problems: dict[str, str] = {}  # judge -> why its price could not be read
        self._because: dict[str, str] = {}  # judge -> why it has no price (a custom endpoint)

    def record(self, task: str, settings: Any, *, requests: int = 0, calls: int = 0, cached: int = 0,
               failed: int = 0, usage: Mapping[str, Any] | None = None,
               batch_usage: Mapping[str, Any] | None = None, duplicates: int = 0) -> Row:
        """Add one judge's counts for ``task``. Never raises for a bad ``prices`` override: the calls are
        already paid for, so the judge is left unpriced and the reason goes into the table and the block."""
        price, problem = read_price(settings)
        because = prices.unpriced_because(settings) if price is None and problem is None else None
        online, batched = tokens_of(usage), tokens_of(batch_usage)
        both = online + batched
        label = judge_label(settings)
        row = Row(requests, calls, cached, failed, both.prompt, both.completion, both.thinking, duplicates,
                  usd(online, price), usd(batched, price, batch=True))
        if row.usd is None:
            row = replace(row, unpriced=(label,))
        with self._lock:
            judges = self._rows.setdefault(task, {})
            judges[label] = judges.get(label, Row()) + row
            self._prices[label] = price
            if problem:
                self._problems[label] = problem
            if because:
                self._because[label] = because
        return row

    def record_stats(self, task: str, settings: Any, stats: Any, *, failed: int | None = None) -> Row:
        """Record a ``JudgeStats`` (client.py); ``failed`` overrides its failure count (per sample)."""
        return self.record(task, settings, requests=stats.requests, calls=stats.calls, cached=stats.cache_hits,
                           failed=sum(stats.failures.values()) if failed is None else failed,
                           usage=stats.usage, batch_usage=getattr(stats, "batch_usage", None))

    def task_row(self, task: str) -> Row:
        with self._lock:
            return _sum_known(self._rows.get(task, {}).values())

    def total(self) -> Row:
        with self._lock:
            return _sum_known(row for judges in self._rows.values() for row in judges.values())

    def task_dict(self, task: str) -> dict[str, Any]:
        """One task's block: its totals and one entry per judge (with the price used)."""
        with self._lock:
            judges = dict(self._rows.get(task, {}))
            used = dict(self._prices)
        return {**_sum_known(judges.values()).as_dict(),
                "judges": {label: {**row.as_dict(), "price": _price_dict(used.get(label))}
                           for label, row in judges.items()}}

    def as_dict(self) -> dict[str, Any]:
        """The run's cost block for the results file (JSON-able)."""
        with self._lock:
            tasks, problems, because = list(self._rows), dict(self._problems), dict(self._because)
        total = self.total()
        return {"currency": "USD", "prices_as_of": prices.PRICES_AS_OF,
                "note": "list prices from the built-in table unless overridden (judge_prices); check them",
                "tasks": {t: self.task_dict(t) for t in tasks}, "total": total.as_dict(),
                "unpriced": list(total.unpriced), "unpriced_because": because, "price_errors": problems}

    def table(self) -> str:
        """A fixed-width table: one line per task and a total."""
        with self._lock:
            tasks, notes = list(self._rows), {**self._because, **self._problems}
        lines = [f"judge cost (USD; list prices as of {prices.PRICES_AS_OF}, override with judge_prices)",
                 _HEADER, "-" * len(_HEADER)]
        lines += [_line(task, self.task_row(task)) for task in tasks]
        total = self.total()
        lines += ["-" * len(_HEADER), _line("total", total)]
        if total.duplicates:
            lines.append("dup: requests identical to another one, judged once")
        if total.unpriced:
            lines.append(f"no price for {', '.join(total.unpriced)}: their USD is left out of the sums; add them "
                         "with judge_prices")
        lines += [f"{label}: {note}" for label, note in notes.items()]
        return "\n".join(lines)


_HEADER = (f"{'task':<32} {'requests':>8} {'dup':>6} {'calls':>7} {'cached':>7} {'failed':>6} "
           f"{'prompt tok':>11} "
           f"{'reply tok':>10} {'think tok':>10} {'USD online':>11} {'USD batch':>10} {'USD':>10}")


def money(value: float | None) -> str:
    """USD to four places, or 'unknown' for an unpriced judge."""
    return "unknown" if value is None else f"{value:.4f}"


def _line(name: str, row: Row) -> str:
    mark = "*" if row.unpriced and row.usd is not None else ""  # a sum that leaves unpriced judges out
    name = name if len(name) <= 32 else name[:31] + "~"
    return (f"{name:<32} {row.requests:>8,} {row.duplicates:>6,} {row.calls:>7,} {row.cached:>7,} "
            f"{row.failed:>6,} "
            f"{row.prompt_tokens:>11,} {row.completion_tokens:>10,} {row.thinking_tokens:>10,} "
            f"{money(row.usd_online):>11} {money(row.usd_batch):>10} {money(row.usd) + mark:>10}")


def _price_dict(price: prices.Price | None) -> dict[str, Any] | None:
    if price is None:
        return None
    return {k: v for k, v in asdict(price).items() if v is not None}
