"""The judging line (calls/progress.py): its counts, its rate and ETA on a stepped clock, and how the run's pool
and the early calls count on it (judging/schedule.py) -- each request once, cached replies apart."""

from __future__ import annotations

import io
import threading

import pytest

from lm_eval_mathjudge.calls.progress import WINDOW, Meter
from lm_eval_mathjudge.core.types import JudgeRequest
from lm_eval_mathjudge.judging import schedule
from lm_eval_mathjudge.judging.cache import ReplyCache
from tests.test_run import Backend, Clock, client, em_reply, job, responses


class Steps:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def replay(meter: Meter, clock: Steps, events: str) -> None:
    """``events``: one letter per finished request, each after ``clock`` moved: c = a real call 0.1 s after
    the one before, f = a call answered off-contract 0.1 s after, h = a cached reply at once, n = a request
    not sent (the endpoint stopped answering) at once, w = 5 s of silence."""
    for event in events:
        if event == "w":
            clock.now += 5
            continue
        clock.now += {"c": 0.1, "f": 0.1, "h": 0.0, "n": 0.0}[event]
        meter.finished(calls=int(event in "cf"), cached=event == "h", failed=event in "fn")


# events, total -> rate (req/s, None: no real call yet), ETA (s, None: none shown), words the line shows/omits
CASES = [
    ("hhhhhhhhhh", 300, None, None, ["0 failed", "10 cached"], ["req/s", "ETA"]),  # a rerun: no rate out of the cache
    ("cccccccccc", 100, 10.0, 9.0, ["10.0 req/s", "ETA 00:09"], ["cached"]),
    ("hhhhhcccccccccchhhhh", 100, 10.0, 8.0, ["10 cached", "10.0 req/s", "ETA 00:08"], []),  # cached: no time, no rate
    ("ccccfccccf", 20, 10.0, 1.0, ["2 failed", "ETA 00:01"], []),
    ("cccccnnnnnnnnnn", 25, 10.0, 1.0, ["10 failed", "10.0 req/s", "ETA 00:01"], ["cached"]),  # not sent: no rate
    ("cccccw", 105, 5 / 5.5, 100 * 5.5 / 5, ["0.9 req/s", "ETA 01:50"], []),  # a stall lowers the rate as time runs
    ("c" * 10, 10, 10.0, 0.0, ["10.0 req/s"], ["ETA"]),  # done: no ETA
]


@pytest.mark.parametrize("events, total, rate, eta, shown, omitted", CASES, ids=[c[0][:12] for c in CASES])
def test_the_line_counts_real_calls_apart_from_cached_replies(events, total, rate, eta, shown, omitted):
    clock = Steps()
    meter = Meter(total, "judging", enabled=False, spend=lambda: 0.0123, clock=clock)
    replay(meter, clock, events)
    assert meter.done == len(events.replace("w", ""))
    assert meter.cached == events.count("h") and meter.failed == events.count("f") + events.count("n")
    assert meter.rate() == (pytest.approx(rate) if rate is not None else None)
    assert meter.eta() == (pytest.approx(eta) if eta is not None else None)
    text = meter.text()
    assert "0.0123 USD" in text
    assert all(word in text for word in shown), text
    assert not any(word in text for word in omitted), text


def test_the_rate_is_measured_over_the_last_window_of_real_calls():
    """A slow start (1 call/s) then a fast judge (20 calls/s): once a window of fast calls is in, the rate is
    theirs, not the run's average."""
    clock = Steps()
    meter = Meter(1000, "judging", enabled=False, clock=clock)
    for _ in range(30):
        clock.now += 1.0
        meter.finished()
    assert meter.rate() == pytest.approx(1.0)
    for _ in range(WINDOW):
        clock.now += 0.05
        meter.finished()
    assert meter.rate() == pytest.approx(20.0)
    assert meter.eta() == pytest.approx((1000 - 30 - WINDOW) / 20.0)


def test_spend_unknown_and_notes():
    clock = Steps()
    meter = Meter(4, "judging", enabled=False, spend=lambda: None, clock=clock)
    replay(meter, clock, "cc")
    meter.set_postfix(retries=3, rate_limited=1)
    meter.set_postfix_str("stopping: 2 in flight, 9s left")
    text = meter.text()
    assert "USD unknown" in text and "retries=3, rate_limited=1" in text and text.endswith("9s left")
    meter.expect(10)
    assert meter.total == 10 and meter.eta() == pytest.approx(8 / (2 / 0.2))


def test_a_drawn_line_shows_the_counts_and_goes_on_after_reopening(monkeypatch):
    """On a real tqdm bar: the format carries our text, not tqdm's own rate (which counts cached replies)."""
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    clock = Steps()
    meter = Meter(5, "judging while the model generates", spend=lambda: 0.5, clock=clock)
    replay(meter, clock, "hc")
    meter.reopen("judging gsm8k_gpt4em")
    replay(meter, clock, "ccc")
    meter.close()
    out = err.getvalue()
    last = out.replace("\r", "\n").strip().splitlines()[-1]
    assert last.startswith("judging gsm8k_gpt4em: 5/5, 0 failed, 0.5000 USD, ") and "1 cached |" in last, last
    assert "it/s" not in out and "req/s]" not in out  # tqdm's own rate never drawn


# ---------------------------------------------------------------------- the pool and the early calls count once
class Recorded(Meter):
    made: list[Recorded] = []

    def __init__(self, total, desc, enabled=True, **kwargs):
        super().__init__(total, desc, False, **kwargs)
        Recorded.made.append(self)


def test_the_pass_counts_each_request_once_and_cached_ones_apart(monkeypatch, tmp_path):
    monkeypatch.setattr(schedule, "Meter", Recorded)
    Recorded.made.clear()
    cache = ReplyCache(str(tmp_path))
    texts = responses("p", 6) + responses("p", 2)  # 8 slots, 6 unique requests
    first = job("gsm8k_gpt4em", client(Backend("judge", Clock(), em_reply), cache=cache), texts)
    schedule.judge([first], "judging", progress=False)
    again = job("gsm8k_gpt4em", client(Backend("judge", Clock(), em_reply), cache=cache), responses("p", 9))
    schedule.judge([again], "judging", progress=False)  # 6 from the cache, 3 new
    one, two = Recorded.made
    assert (one.total, one.done, one.cached, one.failed) == (6, 6, 0, 0)
    assert (two.total, two.done, two.cached) == (9, 9, 6)


def early_calls(judge, texts: list[str], meter: Meter) -> schedule.Early:
    """Early calls for ``texts``, each finished and counted on ``meter`` before this returns."""
    early = schedule.Early(4, meter, [judge])
    for text in texts:
        early.start(judge, judge.key(JudgeRequest(prompt=text)), JudgeRequest(prompt=text))
    for call in list(early._calls.values()):  # noqa: SLF001 - the test waits for the calls it started
        call.result(timeout=30)
    counted = threading.Event()
    while meter.tagged[schedule.EARLY] < len(texts):  # each call is counted by its done-callback
        counted.wait(0.01)
    return early


def test_early_calls_are_counted_as_they_finish_and_the_pass_counts_only_the_rest():
    """Calls started while the model generates are on the line before the pass (no jump from 0 when it
    starts); the pass then counts only what no early call answered, and its total becomes exact."""
    texts = responses("p", 10)
    judge = client(Backend("judge", Clock(), em_reply))
    meter = Meter(12, "judging (streamed)", enabled=False)  # 12: the estimate before the pass
    early = early_calls(judge, texts[:4], meter)
    early.start(judge, judge.key(JudgeRequest(prompt=texts[0])), JudgeRequest(prompt=texts[0]))  # once per key
    assert (meter.done, meter.total, early.started) == (4, 12, 4) and meter.rate() is not None
    schedule.judge([job("gsm8k_gpt4em", judge, texts)], "judging gsm8k_gpt4em", progress=False, early=early)
    early.close()
    assert (meter.total, meter.done) == (10, 10) and meter.tagged[schedule.EARLY] == 4
    assert judge.stats.calls == 10


def test_a_second_pass_on_the_same_line_keeps_done_within_the_total():
    """Two passes on the early calls' line (a task judged by a pass of its own): the second total counts the
    first pass's requests too."""
    judge = client(Backend("judge", Clock(), em_reply))
    meter = Meter(6, "judging (streamed)", enabled=False)
    early = early_calls(judge, responses("a", 2) + responses("b", 2), meter)
    for name in ("a", "b"):
        schedule.judge([job(name, judge, responses(name, 5))], f"judging {name}", progress=False, early=early)
        assert meter.done <= meter.total
    assert (meter.done, meter.total) == (10, 10)


def test_a_task_that_broke_off_does_not_count_its_early_calls_twice():
    judge = client(Backend("judge", Clock(), em_reply))
    meter = Meter(8, "judging (streamed)", enabled=False)
    texts = responses("p", 8)
    early = early_calls(judge, texts[:3], meter)
    broken = job("gsm8k_gpt4em", judge, texts)
    broken.error = RuntimeError("the task's filters failed")
    schedule.judge([broken], "judging gsm8k_gpt4em", progress=False, early=early)
    assert (meter.done, meter.total) == (8, 8)
    assert meter.failed == 5 and judge.stats.calls == 3  # nothing asked after the break, none counted as a call
    assert meter.rate() is None  # the pass measured no call of its own: none of the skipped ones is one


def test_reopening_measures_the_rate_afresh():
    """The early calls came at the model's pace; the pass's rate is its own."""
    clock = Steps()
    meter = Meter(100, "judging (streamed)", enabled=False, clock=clock)
    for _ in range(10):
        clock.now += 1.0
        meter.finished()
    meter.reopen("judging gsm8k_gpt4em")
    assert meter.rate() is None and meter.done == 10
    replay(meter, clock, "ccccc")
    assert meter.rate() == pytest.approx(10.0)


def test_a_closed_line_still_counts():
    clock = Steps()
    meter = Meter(2, "judging", enabled=False, clock=clock)
    meter.close()
    replay(meter, clock, "c")
    assert meter.done == 1 and meter.rate() is not None
