"""The estimate before a run: what judging the requests still to send would cost, before any call.

* prompt tokens: ``token_rules.prompt_tokens`` (a character-class rule fitted to
  OpenAI's tokenizers, a per-message overhead, the providers' image and video rules).
* completion tokens (expected) = a typical verdict (``REPLY_TOKENS``: the
  contracts ask for two or four short lines) + the thinking a reasoning judge is
  expected to spend (``expected_thinking``: its vendor record's rule), at most ``max_tokens``. The typical
  size, not ``max_tokens``, is the expectation because the contract is short and a
  reply that runs into the cap is rare (it is billed, and refused as a verdict);
  ``max_tokens`` per call gives the ceiling (``usd_max``), the most one ask can be billed.
* batch mode is priced at the batch rates; prompt-cache discounts are ignored
  (judge prompts are mostly distinct), so the estimate errs high there.

A judge without a price (``prices.py``) has usd None: shown as "unknown" and
named, never replaced by a guess, with the reason when it is the endpoint (``because``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from .. import vendors
from ..core.types import JudgeRequest
from ..settings.schema import judge_label
from . import prices
from .ledger import money
from .token_rules import prompt_tokens

REPLY_TOKENS = {"exact_match": 60, "vlm": 100}  # a typical verdict in each judge's contract



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
    because: tuple[tuple[str, str], ...] = ()  # (judge, why it has no price) where its endpoint is why
    # The expected cost at each mode's prices, whichever mode is set (the dry run shows both to choose from);
    # None when that mode has no price for some judge.
    usd_online: float | None = None
    usd_batch: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "unpriced": list(self.unpriced), "because": dict(self.because)}


def estimate(requests: Iterable[JudgeRequest], settings: Any, *, judge: str | None = None, task: str = "",
             cached: int = 0, overrides: Mapping[str, prices.Price] | None = None,
             answer_tokens: int = 0) -> Estimate:
    """Estimate one judge's calls for ``requests`` (the unique requests still to send; read once, not kept).

    ``judge`` is the contract (exact_match or vlm; None: told by each request, a VLM request carries
    the output as a separate part or as media); ``cached`` how many requests the cache already answers
    (reported, free); ``answer_tokens`` are added to each prompt (an answer not written yet, at its
    longest: the streaming budget check). Nothing is sent; media files are read for their headers only.
    """
    price = prices.price_for(settings, overrides)
    local = settings.backend == prices.LOCAL_BACKEND
    batch = settings.mode == "batch"
    thinking = expected_thinking(settings)
    ceiling = 0 if local else settings.max_tokens
    n = prompt = completion = 0
    usd = usd_max = 0.0
    by_mode: dict[bool, float | None] = {False: 0.0, True: 0.0}  # batch? -> expected USD at those prices
    unpriced = False
    for request in requests:
        n += 1
        if local:
            continue
        tokens = prompt_tokens(request, settings.backend, settings.model) + answer_tokens
        reply = min(settings.max_tokens, REPLY_TOKENS.get(judge or contract_of(request), REPLY_TOKENS['vlm']) + thinking)
        prompt, completion = prompt + tokens, completion + reply
        for mode, so_far in by_mode.items():
            mode_rates = price.rates(mode, tokens) if price is not None else None
            by_mode[mode] = None if so_far is None or mode_rates is None else \
                so_far + (tokens * mode_rates[0] + reply * mode_rates[1]) / 1e6
        rates = price.rates(batch, tokens) if price is not None else None
        if rates is None:
            unpriced = True
            continue
        usd += (tokens * rates[0] + reply * rates[1]) / 1e6
        usd_max += (tokens * rates[0] + ceiling * rates[1]) / 1e6
    label = judge_label(settings)
    because = prices.unpriced_because(settings) if unpriced and price is None else None
    return Estimate(task=task, judge=label, mode=settings.mode, requests=n, cached=cached, prompt_tokens=prompt,
                    completion_tokens=completion, completion_tokens_max=n * ceiling,
                    usd=None if unpriced else usd, usd_max=None if unpriced else usd_max,
                    unpriced=(label,) if unpriced else (), because=((label, because),) if because else (),
                    usd_online=by_mode[False], usd_batch=by_mode[True])


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
                    unpriced=unpriced, because=tuple(dict.fromkeys(b for e in estimates for b in e.because)),
                    usd_online=_sum_known(e.usd_online for e in estimates),
                    usd_batch=_sum_known(e.usd_batch for e in estimates))


def _sum_known(values: Iterable[float | None]) -> float | None:
    """The sum of the priced parts (None when no part has a price), as ``usd`` is summed."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def expected_thinking(settings: Any) -> int:
    """Thinking tokens a judge is expected to spend per call (its vendor record's rule; 0 for judges that do not think)."""
    vendor = vendors.get(settings.backend)
    return vendor.expected_thinking(settings) if vendor is not None else 0


def describe(estimate: Estimate) -> str:
    """One sentence: calls, tokens and USD of an estimate."""
    if estimate.usd is None:
        money = "cost unknown"
    else:
        money = f"about ${estimate.usd:,.2f} (at most ${estimate.usd_max:,.2f} if every reply used max_tokens)"
    text = (f"{estimate.requests:,} judge call(s) ({estimate.cached:,} more answered by the cache, free), "
            f"~{estimate.prompt_tokens:,} prompt and ~{estimate.completion_tokens:,} completion tokens, {money}")
    because = dict(estimate.because)
    plain = [judge for judge in estimate.unpriced if judge not in because]
    if plain:
        text += f"; no price for {', '.join(plain)} (add it with judge_prices, e.g. {prices.OVERRIDE_EXAMPLE})"
    text += "".join(f"; no price for {judge}: {why}" for judge, why in because.items())
    return text + f" [{estimate.mode} prices as of {prices.PRICES_AS_OF}]"


def format_estimates(estimates: Sequence[Estimate]) -> str:
    """A fixed-width table of per-task estimates and their total (printed by a dry run and a budget check).

    ``USD`` and ``USD max`` are at the prices of the mode set (the ``mode`` column); ``online`` and
    ``batch`` give the expected cost in either mode, so a dry run shows what switching would save.
    """
    head = (f"{'task':<32} {'judge':<34} {'mode':<6} {'calls':>7} {'cached':>7} {'prompt tok':>11} "
            f"{'reply tok':>10} {'USD':>10} {'USD max':>10} {'online':>10} {'batch':>10}")
    def line(e: Estimate) -> str:
        task = e.task if len(e.task) <= 32 else e.task[:31] + "~"
        judge = e.judge if len(e.judge) <= 34 else e.judge[:33] + "~"
        return (f"{task:<32} {judge:<34} {e.mode:<6} {e.requests:>7,} {e.cached:>7,} {e.prompt_tokens:>11,} "
                f"{e.completion_tokens:>10,} {money(e.usd):>10} {money(e.usd_max):>10} {money(e.usd_online):>10} "
                f"{money(e.usd_batch):>10}")
    total = combine(estimates)
    lines = [f"judge cost estimate (USD; list prices as of {prices.PRICES_AS_OF}, override with judge_prices)",
             head, "-" * len(head), *map(line, estimates), "-" * len(head), line(replace(total, task="total"))]
    if total.unpriced:
        lines.append(f"no price for {', '.join(total.unpriced)}: left out of the USD sums; add it with judge_prices")
        lines += [f"{judge}: {why}" for judge, why in dict(total.because).items()]
    return "\n".join(lines)
