"""The dry run and the budget over a whole run: estimate every judge's part, then stop or refuse.

A ``Part`` is what one judge of one task would be asked. The check runs before any judge call; the
estimate counts only what the judge cache does not answer yet, rendering requests one at a time.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from ..core.ranks import World
from ..core.types import JudgeRequest
from . import budget, estimate


@dataclass
class Part:
    """What one judge of one task would be asked: for the dry run and the budget."""
    task: str
    client: Any  # a judging.client.JudgeClient: its ``settings`` and ``settled(key)``
    items: Callable[[], Iterator[tuple[str, JudgeRequest]]]  # unique (key, request), rendered lazily
    answer_tokens: int = 0  # added to each prompt: answers not generated yet, at their longest (worst_case)


def check_spend(parts: Sequence[Part], saved: str | Callable[[], str] = "", world: World = World()) -> None:
    """Dry run: print the run's estimate and stop. Budget: refuse above it. Both before any judge call.

    ``saved`` says where the generations were kept; a callable is only called when the run stops.
    In a run of several ranks the estimates of every rank are gathered first, so every rank decides on
    the whole run's total, the same way (none starts paying when the total is over the budget); rank 0
    prints the table. The settings are the same on every rank, so every rank reaches the gather or none.
    """
    settings = [part.client.settings for part in parts]
    dry = any(s.dry_run for s in settings)
    if not dry and budget.budget_of(settings) is None:
        return
    estimates = _per_part(world.gather([_estimate(part) for part in parts]))
    total = estimate.combine(estimates)
    if world.first:
        print(estimate.format_estimates(estimates), file=sys.stderr, flush=True)
    if dry:
        raise budget.dry_run_stop(total, settings, saved=saved)
    budget.check_budget(total, settings, saved=saved)


def worst_case(parts: Sequence[Part]) -> tuple[bool, estimate.Estimate | None]:
    """Does the run stay within its budget whatever the answers are? (True, None) without a budget.

    Streaming starts judge calls before the last answer exists, so the budget cannot wait for the real
    answers: every part is estimated with each answer at its longest (``Part.answer_tokens``, the task's
    max_gen_toks) and nothing counted as cached. Within the budget, nothing the run can ask goes over it.
    """
    settings = [part.client.settings for part in parts]
    limit = budget.budget_of(settings)
    if limit is None:
        return True, None
    total = estimate.combine([_estimate(part, cache=False) for part in parts])
    return (not total.unpriced and total.usd is not None and total.usd <= limit), total


def _per_part(ranks: list[list[estimate.Estimate]]) -> list[estimate.Estimate]:
    """One estimate per part over every rank: each rank has the same parts (tasks and judges) in the
    same order, each estimated on that rank's share of the docs."""
    if len(ranks) == 1:
        return ranks[0]
    return [estimate.combine(group, task=group[0].task) for group in zip(*ranks)]


def _estimate(part: Part, cache: bool = True) -> estimate.Estimate:
    settled = [0]

    def todo() -> Iterator[JudgeRequest]:
        for key, request in part.items():
            if cache and part.client.settled(key):
                settled[0] += 1
            else:
                yield request
    guess = estimate.estimate(todo(), part.client.settings, task=part.task, answer_tokens=part.answer_tokens)
    return dataclasses.replace(guess, cached=settled[0])
