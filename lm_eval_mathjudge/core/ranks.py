"""The ranks of a data-parallel run (``accelerate launch``, ``torchrun``): combining what each rank judged.

lm-eval shards the docs over ranks and says so to each task (``build_all_requests(rank=, world_size=)``);
each rank judges its own share. What must describe the whole run (the judge record, the cost table, the
dry-run estimate and the budget, the saved generations) is gathered over lm-eval's own process group
(``torch.distributed``, already initialised by lm-eval's model), so every rank gets every rank's part and
decides the same. torch is never imported here: only read when lm-eval has imported and initialised it,
so importing the plugin stays cheap and a single-process run never touches it.

Every ``World.gather`` is a collective: all ranks must call it, in the same order. The callers sit at
points every rank reaches for the same tasks in the same order (lm-eval runs the same task loop on each).
"""

from __future__ import annotations

import logging
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class World:
    """This process's rank and the number of ranks lm-eval sharded the docs over."""
    rank: int = 0
    size: int = 1

    @property
    def first(self) -> bool:
        """Rank 0: the one that prints the run's tables (lm-eval's rank 0 writes the results)."""
        return self.rank == 0

    def gather(self, obj: Any) -> list[Any]:
        """``obj`` of every rank, in rank order, on every rank; ``[obj]`` when the run is one process."""
        if self.size <= 1:
            return [obj]
        dist = _distributed(self.size)
        if dist is None:
            log.warning("lm-eval split the docs over %d ranks, but no torch.distributed process group of that "
                        "size is running: the judge record, the cost and the budget cover this rank only",
                        self.size)
            return [obj]
        out: list[Any] = [None] * self.size
        dist.all_gather_object(out, obj)
        return out

    def first_then_rest(self, work: Callable[[], Any]) -> Any:
        """``work()`` on rank 0 first, then on the other ranks (a collective): what rank 0 leaves in a
        shared place (a passed preflight remembered in the judge cache) spares the others the same work."""
        if self.size <= 1:
            return work()
        if self.first:
            try:
                return work()
            finally:
                self.gather(None)  # even when it failed: the others go on and meet the same failure themselves
        self.gather(None)
        return work()


def world_of(rank: Any = 0, size: Any = 1) -> World:
    """The World of lm-eval's ``rank``/``world_size`` arguments (None or missing: one process)."""
    size = int(size or 1)
    return World(min(max(int(rank or 0), 0), max(size - 1, 0)), max(size, 1))


def _distributed(size: int) -> Any:
    """torch.distributed when lm-eval initialised a group of ``size`` ranks; else None (torch not imported)."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return None
        return dist if dist.get_world_size() == size else None
    except Exception:  # noqa: BLE001 - a half-initialised group: judge this rank alone, with the warning
        log.debug("torch.distributed is not usable", exc_info=True)
        return None


def add_up(records: Iterable[Any]) -> Any:
    """One record summed over ranks: counts add, mappings add key by key, lists add item by item, a
    name or label is taken from the first rank that has it. A ratio (a float: an agreement rate, a
    kappa) cannot be rebuilt from per-rank ratios: None unless every rank has the same."""
    records = [r for r in records if r is not None]
    if not records:
        return None
    first = records[0]
    if isinstance(first, bool) or not all(type(r) is type(first) for r in records):
        return first
    if isinstance(first, int):
        return sum(records)
    if isinstance(first, float):
        return first if all(r == first for r in records) else None
    if isinstance(first, dict):
        keys = list(dict.fromkeys(k for r in records for k in r))
        summed = {k: add_up(r.get(k) for r in records) for k in keys}
        return Counter(summed) if isinstance(first, Counter) else summed
    if isinstance(first, list) and len({len(r) for r in records}) == 1:
        return [add_up(items) for items in zip(*records)]
    return first
