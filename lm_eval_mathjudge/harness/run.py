"""The run's one judging pass: every judged task of one ``lm_eval`` call through one pool, from small task specs.

How a judged response travels, from lm-eval's hooks to its score::

    JudgedTask.__init__           plan.plan_of(config): judge, settings, run options, members, k   (plan.py)
    JudgedTask.build_all_requests Entry(plan, name, world).open(): the judge, rank 0 first          (entry.py)
                                  attach(entry, ...): lm-eval's instances, its filter hook and pipelines;
                                  the entry registered for the pass, its generations kept (recovery.py)
                                  and, where it may, judged as they arrive (stream.py)
    [lm-eval generates for every task]
    JudgedTask.apply_filters      judge(entry, scores, record): lm-eval's filters once, then the pass
                                  (0.5: process_instances) if the entry is not judged yet; its outcomes become records,
                                  scores and metadata (outcomes.py)
    JudgedTask.process_results    the scores of the doc's record (0.5: the scorers call it)

lm-eval calls each task's ``apply_filters`` one task after another; judged task by task, each task
would wait for its own slowest call before the next task's first call. So the first judged task's
``apply_filters`` judges every pending task: each entry becomes a ``TaskSpec``, and ``judge_specs``
maps the specs to their outcomes (one ``Job`` per spec): the dry run and the budget cover every
member of every task (and the judge audits that follow), batch jobs are all submitted, and the
unique requests of all tasks go through ONE pool with one progress bar and one cost table. Each task
then, in its own ``apply_filters``, reads its own job and raises for its own samples only.

A ``TaskSpec`` is all the pass needs of a task: its name, its judge (one client, a panel or a
cascade) and the clients that make calls, its samples (doc, response) in slot order and how a sample
is rendered into a judge request, the cache folder a stop names, its ranks, and its judge audit.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from .. import audit
from ..calls import stop
from ..core.errors import JudgeRunError
from ..core.ranks import World
from ..core.redact import redact
from ..core.types import JudgeRequest, Outcome, clean_text
from ..cost import budget, spend
from ..cost.spend import Part
from ..judging import schedule
from ..judging.schedule import Job
from . import entry as entries, ksamples, outcomes, provenance, recovery, stream
from .entry import Entry
from .plan import JudgePlan
from .render import as_text, longest_answer

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class TaskSpec:
    """What the run's pass needs from one judged task; ``judge_specs`` returns its outcomes (a ``Job``)."""
    name: str
    judge: Any  # anything with key/judge_one: a JudgeClient, a Panel or a Cascade
    members: tuple[Any, ...]  # the clients that make calls (the dry run, the budget, the cost table)
    samples: Sequence[tuple[Mapping[str, Any], str]]  # (doc, response) per slot
    render: Callable[[Mapping[str, Any], str], JudgeRequest | Outcome]  # a sample's request, or a sample never sent
    cache_dir: str = ""  # where a stop says the generations were kept
    world: World = World()  # the ranks lm-eval sharded the docs over (core/ranks.py)
    audit: tuple[str, Callable[[], list[Part]]] | None = None  # (key, parts) of the judge audit run after it


def enter(plan: JudgePlan, name: str, world: World, judged: bool = True, entry: Entry | None = None) -> Entry:
    """A task is about to build its requests: its entry (``entry``, the one it had, when it builds them
    again), and for a judged task its judge opened (rank 0 first), so a judge that cannot work stops the
    run before any generation."""
    ksamples.check_ready(plan.k, plan.options, name)
    if entry is None:
        entry = Entry(plan, name, world, judged=judged)
    else:
        entry.plan, entry.world, entry.judged = plan, world, judged
    if judged:
        entry.open()
    return entry


def attach(entry: Entry, instances: list, lm_filters: Callable[[], Any], ensembles: list,
           generation_kwargs: Any, docs: Any) -> None:
    """lm-eval built the task's requests: the entry takes them, its generations are kept from now on, and
    a judged entry joins the next pass (judged as its generations arrive where it may)."""
    entry.instances, entry.lm_filters, entry.ensembles, entry.docs = instances, lm_filters, ensembles, docs
    entry.longest = longest_answer(generation_kwargs)
    entry.filtered = entry.job = entry.slots = None  # new instances: their filters have not run
    if entry.judged:
        ksamples.check_filters(entry.plan.k, ensembles, instances, entry.name)
    recovery.track(entry, rank=entry.world.rank, cache_dir=entry.cache_dir if entry.judged else None)
    if entry.judged:
        entries.register(entry)
        if stream.may_stream(entry):  # judge_stream: each sample is judged as its generation arrives
            stream.watch(entry)
        # From here to the end of this task's judging a SIGINT/SIGTERM keeps the generations (stop.py).
        stop.guard(entry.stop_key, functools.partial(recovery.stop_message, entry.cache_dir))


def judge(entry: Entry, scores: dict, record: dict[str, Any]) -> None:
    """Judge the entry (in the run's pass, if no pass did yet) and write its outcomes into its instances,
    ``scores`` and ``record`` (its ``metadata.judge``); whatever stops it says what was kept and how to resume."""
    try:
        recovery.checkpoint(entry.cache_dir)  # before any call, budget check or batch job
        if entry.job is None:
            _pass(entry)  # judges this task and every other pending judged task in one pool
        outcomes.score(entry, scores, record)
        if entry.plan.options.audit:  # judge_audit=true: the judge's gullibility, beside the scores
            record["audit"] = audit.in_run(entry.plan.audit_target(entry.name, entry.docs, entry.renderer),
                                           entry.plan.audit_key())
    except stop.Stopped:  # a signal: say what was kept and how to resume (after a real one: exit)
        raise stop.finish() from None
    except (JudgeRunError, budget.BudgetExceeded):  # their messages already say where the generations are
        raise
    except Exception as exc:  # anything else: say what happened and keep the generations
        raise JudgeRunError(f"{entry.name}: judging failed: {redact(clean_text(str(exc)))}. "
                            + recovery.keep_generations(entry.cache_dir)) from exc
    finally:
        entry.close()
        stop.release(entry.stop_key)


def _pass(first: Entry) -> None:
    """Judge ``first`` and every other pending entry in one pool; each entry keeps its ``Job``.

    ``first`` fails alone when it cannot start (its filters, its requests); another entry that
    cannot start is left to judge itself when lm-eval reaches it.
    """
    chosen = entries.claim(first)
    stream.claimed(chosen)  # their generation is over: what was not reported by now is judged by the pass
    try:
        specs, judged = [], []
        for entry in chosen:
            try:
                specs.append(spec_of(entry))
                judged.append(entry)
            except Exception:
                if entry is first:
                    raise
                log.debug("%s: left to judge itself", entry.name, exc_info=True)
        for entry, job in zip(judged, judge_specs(specs, first=specs[judged.index(first)])):
            entry.job = job
    finally:  # whatever stopped the pass (a budget, a task that cannot start): the next run decides anew
        stream.end_early()


def spec_of(entry: Entry) -> TaskSpec:
    """The entry's spec: lm-eval's filters run (once), each of a doc's k samples a slot of its own."""
    entry.filter()
    entry.slots = list(ksamples.slots(entry.instances, entry.plan.k))
    samples = [(inst.doc, as_text(ksamples.response(inst, key, j))) for inst, key, j in entry.slots]
    audited = (entry.plan.audit_key(), entry.audit_parts) if entry.plan.options.audit else None
    return TaskSpec(name=entry.name, judge=entry.judge, members=tuple(entry.clients), samples=samples,
                    render=entry.renderer, cache_dir=entry.cache_dir, world=entry.world, audit=audited)


def judge_specs(specs: Sequence[TaskSpec], first: TaskSpec | None = None) -> list[Job | None]:
    """The run's pass: one ``Job`` per spec, in order, holding each slot's outcome, the failures, the
    judge's stats and the task's cost block (or ``error``: the pass broke off for that task).

    Each spec's slots are rendered and keyed first. A spec that cannot be raises when it is ``first``
    (the task whose hook started the pass) or when no ``first`` is named; any other gets None (left to
    judge itself). Then: dry run and budget on the whole run's estimate, batch submission, one pool
    (taking the outcomes of calls started while the model generated), one cost table.
    """
    jobs: list[Job | None] = []
    for spec in specs:
        try:
            jobs.append(Job.build(spec.name, spec.judge, len(spec.samples),
                                  lambda i, s=spec: s.render(*s.samples[i]), spec.members))
        except Exception:
            if first is None or spec is first:
                raise
            log.debug("%s: left to judge itself", spec.name, exc_info=True)
            jobs.append(None)
    started = [(spec, job) for spec, job in zip(specs, jobs) if job is not None]
    audits = dict(spec.audit for spec, _ in started if spec.audit is not None)  # each judge's audit, once
    world = started[0][0].world  # every rank takes part in each step below (core/ranks.py)
    saved = functools.partial(recovery.keep_generations, started[0][0].cache_dir)
    pool = [job for _, job in started]
    spend.check_spend(schedule.parts_of(pool) + [part for parts in audits.values() for part in parts()],
                      saved=saved, world=world)  # before any call, on the whole run's estimate
    schedule.submit_all_batches(pool, saved)
    names = [job.name for job in pool]
    schedule.judge(pool, f"judging {names[0]}" if len(names) == 1 else f"judging {len(names)} tasks",
                   early=stream.early())
    stream.end_early()  # before the cost table: the early calls' threads are done
    schedule.summarise(pool, world)
    provenance.warn_aliases(dict.fromkeys(m for spec, _ in started for m in spec.members))
    return jobs
