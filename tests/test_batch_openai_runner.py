"""The provider-neutral batch runner, driven through a fake provider at our own seam (``base.BatchProvider``).

What the provider's wire does is tested in test_batch_openai_wire.py; here: which items are
submitted, how jobs are split, persisted, resumed, waited for (bounded) and collected, and
what each kind of unanswered item becomes under each ``batch_fallback``.
"""

from __future__ import annotations

import sqlite3

import pytest

from lm_eval_mathjudge.batch import base
from lm_eval_mathjudge.batch.jobs import JobStore
from lm_eval_mathjudge.judging.batch import BatchRun
from lm_eval_mathjudge.judging.cache import ReplyCache
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.errors import JudgeRefusal, TransientJudgeError
from lm_eval_mathjudge.core.types import JudgeRequest, Reply
from tests.e2e import THREAD_WAIT_S

CORRECT = "Error Analysis: The student's final answer is 18 and the reference answer is 18.\nFinal Verdict: Correct"


class FakeProvider:
    """Jobs finish after ``polls`` status reads; ``fates`` maps an item index to what the job does with it."""

    name = "fake"

    def __init__(self, fates=None, polls=2, limits=base.Limits(100, 10**9), job_state=base.COMPLETED, drop=()):
        self.fates, self.polls, self.limits, self.job_state, self.drop = fates or {}, polls, limits, job_state, drop
        self.jobs: dict[str, list[str]] = {}
        self.reads: dict[str, int] = {}
        self.cleaned: list[str] = []
        self.index: dict[str, int] = {}

    def submit(self, items):
        job = f"job{len(self.jobs) + 1}"
        self.jobs[job] = [key for key, _ in items if key not in self.drop]
        self.reads[job] = 0
        return job

    def status(self, job):
        self.reads[job] += 1
        total = len(self.jobs[job])
        if self.reads[job] < self.polls:
            return base.JobStatus(base.RUNNING, done=0, total=total, raw_state="in_progress")
        return base.JobStatus(self.job_state, done=total, total=total, raw_state=self.job_state,
                              message="quota exceeded" if self.job_state == base.FAILED else "")

    def results(self, job):
        for key in self.jobs[job]:
            fate = self.fates.get(self.index[key])
            if fate is None:
                yield key, Reply(CORRECT, usage={"prompt_tokens": 100, "completion_tokens": 20})
            elif fate == "expired":
                yield key, base.item_error(base.ITEM_EXPIRED, "expired")
            elif fate == "failed":
                yield key, TransientJudgeError("judge returned HTTP 500", kind="http_500", status=500)
            elif fate == "refused":
                yield key, JudgeRefusal("stopped at max_tokens", kind="max_tokens")
            # "silent": the provider keeps nothing of this item (Gemini drops an expired job's results)

    def cleanup(self, job):
        self.cleaned.append(job)


class Clock:
    def __init__(self):
        self.t = 1_000_000.0
        self.sleeps: list[float] = []

    def now(self):
        return self.t

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.t += seconds


def _items(n):
    return [(f"{i:064x}", JudgeRequest(prompt=f"question {i}")) for i in range(n)]


def _run(tmp_path, provider, items, clock=None, **settings):
    clock = clock or Clock()
    cache = ReplyCache(str(tmp_path / "cache"))
    provider.index.update({key: i for i, (key, _) in enumerate(items)})
    s = JudgeSettings(mode="batch", cache_dir=str(tmp_path / "cache"), **{"batch_poll_seconds": 0.5, **settings})
    run = BatchRun(provider, cache, s, label="fake:judge", progress=False, now=clock.now, sleep=clock.sleep)
    return run.run(items), cache


# (fates, fallback, counts expected, settled keys -> kind)
CASES = [
    ({}, "online", dict(succeeded=6, failed=0, expired=0, refused=0), {}),
    ({0: "expired"}, "online", dict(succeeded=5, expired=1), {}),
    ({0: "expired"}, "fail", dict(succeeded=5, expired=1), {0: "batch_expired"}),
    ({1: "failed", 2: "expired"}, "fail", dict(succeeded=4, failed=1, expired=1), {1: "batch_failed",
                                                                                    2: "batch_expired"}),
    ({1: "failed"}, "online", dict(succeeded=5, failed=1), {}),
    ({3: "refused"}, "online", dict(succeeded=5, refused=1), {3: "max_tokens"}),  # the judge's answer: scored
    ({3: "refused"}, "fail", dict(succeeded=5, refused=1), {3: "max_tokens"}),
]


@pytest.mark.parametrize("fates, fallback, counts, settled", CASES)
def test_each_unanswered_item_ends_as_the_fallback_says(tmp_path, fates, fallback, counts, settled):
    items = _items(6)
    provider = FakeProvider(fates)
    report, cache = _run(tmp_path, provider, items, batch_fallback=fallback)
    assert {k: v for k, v in report.counts().items() if k in counts} == counts
    assert {int(k, 16): e.kind for k, e in report.settled.items()} == settled
    assert all(e.scored for e in report.settled.values())  # a settled item is a counted failure, never a stop
    answered = [i for i in range(6) if i not in fates]
    assert [i for i, (key, _) in enumerate(items) if cache.get(key) is not None] == answered
    assert cache.get(items[answered[0]][0]).text == CORRECT
    assert report.usage == {"prompt_tokens": 100 * len(answered), "completion_tokens": 20 * len(answered)}
    assert provider.cleaned == ["job1"]


def test_a_job_that_fails_as_a_whole_fails_every_item_with_its_reason(tmp_path):
    items = _items(3)
    report, cache = _run(tmp_path, FakeProvider(job_state=base.FAILED), items, batch_fallback="fail")
    assert report.failed == 3 and report.succeeded == 0
    assert {e.kind for e in report.settled.values()} == {"batch_failed"}
    assert "quota exceeded" in str(next(iter(report.settled.values())))
    assert len(cache) == 0


def test_cached_items_are_not_submitted_and_a_fully_cached_run_submits_nothing(tmp_path):
    items = _items(4)
    cache = ReplyCache(str(tmp_path / "cache"))
    cache.put(items[0][0], Reply(CORRECT), "earlier")
    cache.close()
    provider = FakeProvider()
    report, _ = _run(tmp_path, provider, items)
    assert report.submitted == 3 and provider.jobs["job1"] == [k for k, _ in items[1:]]
    again = FakeProvider()
    report, _ = _run(tmp_path, again, items)
    assert report.submitted == 0 and again.jobs == {}


@pytest.mark.parametrize("max_requests, max_bytes, sizes", [
    (2, 10**9, [2, 2, 1]),
    (100, 2 * 1024 + 2 * 30, [2, 2, 1]),  # each tiny request counts ~1 KB of envelope
    (100, 10**9, [5]),
])
def test_large_runs_are_split_into_jobs_within_the_provider_limits(tmp_path, max_requests, max_bytes, sizes):
    provider = FakeProvider(limits=base.Limits(max_requests, max_bytes))
    report, _ = _run(tmp_path, provider, _items(5))
    assert [len(keys) for keys in provider.jobs.values()] == sizes
    assert report.succeeded == 5 and sorted(provider.cleaned) == sorted(provider.jobs)


def test_the_job_id_is_stored_before_waiting_and_a_new_process_resumes_it(tmp_path):
    items = _items(4)

    class Killed(BaseException):
        pass

    class DiesWhilePolling(FakeProvider):
        def status(self, job):
            raise Killed()

    with pytest.raises(Killed):
        _run(tmp_path, DiesWhilePolling(), items)
    with JobStore(str(tmp_path / "cache" / "judge_cache.sqlite3")) as store:
        assert store.rows() == [("fake", "job1", 4, "submitted", 0)]
    resumed = FakeProvider()
    resumed.jobs["job1"] = [k for k, _ in items]  # the provider still has the job the dead run submitted
    resumed.reads["job1"] = 0
    report, cache = _run(tmp_path, resumed, items)
    assert list(resumed.jobs) == ["job1"], "the rerun must not submit again"
    assert report.resumed == ["job1"] and report.submitted == 0 and report.succeeded == 4
    with JobStore(str(tmp_path / "cache" / "judge_cache.sqlite3")) as store:
        assert store.rows() == [("fake", "job1", 4, "completed", 1)]


def test_polls_every_batch_poll_seconds_until_done(tmp_path):
    clock = Clock()
    provider = FakeProvider(polls=4)
    report, _ = _run(tmp_path, provider, _items(2), clock=clock)
    assert clock.sleeps == [0.5, 0.5, 0.5] and provider.reads["job1"] == 4 and report.succeeded == 2


def test_no_wait_submits_and_stops_then_a_rerun_collects(tmp_path):
    items = _items(3)
    first = FakeProvider(polls=2)
    with pytest.raises(base.BatchPending) as stopped:
        _run(tmp_path, first, items, batch_wait=False)
    message = str(stopped.value)
    assert stopped.value.job_ids == ("job1",) and "job1" in message and "Rerun the same command" in message
    assert "judge_cache.sqlite3" in message
    report, cache = _run(tmp_path, first, items, batch_wait=False)  # the job is done by now
    assert report.resumed == ["job1"] and report.succeeded == 3 and len(first.jobs) == 1


def test_waiting_is_bounded_by_batch_max_hours_and_the_job_is_kept(tmp_path):
    clock = Clock()
    provider = FakeProvider(polls=10**9)
    with pytest.raises(base.BatchPending, match="still running 0.01 h after it was submitted"):
        _run(tmp_path, provider, _items(2), clock=clock, batch_max_hours=0.01, batch_poll_seconds=5)
    assert sum(clock.sleeps) == pytest.approx(36.0)  # 0.01 h, never more
    with JobStore(str(tmp_path / "cache" / "judge_cache.sqlite3")) as store:
        assert [row[4] for row in store.rows()] == [0]  # not collected: a rerun resumes it


def test_items_the_provider_could_not_encode_are_left_to_the_online_pass(tmp_path):
    items = _items(3)
    report, cache = _run(tmp_path, FakeProvider(drop={items[1][0]}), items)
    assert report.missing == 1 and report.succeeded == 2 and report.settled == {}
    assert cache.get(items[1][0]) is None


def test_the_job_table_holds_ids_and_request_keys_only(tmp_path):
    _run(tmp_path, FakeProvider(), _items(2))
    db = sqlite3.connect(tmp_path / "cache" / "judge_cache.sqlite3")
    assert [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE name LIKE 'batch_%' AND type='table'")] \
        == ["batch_jobs", "batch_keys"]
    assert db.execute("SELECT COUNT(*) FROM batch_keys").fetchone()[0] == 2


@pytest.mark.parametrize("backend, has_api, cache, error", [
    ("openai", True, True, None),
    ("azure", False, True, "has no batch API here; use judge_mode=online"),  # a service without a batch module
    ("openai", True, False, "set judge_cache=true"),
    ("local", False, False, None),  # the local rule (e.g. a cascade's first stage) is free: judged online
])
def test_a_batch_mode_that_cannot_work_is_refused_when_the_client_is_built(tmp_path, monkeypatch, backend, has_api,
                                                                           cache, error):
    import dataclasses

    from lm_eval_mathjudge import vendors
    from lm_eval_mathjudge.backends.openai.chat import OpenAIChatBackend
    from lm_eval_mathjudge.core.errors import ConfigError
    from lm_eval_mathjudge.judging.batch import check

    if not has_api:  # a vendor record that names no batch transport
        monkeypatch.setitem(vendors.BY_NAME, backend, dataclasses.replace(vendors.BY_NAME[backend], batch=None))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    settings = JudgeSettings(backend=backend, mode="batch", base_url="http://127.0.0.1:9/v1")
    built = OpenAIChatBackend(settings) if backend == "openai" else object()
    args = (built, settings, ReplyCache(str(tmp_path)) if cache else None)
    if error is None:
        check(*args)
    else:
        with pytest.raises(ConfigError, match=error):
            check(*args)


def test_a_job_the_provider_no_longer_knows_is_dropped_and_its_requests_submitted_again(tmp_path):
    from lm_eval_mathjudge.core.errors import FatalJudgeError

    items = _items(2)
    with JobStore(str(ReplyCache(str(tmp_path / "cache")).path)) as store:
        store.save("job-gone", "fake", [k for k, _ in items], 1.0)

    class Forgot(FakeProvider):
        def status(self, job):
            if job == "job-gone":
                raise FatalJudgeError("judge returned HTTP 404: No such Batch object", kind="http_404", status=404)
            return super().status(job)

    provider = Forgot()
    report, _ = _run(tmp_path, provider, items)
    assert report.resumed == [] and list(provider.jobs) == ["job1"] and report.succeeded == 2
    with JobStore(str(tmp_path / "cache" / "judge_cache.sqlite3")) as store:
        assert [(r[1], r[3], r[4]) for r in store.rows()] == [("job-gone", "unknown", 1), ("job1", "completed", 1)]


def test_two_processes_starting_on_the_same_requests_make_one_job(tmp_path):
    import threading
    import time as clock

    items = _items(3)

    class SlowSubmit(FakeProvider):
        def submit(self, items):
            clock.sleep(0.5)  # the upload: the other process arrives meanwhile
            return super().submit(items)

    provider = SlowSubmit(polls=1)
    provider.index.update({key: i for i, (key, _) in enumerate(items)})
    reports = []

    def one_process():
        cache = ReplyCache(str(tmp_path / "cache"))  # its own connection and lease owner, like another process
        s = JudgeSettings(mode="batch", batch_poll_seconds=0.05, cache_dir=str(tmp_path / "cache"))
        reports.append(BatchRun(provider, cache, s, label="fake:judge", progress=False).run(items))
        cache.close()

    threads = [threading.Thread(target=one_process) for _ in range(2)]
    for t in threads:
        t.start()
        clock.sleep(0.1)
    for t in threads:
        t.join(timeout=THREAD_WAIT_S)
    assert list(provider.jobs) == ["job1"]
    # The second found the job (resumed it, or found its replies already collected): never a second submit.
    assert sorted(r.submitted for r in reports) == [0, 3] and len(reports) == 2


@pytest.mark.parametrize("state, kind", [(base.EXPIRED, "batch_expired"), (base.CANCELLED, "batch_failed")])
def test_items_an_unfinished_job_kept_nothing_of_follow_the_fallback(tmp_path, state, kind):
    items = _items(3)
    provider = FakeProvider({1: "silent", 2: "silent"}, job_state=state)
    report, cache = _run(tmp_path, provider, items, batch_fallback="fail")
    assert report.succeeded == 1 and report.missing == 0
    assert {int(k, 16): e.kind for k, e in report.settled.items()} == {1: kind, 2: kind}
    assert f"was {state}" in str(report.settled[items[1][0]])


def test_items_a_completed_job_did_not_return_are_left_to_the_online_pass(tmp_path):
    report, _ = _run(tmp_path, FakeProvider({0: "silent"}), _items(2), batch_fallback="fail")
    assert report.missing == 1 and report.settled == {}


def _left_by_a_stopped_run(tmp_path, items) -> FakeProvider:
    """The job table and the provider as a run killed while polling left them: job1 holds ``items``."""
    with JobStore(str(ReplyCache(str(tmp_path / "cache")).path)) as store:
        store.save("job1", "fake", [k for k, _ in items], Clock().t - 60)  # a minute before the rerun
    provider = FakeProvider()
    provider.jobs["job1"], provider.reads["job1"] = [k for k, _ in items], 0
    provider.index.update({key: i for i, (key, _) in enumerate(items)})
    return provider


def _changed(items, which):
    """The same samples with other generations for ``which``: other requests, so other cache keys."""
    return [(f"{int(key, 16) + 1000:064x}", JudgeRequest(prompt=f"{request.prompt} (regenerated)"))
            if i in which else (key, request) for i, (key, request) in enumerate(items)]


def test_a_rerun_with_some_generations_changed_takes_the_first_jobs_replies_and_submits_only_those(tmp_path):
    first = _items(6)
    provider = _left_by_a_stopped_run(tmp_path, first)
    rerun = _changed(first, {2})
    report, cache = _run(tmp_path, provider, rerun)
    assert report.resumed == ["job1"] and provider.jobs["job2"] == [rerun[2][0]] and report.submitted == 1
    assert all(cache.get(key) is not None for key, _ in rerun) and cache.get(first[2][0]) is not None  # paid: kept
    with JobStore(cache.path) as store:
        assert [(r[1], r[4]) for r in store.rows()] == [("job1", 1), ("job2", 1)]  # both collected


def test_a_rerun_whose_generations_all_changed_still_collects_the_first_job(tmp_path):
    first = _items(4)
    provider = _left_by_a_stopped_run(tmp_path, first)
    rerun = _changed(first, set(range(4)))
    report, cache = _run(tmp_path, provider, rerun)
    assert report.resumed == [] and report.adopted == ["job1"] and report.adopted_replies == 4
    assert provider.jobs["job2"] == [k for k, _ in rerun] and report.succeeded == 4  # this run's own, counted
    assert all(cache.get(key) is not None for key, _ in first + rerun)
    with JobStore(cache.path) as store:
        assert [(r[1], r[4]) for r in store.rows()] == [("job1", 1), ("job2", 1)]


def test_a_job_another_live_process_polls_is_not_adopted(tmp_path):
    first = _items(2)
    provider = _left_by_a_stopped_run(tmp_path, first)
    other = ReplyCache(str(tmp_path / "cache"))  # another process, alive, polling job1
    assert other.claim("batch-job:job1", 3600)
    report, cache = _run(tmp_path, provider, _changed(first, {0, 1}))
    assert report.adopted == [] and provider.reads["job1"] == 0
    with JobStore(cache.path) as store:
        assert [(r[1], r[4]) for r in store.rows()] == [("job1", 0), ("job2", 1)]
