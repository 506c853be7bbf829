"""The local judge against responses that never finish (issue 7): a per-item time limit in worker
processes, counted per-sample failures, the other samples going on, and no process left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lm_eval_mathjudge.backends.local import ITEM_TIME_LIMIT, LocalBackend
from lm_eval_mathjudge.judging.client import JudgeClient
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.errors import JudgeRefusal
from lm_eval_mathjudge.core.parsing import parse_exact_match
from lm_eval_mathjudge.core.types import JudgeRequest
from tests._helpers import rule_outcome
from tests.conftest import read_jsonl
from tests.e2e import TIMEOUT_S, run_lm_eval

REPO = Path(__file__).resolve().parents[1]
LIMIT = 4.0  # seconds; a normal comparison takes milliseconds
# Answers that make sympy build numbers with billions of digits (each hung a whole run before).
HOSTILE = [r"The answer is $\boxed{10^{10^{10}}}$.", r"So we get \boxed{9^{9^{9^{9^{9}}}}}",
           r"Final answer: \boxed{100000000!}"]
# Against a gold that is a plain number the answer policy refuses these before any sympy work (a
# numeric gold takes a number, not an expression); an expression gold sends them to math-verify.
EXPRESSION = r"\frac{\sqrt{3}}{2}"
NORMAL = [("18", "So she makes 9 * 2 = \\boxed{18} dollars.", True),
          ("3", "Hence x = \\boxed{4}.", False),
          ("\\frac{1}{2}", "The probability is $\\boxed{0.5}$.", True)]

pytestmark = [pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc to find workers"),
              pytest.mark.e2e]  # what is tested is the worker process: its time limit, its death, its parent's


def request(answer: str, response: str) -> JudgeRequest:
    return JudgeRequest(prompt="", fields={"answer": answer, "response": response})


def verdict(backend: LocalBackend, answer: str, response: str) -> bool:
    return parse_exact_match(backend.complete(request(answer, response)).text).correct


def workers_of(pid: int) -> set[int]:
    """Live worker processes whose parent is ``pid``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z" and b"local_worker" in cmdline:
            found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids: set[int], seconds: float) -> set[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    return {p for p in pids if alive(p)}


@pytest.fixture
def backend():
    judge = LocalBackend(workers=2, time_limit=LIMIT)
    yield judge
    judge.close()


def warm(backend: LocalBackend, workers: int = 2) -> None:
    """Start ``workers`` workers (concurrent calls), so start-up is not part of what a test times."""
    threads = [threading.Thread(target=verdict, args=(backend, "18", "\\boxed{18}")) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_hostile_answers_become_counted_timeouts_through_the_client():
    requests = [request(gold, response) for gold, response, _ in NORMAL]
    requests += [request(EXPRESSION, response) for response in HOSTILE]
    client = JudgeClient(LocalBackend(workers=2, time_limit=LIMIT), parse_exact_match,
                         JudgeSettings(backend="local", model="math-verify", concurrency=4), "t", None, progress=False)
    try:
        outcomes = client.judge_all(requests)
    finally:
        client.close()
    assert [o.verdict.correct for o in outcomes[:len(NORMAL)]] == [correct for _, _, correct in NORMAL]
    assert [o.failure for o in outcomes[len(NORMAL):]] == ["timeout"] * len(HOSTILE)
    assert not any(o.transport for o in outcomes)  # scored as judge failures, the run goes on
    assert client.stats.failures == {"timeout": len(HOSTILE)}
    assert "more than 4 s" in outcomes[-1].error


def test_other_samples_are_judged_while_one_overruns():
    judge = LocalBackend(workers=2, time_limit=12.0)  # long enough to see the others finish first
    try:
        warm(judge)
        hostile: list[BaseException] = []

        def run_hostile():
            try:
                judge.complete(request(EXPRESSION, HOSTILE[0]))
            except JudgeRefusal as exc:
                hostile.append(exc)

        thread = threading.Thread(target=run_hostile)
        thread.start()
        time.sleep(0.5)  # the hostile item holds one worker now
        results = [verdict(judge, gold, response) for gold, response, _ in NORMAL * 4]
        assert thread.is_alive(), "the others should finish long before the hostile item's limit"
        assert results == [correct for _, _, correct in NORMAL * 4]
        thread.join()
        assert len(hostile) == 1 and hostile[0].kind == "timeout"
    finally:
        judge.close()


def test_the_overrunning_worker_is_killed_and_replaced(backend):
    warm(backend, 1)
    before = workers_of(os.getpid())
    with pytest.raises(JudgeRefusal) as info:
        backend.complete(request(EXPRESSION, HOSTILE[2]))
    assert info.value.kind == "timeout"
    assert not wait_gone(before, TIMEOUT_S)  # the worker that overran is gone, not left computing
    assert verdict(backend, "18", "\\boxed{18}") is True  # a fresh worker takes over
    assert workers_of(os.getpid()) and not workers_of(os.getpid()) & before


def test_a_worker_that_dies_mid_item_fails_only_that_sample(backend):
    warm(backend, 1)
    (pid,) = workers_of(os.getpid())
    threading.Timer(1.0, os.kill, (pid, signal.SIGKILL)).start()
    with pytest.raises(JudgeRefusal) as info:
        backend.complete(request(EXPRESSION, HOSTILE[0]))
    assert info.value.kind == "local_error" and "died" in str(info.value)
    assert verdict(backend, "3", "x = \\boxed{3}") is True


def test_a_numeric_gold_refuses_hostile_expressions_without_computing_them(backend):
    warm(backend, 1)
    for response in HOSTILE:  # a verdict, not the time-out that computing them would end in
        found = rule_outcome(backend, "18", response)
        assert found.outcome == "undecided" and "not a single number" in found.analysis


def test_close_leaves_no_worker_behind():
    judge = LocalBackend(workers=2, time_limit=LIMIT)
    warm(judge)
    pids = workers_of(os.getpid())
    assert len(pids) == 2
    judge.close()
    assert not wait_gone(pids, TIMEOUT_S)


_ORPHAN = """
import sys, time
from lm_eval_mathjudge.backends.local import LocalBackend
from lm_eval_mathjudge.core.types import JudgeRequest
judge = LocalBackend(workers=1, time_limit=2.0)
judge.complete(JudgeRequest(prompt="", fields={"answer": "1", "response": "1"}))
print("ready", flush=True)
if sys.argv[1] == "busy":
    judge.complete(JudgeRequest(prompt="", fields={"answer": sys.argv[3], "response": sys.argv[2]}))
time.sleep(600)
"""


@pytest.mark.parametrize("state", ["idle", "busy"])
def test_workers_exit_when_their_parent_is_killed(state):
    """SIGKILL skips atexit: an idle worker sees its stdin close; a busy one hits its CPU limit."""
    parent = subprocess.Popen([sys.executable, "-c", _ORPHAN, state, HOSTILE[0], EXPRESSION], stdout=subprocess.PIPE,
                              text=True, cwd=REPO)
    try:
        assert parent.stdout.readline().strip() == "ready"
        time.sleep(1.0 if state == "busy" else 0)  # the busy worker is inside the hostile item now
        pids = workers_of(parent.pid)
        assert len(pids) == 1
    finally:
        parent.kill()
        parent.wait()
    assert not wait_gone(pids, TIMEOUT_S), "a worker outlived its parent"


def test_invalid_unicode_in_a_response_is_judged_per_sample(backend):
    reply = backend.complete(request("18", "total \ud800 = \\boxed{18} \udcff"))
    reply.text.encode("utf-8")  # storable: any surrogate copied into the reply is escaped
    assert parse_exact_match(reply.text).correct is True
    found = rule_outcome(backend, "18", "\\boxed{\ud800}")  # undecided: its reason is storable too
    assert found.outcome == "undecided"
    found.analysis.encode("utf-8")


def test_the_default_limit_leaves_room_for_busy_machines():
    assert 5.0 <= ITEM_TIME_LIMIT <= 60.0


def test_the_cli_run_counts_a_hostile_response_and_scores_the_rest(shared_data, tmp_path):
    """Through lm_eval: one response that never finishes costs one judge_failed, not the run. MATH-500
    (expression answers, so math-verify is asked); the responses are the real reference solutions."""
    rows = read_jsonl(shared_data / "math500" / "test.jsonl")[:4]
    records = [{"question": r["problem"], "response": r["solution"]} for r in rows]
    records[1]["response"] += "\nSo the answer is $\\boxed{10^{10^{10}}}$."
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps(r) + "\n" for r in records))
    run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", "math500_gpt4em",
                       "--limit", "4", "--metadata", '{"judge_backend": "local"}', "--log_samples"],
                      {"MATHJUDGE_DATA_DIR": str(shared_data), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache")},
                      tmp_path / "out")
    assert run.returncode == 0, run.stderr[-3000:]
    samples = {s["doc_id"]: json.loads(s["filtered_resps"][0]) for s in run.samples("math500_gpt4em")}
    assert samples[1]["failure"] == "timeout"
    assert {d: s["verdict"]["correct"] for d, s in samples.items() if d != 1} == {0: True, 2: True, 3: True}
    assert run.results()["results"]["math500_gpt4em"]["judge_failed,none"] == pytest.approx(0.25)
