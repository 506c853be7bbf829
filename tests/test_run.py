"""The run's one pool (judging/schedule.py) and its wiring (harness/run.py) at our own seam: real
JudgeClients (real parsers, real cache) over fake in-process backends.

The end-to-end proof through the lm_eval CLI is tests/test_run_e2e.py.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any, Callable

import pytest

from lm_eval_mathjudge.judging import client as client_module
from lm_eval_mathjudge.cost import spend
from lm_eval_mathjudge.harness import entry, recovery
from lm_eval_mathjudge.judging import schedule
from lm_eval_mathjudge.judging.panel import Panel
from lm_eval_mathjudge.judging.cache import Reply, ReplyCache
from lm_eval_mathjudge.judging.client import JudgeClient
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.errors import FatalJudgeError, TransientJudgeError
from lm_eval_mathjudge.core.parsing import parse_exact_match, parse_vlm
from lm_eval_mathjudge.calls.retry import RetryPolicy
from lm_eval_mathjudge.core.types import JudgeRequest, Outcome
from tests._helpers import REPLY_CORRECT, REPLY_INCORRECT
from tests.e2e import THREAD_WAIT_S

VLM_REPLY = ("INTERMEDIATE_CORRECT: 1\nFINAL_CORRECT: 1\nACTION_REFLECTION: 0\n"
             "EXPLANATION: The final answer 18 matches the official one.")


class Clock:
    """In-flight bookkeeping shared by every fake backend of a test (one pool or several?).

    With ``width``, each call waits until ``width`` calls have been in flight together once: a pool
    that wide fills at once, however busy the machine; a narrower one never gets there (the wait is
    a safety net) and the test's count says so.
    """

    def __init__(self, width: int = 0):
        self.lock = threading.Condition()
        self.in_flight: dict[str, int] = {}
        self.overlap: set[frozenset[str]] = set()  # sets of backends seen in flight together
        self.max_total = 0
        self.width = width

    def enter(self, name: str) -> None:
        with self.lock:
            self.in_flight[name] = self.in_flight.get(name, 0) + 1
            live = frozenset(n for n, c in self.in_flight.items() if c)
            self.overlap.add(live)
            self.max_total = max(self.max_total, sum(self.in_flight.values()))
            self.lock.notify_all()
            self.lock.wait_for(lambda: self.max_total >= self.width, timeout=THREAD_WAIT_S)

    def leave(self, name: str) -> None:
        with self.lock:
            self.in_flight[name] -= 1


class Backend:
    def __init__(self, name: str, clock: Clock, reply: Callable[[JudgeRequest], str], delay: float = 0.02):
        self.name, self.clock, self.reply, self.delay = name, clock, reply, delay
        self.calls: list[str] = []

    def identity(self) -> dict[str, Any]:
        return {"backend": "fake", "model": self.name}

    def complete(self, request: JudgeRequest) -> Reply:
        self.clock.enter(self.name)
        try:
            time.sleep(self.delay)
            self.calls.append(request.prompt)
            return Reply(text=self.reply(request), usage={"prompt_tokens": 50, "completion_tokens": 10})
        finally:
            self.clock.leave(self.name)

    def close(self) -> None:
        pass


def em_reply(request: JudgeRequest) -> str:
    return REPLY_CORRECT if request.prompt.endswith("answer 18") else REPLY_INCORRECT


def client(backend: Backend, parse=parse_exact_match, cache: ReplyCache | None = None, **settings) -> JudgeClient:
    config = JudgeSettings(**{"backend": "openai", "model": backend.name, "concurrency": 4, **settings})
    return JudgeClient(backend, parse, config, "test@0", cache, progress=False)


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setattr(client_module, "RetryPolicy", functools.partial(RetryPolicy, base_delay=0.001))


def responses(task: str, n: int, *, duplicate_every: int = 0) -> list[str]:
    """Responses of one task: odd ones right (18); every ``duplicate_every``-th repeats the one before."""
    out = []
    for i in range(n):
        if duplicate_every and i and i % duplicate_every == 0:
            out.append(out[-1])
        else:
            out.append(f"{task} doc {i}: answer {18 if i % 2 else 16}")
    return out


def job(name: str, judge: JudgeClient, texts: list[str], renders: list[int] | None = None,
        skip: set[int] = frozenset()) -> schedule.Job:
    def render(i: int) -> JudgeRequest | Outcome:
        if renders is not None:
            renders.append(i)
        if i in skip:
            return Outcome(failure="no_media", error="the generator made no image")
        return JudgeRequest(prompt=texts[i])
    return schedule.Job.build(name, judge, len(texts), render)


def test_tasks_of_different_backends_share_one_pool_and_keep_their_own_outcomes():
    clock = Clock(width=4)
    em = Backend("em-judge", clock, em_reply)
    vlm = Backend("vlm-judge", clock, lambda r: VLM_REPLY)
    jobs = [job("gsm8k_gpt4em", client(em), responses("gsm8k", 12)),
            job("math500_gpt4em", client(em), responses("math500", 12)),
            job("gsm8k_vlmjudge", client(vlm, parse=parse_vlm), responses("gsm8k-vlm", 12))]
    schedule.judge(jobs, "judging 3 tasks", progress=False)

    assert frozenset({"em-judge", "vlm-judge"}) in clock.overlap  # both backends in flight at once
    assert clock.max_total == 4  # one limit for the run (not 4 per task: that would reach 12)
    for j in jobs[:2]:
        assert [j.outcome(i).verdict.correct for i in range(12)] == [i % 2 == 1 for i in range(12)]
    assert all(jobs[2].outcome(i).verdict.final_correct == 1 for i in range(12))
    assert [j.client.stats.calls for j in jobs] == [12, 12, 12]  # each task's stats are its own
    assert len(em.calls) == 24 and len(vlm.calls) == 12


def test_the_pool_is_as_wide_as_the_widest_client():
    clock = Clock(width=6)
    backend = Backend("em-judge", clock, em_reply)
    jobs = [job(f"t{k}", client(backend, concurrency=c), responses(f"t{k}", 10)) for k, c in enumerate((2, 6))]
    schedule.judge(jobs, "judging", progress=False)
    assert clock.max_total == 6


def test_requests_are_keyed_once_then_rendered_again_only_for_their_call():
    clock, renders = Clock(), []
    texts = responses("gsm8k", 9, duplicate_every=3)  # slots 3 and 6 repeat slots 2 and 5
    j = job("gsm8k_gpt4em", client(Backend("em-judge", clock, em_reply)), texts, renders, skip={8})
    assert renders == list(range(9)) and j.keys[8] is None
    assert (j.client.stats.requests, j.client.stats.unique) == (8, 6)
    renders.clear()
    schedule.judge([j], "judging", progress=False)
    assert sorted(renders) == [0, 1, 2, 4, 5, 7]  # one render per unique request; no duplicate, no skipped
    assert j.outcome(3) == j.outcome(2) and j.outcome(8).failure == "no_media"


def test_a_task_whose_judge_is_refused_fails_alone():
    """A fatal error (bad key) of one task's judge aborts that judge's calls only."""
    clock = Clock()

    def refuse(request):
        raise FatalJudgeError("401 invalid api key", kind="http_401")
    bad = Backend("vlm-judge", clock, lambda r: VLM_REPLY)
    bad.reply = refuse
    good = Backend("em-judge", clock, em_reply)
    jobs = [job("a_vlmjudge", client(bad, parse=parse_vlm), responses("a", 8)),
            job("b_gpt4em", client(good), responses("b", 8))]
    schedule.judge(jobs, "judging", progress=False)
    assert all(jobs[0].outcome(i).transport_failed for i in range(8))
    assert jobs[0].client.fatal_error is not None and jobs[1].client.fatal_error is None
    assert [jobs[1].outcome(i).verdict.correct for i in range(8)] == [i % 2 == 1 for i in range(8)]


def test_an_unexpected_error_stays_with_its_task():
    clock = Clock()
    texts = responses("a", 6)

    def broken(i: int):
        if i == 3 and renders_seen.count(3):  # keying works; the second render (before the call) breaks
            raise KeyError("doc field vanished")
        renders_seen.append(i)
        return JudgeRequest(prompt=texts[i])
    renders_seen: list[int] = []
    backend = Backend("em-judge", clock, em_reply)
    bad = schedule.Job.build("a_gpt4em", client(backend), 6, broken)
    good = job("b_gpt4em", client(backend), responses("b", 6))
    schedule.judge([bad, good], "judging", progress=False)
    assert isinstance(bad.error, KeyError)
    assert "a_gpt4em: judging failed" in schedule.failure_message(bad)
    assert good.error is None and len(good.outcomes) == 6
    schedule.summarise([bad, good])  # the run's cost table still adds up what was paid
    assert good.cost["cost"]["calls"] == 6 and good.cost["run_cost"]["total"]["calls"] == len(backend.calls)


def test_transient_failures_are_outcomes_of_their_own_task():
    clock = Clock()

    def flaky(request):
        raise TransientJudgeError("503 overloaded", status=503)
    down = Backend("em-down", clock, em_reply)
    down.reply = flaky
    jobs = [job("a", client(down, max_retries=1), responses("a", 3)),
            job("b", client(Backend("em-up", clock, em_reply)), responses("b", 3))]
    schedule.judge(jobs, "judging", progress=False)
    assert [jobs[0].outcome(i).transport_failed for i in range(3)] == [True] * 3
    assert not any(jobs[1].outcome(i).failure for i in range(3))
    assert jobs[0].client.stats.failures and not jobs[1].client.stats.failures


def test_cached_requests_are_settled_and_cost_no_call(tmp_path):
    clock = Clock()
    cache = ReplyCache(str(tmp_path))
    try:
        backend = Backend("em-judge", clock, em_reply)
        texts = responses("gsm8k", 4)
        first = job("gsm8k", client(backend, cache=cache), texts)
        assert not any(first.client.settled(k) for k in first.first_slot)
        schedule.judge([first], "judging", progress=False)
        again = job("gsm8k", client(backend, cache=cache), texts)
        assert all(again.client.settled(k) for k in again.first_slot)
        schedule.judge([again], "judging", progress=False)
        assert len(backend.calls) == 4 and again.client.stats.cache_hits == 4
    finally:
        cache.close()


class Entry:
    """The part of a task's run entry (harness/entry.py) that claiming a pass reads."""

    def __init__(self, joins: bool = True):
        self._joins = joins

    def joins(self) -> bool:
        return self._joins


def test_pending_claims_every_joining_task_once(monkeypatch):
    monkeypatch.setattr(entry, "_PENDING", [])
    a, b, c, panel = Entry(), Entry(), Entry(), Entry(joins=False)
    for t in (a, panel, b, c):
        entry.register(t)
    assert entry.claim(b) == [a, b, c]  # lm-eval's order; the panel judges itself
    assert entry.claim(c) == [c]  # already claimed: nobody else is judged twice


def test_task_by_task_switch(monkeypatch):
    monkeypatch.setattr(entry, "_PENDING", [])
    monkeypatch.setenv(entry.TASK_BY_TASK_ENV, "1")
    a, b = Entry(), Entry()
    entry.register(a)
    entry.register(b)
    assert entry.claim(a) == [a]


def test_the_schedule_takes_tasks_in_turn_then_the_slow_one_first():
    clock = Clock()
    backend = Backend("em-judge", clock, em_reply)
    fast, slow = (job(name, client(backend), responses(name, 6)) for name in ("fast", "slow"))
    pick = schedule.Schedule([fast, slow])
    assert pick.total == 12
    picks = [pick.next()[0].name for _ in range(4)]
    assert picks == ["fast", "slow", "fast", "slow"]  # equal work left: in turn
    pick.done(fast, 0.1)
    pick.done(slow, 2.0)
    assert [pick.next()[0].name for _ in range(4)] == ["slow"] * 4  # 4 x 2 s left beats 4 x 0.1 s
    assert [pick.next()[0].name for _ in range(4)] == ["fast"] * 4
    with pytest.raises(ValueError):
        pick.next()  # every request was handed out once


@pytest.mark.parametrize("settings, raised, words", [
    ({"dry_run": True}, "DryRunDone", "dry run (judge_dry_run=true): nothing was sent to any judge"),
    ({"budget_usd": 1e-9}, "BudgetExceeded", "the judge estimate is above judge_budget_usd=1e-09"),
])
def test_dry_run_and_budget_stop_before_any_call_and_count_the_whole_run(tmp_path, settings, raised, words):
    """Two tasks (as a panel's members are two parts too): the estimate covers both, nothing is sent."""
    clock, renders = Clock(), []
    backend = Backend("gpt-4o", clock, em_reply)
    jobs = [job(name, client(backend, **settings), responses(name, 5), renders) for name in ("a", "b")]
    with pytest.raises(Exception) as caught:
        spend.check_spend(schedule.parts_of(jobs), saved=functools.partial(recovery.keep_generations, str(tmp_path)))
    assert type(caught.value).__name__ == raised
    text = str(caught.value)
    assert words in text and "10 judge call(s)" in text
    assert backend.calls == []


def test_without_dry_run_or_budget_nothing_is_estimated(tmp_path):
    renders = []
    jobs = [job("a", client(Backend("gpt-4o", Clock(), em_reply)), responses("a", 5), renders)]
    renders.clear()
    spend.check_spend(schedule.parts_of(jobs), saved=functools.partial(recovery.keep_generations, str(tmp_path)))
    assert renders == []  # no request rendered for an estimate nobody asked for


def test_a_panel_task_gets_a_cost_block_with_every_member():
    clock = Clock()
    members = [client(Backend(name, clock, em_reply)) for name in ("gpt-4o", "gpt-4o-mini")]
    texts = responses("p", 4)
    panel = Panel([("openai:gpt-4o", members[0]), ("openai:gpt-4o-mini", members[1])], "majority", 2,
                  lambda verdict: {"correct": verdict.correct})
    j = schedule.Job.build("gsm8k_gpt4em", panel, len(texts), lambda i: JudgeRequest(prompt=texts[i]), members)
    schedule.judge([j], "judging", progress=False)
    schedule.summarise([j])
    block = j.cost["cost"]
    assert block["calls"] == 8 and block["requests"] == 8
    assert set(block["judges"]) == {"openai:gpt-4o", "openai:gpt-4o-mini"}
    assert block["usd"] is not None and block["usd"] > 0
    assert j.cost["run_cost"]["total"]["calls"] == 8  # the run's one cost table holds both members
    assert [j.outcome(i).verdict.correct for i in range(4)] == [i % 2 == 1 for i in range(4)]


def test_panel_members_are_asked_at_once_inside_the_one_pool():
    """A panel is one request to the pool; its members are in flight together, not one after another."""
    clock = Clock(width=3)  # a panel request (two members at once) beside a plain one
    a, b = (Backend(name, clock, em_reply) for name in ("judge-a", "judge-b"))
    members = [client(a, concurrency=1), client(b, concurrency=1)]
    panel = Panel([("a", members[0]), ("b", members[1])], "majority", 2, lambda verdict: {})
    plain = client(Backend("judge-c", clock, em_reply), concurrency=2)  # the pool: 2 wide
    texts = responses("p", 4)
    jobs = [schedule.Job.build("panel", panel, 4, lambda i: JudgeRequest(prompt=texts[i]), members),
            job("plain", plain, responses("q", 4))]
    schedule.judge(jobs, "judging", progress=False)
    assert any({"judge-a", "judge-b"} <= live for live in clock.overlap)  # one panel request, both members at once
    assert any({"judge-c"} < live for live in clock.overlap)  # and the plain task beside it, same pool
    assert [m.stats.calls for m in members] == [4, 4] and plain.stats.calls == 4
    panel.close()


# ---------------------------------------------------------------- batch mode, batch_wait=false
class _BatchClient:
    """Stands in for a JudgeClient in batch mode whose pre-fill submits a job and stops (BatchPending)."""

    def __init__(self, name: str, outcome: str):
        self.name, self.outcome, self.batch_mode, self.prefilled = name, outcome, outcome != "online", []
        self.settings = JudgeSettings(mode="batch")

    def key(self, request) -> str:
        return f"{self.name}:{request.prompt}"

    def prefill(self, items):
        from lm_eval_mathjudge.batch.base import BatchPending

        self.prefilled.append(len(items))
        if self.outcome == "pending":
            raise BatchPending(f"job-{self.name} submitted", job_ids=[f"job-{self.name}"])


class _BatchJob:
    def __init__(self, name: str, outcome: str):
        self.name, self.client = name, _BatchClient(name, outcome)

    def requests(self):
        return iter([(f"{self.name}-k{i}", None) for i in range(3)])


@pytest.mark.parametrize("outcomes, pending_jobs", [
    (["pending", "pending", "pending"], ["job-t0", "job-t1", "job-t2"]),
    (["pending", "collected", "pending"], ["job-t0", "job-t2"]),
    (["online", "pending"], ["job-t1"]),
    (["collected", "online"], []),
])
def test_every_task_submits_its_batch_before_the_run_stops(outcomes, pending_jobs):
    from lm_eval_mathjudge.batch.base import BatchPending

    jobs = [_BatchJob(f"t{i}", outcome) for i, outcome in enumerate(outcomes)]
    if pending_jobs:
        with pytest.raises(BatchPending) as info:
            schedule.submit_all_batches(jobs, saved=lambda: "The generations of 3 task(s) are saved in x.")
        assert list(info.value.job_ids) == pending_jobs
        assert all(job_id in str(info.value) for job_id in pending_jobs)
        assert "generations" in str(info.value)  # what was kept for the rerun is said, once for the run
    else:
        schedule.submit_all_batches(jobs)
    # every batch task was submitted, not only the ones before the first stop
    assert [job.client.prefilled for job in jobs] == [[3] if o != "online" else [] for o in outcomes]


def test_a_batch_panel_submits_every_member_before_it_stops():
    from lm_eval_mathjudge.batch.base import BatchPending

    members = [_BatchClient("a", "pending"), _BatchClient("b", "online"), _BatchClient("c", "pending")]
    panel = Panel([(m.name, m) for m in members], "majority", 2, lambda verdict: {})
    with pytest.raises(BatchPending) as info:
        panel.prefill([("k0", JudgeRequest(prompt="x")), ("k1", JudgeRequest(prompt="y"))])
    assert list(info.value.job_ids) == ["job-a", "job-c"]  # the first pending member did not stop the last
    assert [m.prefilled for m in members] == [[2], [], [2]]
