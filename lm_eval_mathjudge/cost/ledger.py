"""The judge bill: an estimate before judging, the cost of what was spent, and the run's ledger.

Estimate (before any call, from the rendered requests; nothing is sent):

* prompt tokens: ``token_rules.prompt_tokens`` (a character-class rule fitted to
  OpenAI's tokenizers, a per-message overhead, the providers' image and video rules).
* completion tokens (expected) = a typical verdict (``REPLY_TOKENS``: the
  contracts ask for two or four short lines) + the thinking a reasoning judge is
  expected to spend (``expected_thinking``), at most ``max_tokens``. The typical
  size, not ``max_tokens``, is the expectation because the contract is short and a
  reply that runs into the cap is rare (it is billed, and refused as a verdict);
  ``max_tokens`` per call gives the ceiling (``usd_max``), the most one ask can be billed.
* batch mode is priced at the batch rates; prompt-cache discounts are ignored
  (judge prompts are mostly distinct), so the estimate errs high there.

Cost (after judging) comes from the usage the backends record per reply:
``prompt_tokens``, ``completion_tokens``, and OpenAI's ``reasoning_tokens``
(already *inside* completion_tokens) or Gemini's ``thoughts_tokens`` (billed on
top of completion_tokens); ``cached_tokens`` (inside prompt_tokens) is billed at
the cached-input rate when a backend records it. Replies that came from a batch
job are recorded apart (``batch_usage``) and billed at batch rates.

A model without a price (``prices.py``) has cost None: shown as "unknown",
listed by name, never replaced by a guess. A budget cannot be checked against
an unknown cost, so a budget with an unpriced judge refuses to start.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..core.errors import ConfigError, JudgeRunError
from ..core.types import JudgeRequest
from ..settings.models import is_reasoning_model
from ..settings.schema import judge_label
from . import prices
from .token_rules import media_tokens, prompt_tokens  # noqa: F401 - part of this module's API

REPLY_TOKENS = {"exact_match": 60, "vlm": 100}  # a typical verdict in each judge's contract
# Expected thinking of a reasoning judge comparing two short answers: rough figures, per effort.
# OpenAI's default effort is medium; Gemini 2.5 Pro/Flash think by default (dynamic budget).
THINKING_BY_EFFORT = {"none": 0, "minimal": 100, "low": 400, "medium": 1000, "high": 3000}
GEMINI_THINKING = 1000
GEMINI_THINKERS = ("gemini-2.5-pro", "gemini-2.5-flash")  # flash-lite does not think unless asked


# ---------------------------------------------------------------------- estimate
@dataclass(frozen=True)
class Estimate:
    """What judging would cost, before any call. ``usd``/``usd_max`` are None when a judge has no price."""
    task: str
    judge: str  # "backend:model", or "all judges" for a combined estimate
    mode: str
    requests: int  # judge calls expected (requests not yet cached)
    cached: int  # requests the cache already answers: free
    prompt_tokens: int
    completion_tokens: int  # expected: verdict + thinking
    completion_tokens_max: int  # every call using max_tokens
    usd: float | None
    usd_max: float | None
    unpriced: tuple[str, ...] = ()  # judges without a price (their calls are in the token counts only)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "unpriced": list(self.unpriced)}


def estimate(requests: Iterable[JudgeRequest], settings: Any, *, judge: str | None = None, task: str = "",
             cached: int = 0, overrides: Mapping[str, prices.Price] | None = None) -> Estimate:
    """Estimate one judge's calls for ``requests`` (the unique requests still to send; read once, not kept).

    ``judge`` is the contract (exact_match or vlm; None: told by each request, a VLM request carries
    the output as a separate part or as media); ``cached`` how many requests the cache already answers
    (reported, free). Nothing is sent; media files are read for their headers only.
    """
    price = prices.price_for(settings, overrides)
    local = settings.backend == prices.LOCAL_BACKEND
    batch = settings.mode == "batch"
    thinking = expected_thinking(settings)
    ceiling = 0 if local else settings.max_tokens
    n = prompt = completion = 0
    usd = usd_max = 0.0
    unpriced = False
    for request in requests:
        n += 1
        if local:
            continue
        tokens = prompt_tokens(request, settings.backend)
        reply = min(settings.max_tokens, REPLY_TOKENS.get(judge or contract_of(request), REPLY_TOKENS['vlm']) + thinking)
        prompt, completion = prompt + tokens, completion + reply
        rates = price.rates(batch, tokens) if price is not None else None
        if rates is None:
            unpriced = True
            continue
        usd += (tokens * rates[0] + reply * rates[1]) / 1e6
        usd_max += (tokens * rates[0] + ceiling * rates[1]) / 1e6
    label = judge_label(settings)
    return Estimate(task=task, judge=label, mode=settings.mode, requests=n, cached=cached, prompt_tokens=prompt,
                    completion_tokens=completion, completion_tokens_max=n * ceiling,
                    usd=None if unpriced else usd, usd_max=None if unpriced else usd_max,
                    unpriced=(label,) if unpriced else ())


def contract_of(request: JudgeRequest) -> str:
    """exact_match folds the response into the prompt; the VLM judge sends it as its own part or as media."""
    return "vlm" if request.output_text is not None or request.media else "exact_match"


def combine(estimates: Sequence[Estimate], task: str = "all tasks") -> Estimate:
    """One estimate for several judges or tasks. ``usd`` sums the priced parts; None only if none is priced."""
    priced = [e for e in estimates if e.usd is not None]
    unpriced = tuple(dict.fromkeys(name for e in estimates for name in e.unpriced))
    judges = {e.judge for e in estimates}
    modes = {e.mode for e in estimates}
    return Estimate(task=task, judge=judges.pop() if len(judges) == 1 else "all judges",
                    mode=modes.pop() if len(modes) == 1 else "mixed",
                    requests=sum(e.requests for e in estimates), cached=sum(e.cached for e in estimates),
                    prompt_tokens=sum(e.prompt_tokens for e in estimates),
                    completion_tokens=sum(e.completion_tokens for e in estimates),
                    completion_tokens_max=sum(e.completion_tokens_max for e in estimates),
                    usd=sum(e.usd for e in priced) if priced or not unpriced else None,
                    usd_max=sum(e.usd_max for e in priced) if priced or not unpriced else None,
                    unpriced=unpriced)


def expected_thinking(settings: Any) -> int:
    """Thinking tokens a judge is expected to spend per call (0 for judges that do not think)."""
    model = prices.normalise(settings.model)
    if settings.backend == "gemini":
        budget = getattr(settings, "thinking_budget", None)
        if budget is None:  # the model's default: 2.5 Pro and Flash think, Flash-Lite and older models do not
            thinks = model.startswith(GEMINI_THINKERS) and not model.startswith("gemini-2.5-flash-lite")
            return GEMINI_THINKING if thinks else 0
        return GEMINI_THINKING if budget == -1 else min(budget, GEMINI_THINKING)  # -1: dynamic
    if settings.backend in ("openai", "azure") and is_reasoning_model(model):
        return THINKING_BY_EFFORT.get(getattr(settings, "reasoning_effort", None) or "medium", 1000)
    return 0


# ---------------------------------------------------------------------- cost of usage
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

    def __add__(self, other: "Tokens") -> "Tokens":
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


def cost_of(usage: Mapping[str, Any] | None, batch_usage: Mapping[str, Any] | None, settings: Any,
            overrides: Mapping[str, prices.Price] | None = None) -> Cost:
    """USD of the online replies (``usage``) and of the batch replies (``batch_usage``) of one judge."""
    price = prices.price_for(settings, overrides)
    return Cost(online=usd(tokens_of(usage), price), batch=usd(tokens_of(batch_usage), price, batch=True))


# ---------------------------------------------------------------------- ledger
@dataclass(frozen=True)
class Row:
    requests: int = 0
    calls: int = 0
    cached: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    thinking_tokens: int = 0
    usd_online: float | None = 0.0
    usd_batch: float | None = 0.0
    unpriced: tuple[str, ...] = ()

    @property
    def usd(self) -> float | None:
        return None if self.usd_online is None or self.usd_batch is None else self.usd_online + self.usd_batch

    def __add__(self, other: "Row") -> "Row":
        def add(a, b):
            return None if a is None or b is None else a + b
        return Row(*(getattr(self, f) + getattr(other, f) for f in _COUNTS), usd_online=add(self.usd_online,
                   other.usd_online), usd_batch=add(self.usd_batch, other.usd_batch),
                   unpriced=tuple(dict.fromkeys(self.unpriced + other.unpriced)))

    def as_dict(self) -> dict[str, Any]:
        return {**{f: getattr(self, f) for f in _COUNTS}, "usd_online": _round(self.usd_online),
                "usd_batch": _round(self.usd_batch), "usd": _round(self.usd), "unpriced": list(self.unpriced)}


_COUNTS = ("requests", "calls", "cached", "failed", "prompt_tokens", "completion_tokens", "thinking_tokens")


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

    def record(self, task: str, settings: Any, *, requests: int = 0, calls: int = 0, cached: int = 0,
               failed: int = 0, usage: Mapping[str, Any] | None = None,
               batch_usage: Mapping[str, Any] | None = None) -> Row:
        """Add one judge's counts for ``task``. Never raises for a bad ``prices`` override: the calls are
        already paid for, so the judge is left unpriced and the reason goes into the table and the block."""
        try:
            price, problem = prices.price_for(settings), None
        except ConfigError as exc:
            price, problem = None, str(exc)
        online, batched = tokens_of(usage), tokens_of(batch_usage)
        both = online + batched
        label = judge_label(settings)
        row = Row(requests, calls, cached, failed, both.prompt, both.completion, both.thinking,
                  usd(online, price), usd(batched, price, batch=True))
        if row.usd is None:
            row = replace(row, unpriced=(label,))
        with self._lock:
            judges = self._rows.setdefault(task, {})
            judges[label] = judges.get(label, Row()) + row
            self._prices[label] = price
            if problem:
                self._problems[label] = problem
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
            tasks, problems = list(self._rows), dict(self._problems)
        total = self.total()
        return {"currency": "USD", "prices_as_of": prices.PRICES_AS_OF,
                "note": "list prices from the built-in table unless overridden (judge_prices); check them",
                "tasks": {t: self.task_dict(t) for t in tasks}, "total": total.as_dict(),
                "unpriced": list(total.unpriced), "price_errors": problems}

    def table(self) -> str:
        """A fixed-width table: one line per task and a total."""
        with self._lock:
            tasks, problems = list(self._rows), dict(self._problems)
        lines = [f"judge cost (USD; list prices as of {prices.PRICES_AS_OF}, override with judge_prices)",
                 _HEADER, "-" * len(_HEADER)]
        lines += [_line(task, self.task_row(task)) for task in tasks]
        total = self.total()
        lines += ["-" * len(_HEADER), _line("total", total)]
        if total.unpriced:
            lines.append(f"no price for {', '.join(total.unpriced)}: their USD is left out of the sums; add them "
                         "with judge_prices")
        lines += [f"{label}: {problem}" for label, problem in problems.items()]
        return "\n".join(lines)


_HEADER = (f"{'task':<32} {'requests':>8} {'calls':>7} {'cached':>7} {'failed':>6} {'prompt tok':>11} "
           f"{'reply tok':>10} {'think tok':>10} {'USD online':>11} {'USD batch':>10} {'USD':>10}")


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.4f}"


def _line(name: str, row: Row) -> str:
    mark = "*" if row.unpriced and row.usd is not None else ""  # a sum that leaves unpriced judges out
    name = name if len(name) <= 32 else name[:31] + "~"
    return (f"{name:<32} {row.requests:>8,} {row.calls:>7,} {row.cached:>7,} {row.failed:>6,} "
            f"{row.prompt_tokens:>11,} {row.completion_tokens:>10,} {row.thinking_tokens:>10,} "
            f"{_money(row.usd_online):>11} {_money(row.usd_batch):>10} {_money(row.usd) + mark:>10}")


def _price_dict(price: prices.Price | None) -> dict[str, Any] | None:
    if price is None:
        return None
    return {k: v for k, v in asdict(price).items() if v is not None}


# ---------------------------------------------------------------------- dry run and budget
class BudgetExceeded(ConfigError):
    """The estimate is above judge_budget_usd (or cannot be priced): judging did not start."""

    def __init__(self, message: str, estimate: Estimate, budget: float):
        super().__init__(message)
        self.estimate, self.budget = estimate, budget


class DryRunDone(JudgeRunError):
    """judge_dry_run: the estimate was printed and nothing was sent to any judge."""

    def __init__(self, message: str, estimate: Estimate):
        super().__init__(message)
        self.estimate = estimate


def describe(estimate: Estimate) -> str:
    """One sentence: calls, tokens and USD of an estimate."""
    if estimate.usd is None:
        money = "cost unknown"
    else:
        money = f"about ${estimate.usd:,.2f} (at most ${estimate.usd_max:,.2f} if every reply used max_tokens)"
    text = (f"{estimate.requests:,} judge call(s) ({estimate.cached:,} more answered by the cache, free), "
            f"~{estimate.prompt_tokens:,} prompt and ~{estimate.completion_tokens:,} completion tokens, {money}")
    if estimate.unpriced:
        text += f"; no price for {', '.join(estimate.unpriced)} (add it with judge_prices, e.g. " \
                f"{prices.OVERRIDE_EXAMPLE})"
    return text + f" [{estimate.mode} prices as of {prices.PRICES_AS_OF}]"


def budget_of(settings_list: Iterable[Any]) -> float | None:
    """The run's budget: the smallest judge_budget_usd set on any judge (None: no budget)."""
    budgets = [s.budget_usd for s in settings_list if getattr(s, "budget_usd", None) is not None]
    return min(budgets) if budgets else None


def check_budget(estimate: Estimate, settings_list: Iterable[Any], saved: str | Callable[[], str] = "") -> None:
    """Raise BudgetExceeded when the (combined) estimate is above the budget or cannot be priced; else None.

    ``saved`` is the sentence saying where the generations were kept (``recovery.keep_generations``); it is
    only needed when the budget refuses, so it may also be a callable that returns it.

    Compares the expected cost (``estimate.usd``), not the ceiling: the ceiling assumes every reply runs
    to max_tokens, which a two-line verdict does not.
    """
    budget = budget_of(settings_list)
    if budget is None:
        return
    if estimate.unpriced:
        raise BudgetExceeded(
            f"judge_budget_usd={budget:g} is set, but {', '.join(estimate.unpriced)} has no price, so the cost "
            f"cannot be checked against the budget: {describe(estimate)}. Nothing was sent. Add the price with "
            f"judge_prices (e.g. {prices.OVERRIDE_EXAMPLE}) or remove judge_budget_usd, then rerun."
            + _saved(saved), estimate, budget)
    if estimate.usd > budget:
        raise BudgetExceeded(
            f"the judge estimate is above judge_budget_usd={budget:g}: {describe(estimate)}. Nothing was sent. "
            "Raise judge_budget_usd, judge fewer samples (--limit), choose a cheaper judge (judge_model) or "
            "batch mode (judge_mode=batch, about half price), then rerun the same command." + _saved(saved),
            estimate, budget)


def _saved(saved: str | Callable[[], str]) -> str:
    text = saved() if callable(saved) else saved
    return f" {text}" if text else ""


def dry_run_stop(estimate: Estimate, settings_list: Iterable[Any],
                 saved: str | Callable[[], str] = "") -> DryRunDone:
    """The DryRunDone to raise for a dry run: the estimate, the budget verdict and what to do next.

    ``saved`` is the sentence saying where the generations were kept (``recovery.keep_generations``).
    """
    settings_list = list(settings_list)
    budget = budget_of(settings_list)
    verdict = ""
    if budget is not None:
        try:
            check_budget(estimate, settings_list)
            verdict = f" This is within judge_budget_usd={budget:g}."
        except BudgetExceeded:
            verdict = f" This is NOT within judge_budget_usd={budget:g}: a real run would refuse to start."
    return DryRunDone(
        f"dry run (judge_dry_run=true): nothing was sent to any judge. Estimate: {describe(estimate)}.{verdict} "
        f"{_saved(saved).strip() + ' ' if saved else ''}To judge for real, rerun the same command without judge_dry_run "
        "(or with judge_dry_run=false); judge_budget_usd=<USD> refuses a run whose estimate is higher.", estimate)


def format_estimates(estimates: Sequence[Estimate]) -> str:
    """A fixed-width table of per-task estimates and their total (printed by a dry run)."""
    head = (f"{'task':<32} {'judge':<34} {'mode':<6} {'calls':>7} {'cached':>7} {'prompt tok':>11} "
            f"{'reply tok':>10} {'USD':>10} {'USD max':>10}")
    def line(e: Estimate) -> str:
        task = e.task if len(e.task) <= 32 else e.task[:31] + "~"
        judge = e.judge if len(e.judge) <= 34 else e.judge[:33] + "~"
        return (f"{task:<32} {judge:<34} {e.mode:<6} {e.requests:>7,} {e.cached:>7,} {e.prompt_tokens:>11,} "
                f"{e.completion_tokens:>10,} {_money(e.usd):>10} {_money(e.usd_max):>10}")
    total = combine(estimates)
    lines = [f"judge cost estimate (USD; list prices as of {prices.PRICES_AS_OF}, override with judge_prices)",
             head, "-" * len(head), *map(line, estimates), "-" * len(head), line(replace(total, task="total"))]
    if total.unpriced:
        lines.append(f"no price for {', '.join(total.unpriced)}: left out of the USD sums; add it with judge_prices")
    return "\n".join(lines)
