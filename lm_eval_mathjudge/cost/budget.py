"""The checks before any judge call: a dry run stops with the estimate, a budget refuses a run above it.

A budget cannot be checked against an unknown cost, so a budget with an
unpriced judge refuses to start. Both stops raise typed errors
(``BudgetExceeded``, ``DryRunDone``) whose message says what to do next.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ..core.errors import ConfigError, JudgeRunError
from . import prices
from .estimate import Estimate, describe

class BudgetExceeded(ConfigError):
    """The estimate is above judge_budget_usd (or cannot be priced): judging did not start."""

    family = "budget"

    def __init__(self, message: str, estimate: Estimate, budget: float):
        super().__init__(message)
        self.estimate, self.budget = estimate, budget


class DryRunDone(JudgeRunError):
    """judge_dry_run: the estimate was printed and nothing was sent to any judge (exit status 0)."""

    family = "dry run"

    def __init__(self, message: str, estimate: Estimate):
        super().__init__(message)
        self.estimate = estimate


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
        # the estimate already gives the line to write for a judge whose endpoint is why
        covered = set(estimate.unpriced) <= {judge for judge, _ in estimate.because}
        example = "" if covered else f" (e.g. {prices.OVERRIDE_EXAMPLE})"
        raise BudgetExceeded(
            f"judge_budget_usd={budget:g} is set, but {', '.join(estimate.unpriced)} has no price, so the cost "
            f"cannot be checked against the budget: {describe(estimate)}. Nothing was sent. Add the price with "
            f"judge_prices{example} or remove judge_budget_usd, then rerun." + _saved(saved), estimate, budget)
    if estimate.usd > budget:
        raise BudgetExceeded(
            f"the judge estimate is above judge_budget_usd={budget:g}: {describe(estimate)}. Nothing was sent. "
            f"Raise judge_budget_usd, judge fewer samples ({_fewer()}), choose a cheaper judge (judge_model) or "
            "batch mode (judge_mode=batch, about half price), then rerun the same command." + _saved(saved),
            estimate, budget)


def _fewer() -> str:
    """How this command judges fewer samples: lm_eval's --limit; mathjudge rejudge takes fewer samples files."""
    from ..calls.stop import command

    return "fewer samples files" if command() == "mathjudge" else "--limit"


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
