"""A judged task as the run knows it, from its requests to its outcomes, and the run's register of them.

The judged task (``task.py``) makes an ``Entry`` when lm-eval asks for its requests: its plan
(``plan.py``), its name and ranks, and, once lm-eval built them, its instances, lm-eval's own filter
hook and filter pipelines, the longest answer the model may write and its eval docs. From there the
run needs nothing of the task: it opens the judge (``open``), runs lm-eval's filters once
(``filter``), judges the task's samples in the run's pass (``run.py``) and keeps its ``Job``.
Only the task holds its entry; the register (``register``, ``claim``) and recovery keep weak
references, so a finished task's entry goes with it.

``LM_EVAL_MATHJUDGE_TASK_BY_TASK=1`` makes every pass judge one task (the bench's "before").
"""

from __future__ import annotations

import os
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .. import audit
from ..core.ranks import World
from ..core.types import JudgeRequest, clean_text
from ..cost.spend import Part
from ..judging import schedule
from .plan import JudgePlan

# "1": judge task by task (the before of bench/ten_tasks.py). Outside the MATHJUDGE_ namespace, whose
# variables config.py validates as judge settings; this is a measuring switch, not a setting.
TASK_BY_TASK_ENV = "LM_EVAL_MATHJUDGE_TASK_BY_TASK"

_PENDING: list[weakref.ref] = []  # registered entries, in lm-eval's order (weak: finished tasks go)
_LOCK = threading.Lock()


@dataclass(eq=False)
class Entry:
    plan: JudgePlan
    name: str
    world: World = World()  # the ranks lm-eval shards the docs over (core/ranks.py)
    judged: bool = True  # False under --predict_only: the generations are kept, nothing is judged
    instances: list = field(default_factory=list)  # lm-eval's Instances, once it built them
    lm_filters: Callable[[], Any] | None = None  # lm-eval's own apply_filters (the task's filter_list)
    ensembles: list = field(default_factory=list)  # lm-eval's filter pipelines, for one response at a time
    longest: int | None = None  # the most tokens the model may write per answer (render.longest_answer)
    docs: Any = ()  # the task's eval docs (the judge audit pairs its answers with them)
    judge: Any = None  # open: a JudgeClient, a Panel or a Cascade (judging/factory.py)
    clients: list = field(default_factory=list)  # the clients that make calls (one, or the members)
    filtered: tuple | None = None  # (what lm-eval's filters returned,), once they ran
    slots: list | None = None  # (instance, filter key, sample index) per judged response (ksamples.slots)
    job: schedule.Job | None = None  # this task's share of the run's pass, once judged

    def __post_init__(self) -> None:
        self.renderer = self.plan.renderer(self.name)

    @property
    def cache_dir(self) -> str:
        return self.plan.cache_dir

    @property
    def stop_key(self) -> str:
        return f"generations:{self.cache_dir}"

    def open(self) -> None:
        """Open the task's judge, rank 0 first (its passed preflight, remembered in the cache, spares the others)."""
        if self.judge is None:
            self.judge, self.clients = self.world.first_then_rest(self.plan.open_judge)

    def close(self) -> None:
        """The task is judged: its outcomes are in its instances now, the judge and the keys can go."""
        judge, self.judge, self.clients, self.job, self.slots = self.judge, None, [], None, None
        self.renderer = self.plan.renderer(self.name)
        if judge is not None:
            judge.close()

    def filter(self) -> Any:
        """lm-eval's filters over the task's responses, once (the run's pass may have run them already)."""
        if self.filtered is None:
            for inst in self.instances:  # invalid Unicode in one response must not break the task or lm-eval's files
                if inst.resps:
                    inst.resps = [clean_text(r) if isinstance(r, str) else r for r in inst.resps]
            self.filtered = (self.lm_filters(),)
        return self.filtered[0]

    def joins(self) -> bool:
        """Judged by the run's pass now: judge open, every response generated, not judged yet."""
        return (self.job is None and self.judge is not None and self.judged
                and bool(self.instances) and all(inst.resps for inst in self.instances))

    def settings(self) -> list[Any]:
        """The settings of every judge this task calls (one, or a panel's or cascade's members)."""
        return [client.settings for client in self.clients]

    def parts(self, requests: Callable[[], Iterable[JudgeRequest]], name: str | None = None) -> list[Part]:
        """What each of its judges would be asked for ``requests`` (the dry run and the budget)."""
        return schedule.parts_for(name or self.name, self.clients, requests)

    def audit_parts(self) -> list[Part]:
        """The judge audit's requests (judge_audit=true), for this run's dry run and budget, until it has run."""
        if not self.plan.options.audit or not self.judged:
            return []
        target = self.plan.audit_target(self.name, self.docs, self.renderer)
        built = [target.render(doc, answer) for doc, answer in audit.pending_pairs(target, self.plan.audit_key())]
        return self.parts(lambda: [item for item in built if isinstance(item, JudgeRequest)], audit.ledger_name(self.name))


def register(entry: Entry) -> None:
    """A task built its requests: it takes part in the next whole-run judge pass."""
    with _LOCK:
        _PENDING[:] = [ref for ref in _PENDING if ref() is not None and ref() is not entry]
        _PENDING.append(weakref.ref(entry))


def registered() -> list[Entry]:
    """The entries waiting for a pass, in lm-eval's order."""
    with _LOCK:
        return [e for e in (ref() for ref in _PENDING) if e is not None]


def claim(first: Entry) -> list[Entry]:
    """The entries the pass started by ``first`` judges (``first`` included), claimed once."""
    if not whole_run():
        return [first]
    with _LOCK:
        entries = [e for e in (ref() for ref in _PENDING) if e is not None]
        chosen = [e for e in entries if e is first or e.joins()]
        _PENDING[:] = [ref for ref in _PENDING if ref() is not None and ref() not in chosen]
    return chosen if first in chosen else [first, *chosen]


def whole_run() -> bool:
    return os.environ.get(TASK_BY_TASK_ENV, "").strip().lower() not in ("1", "true", "yes", "on")
