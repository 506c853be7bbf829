"""Cheap k: identical judge requests sent once (in flight, across tasks) and counted; ``judge_dedupe`` retired.

Every sample is judged on its own; a request identical to another, word for word, is sent once. Unit
tests of the answer grouping (maj@k), the retired setting and the cost table; wire tests through the
real ``openai`` SDK against the loopback server; and k = 4 replay runs through the real ``lm_eval`` CLI
(in process).
"""

from __future__ import annotations

import json
import threading

import pytest

from lm_eval_mathjudge.core.errors import ConfigError
from lm_eval_mathjudge.core.judges import JUDGES
from lm_eval_mathjudge.core.types import JudgeRequest
from lm_eval_mathjudge.cost.ledger import Ledger
from lm_eval_mathjudge.judging import factory, schedule
from lm_eval_mathjudge.judging.flights import Flights
from lm_eval_mathjudge.settings.layers import resolve_run_options, resolve_settings
from lm_eval_mathjudge.settings.schema import JudgeSettings
from tests.conftest import write_data_slice
from tests.e2e import THREAD_WAIT_S

HALF = r"\frac{1}{2}"
# One problem's four samples (gold 1/2) and how a careful judge grades each: three ways to write 1/2, a wrong one.
DOC_A = [(r"So the probability is \boxed{1/2}", True), ("The answer is 0.5.", True),
         (r"Heads is one of two equal outcomes: $\frac12$", True), ("The answer is 0.25.", False)]
# A hedge (two answers) is never grouped; word-for-word repeats are one request.
DOC_B = [("It is 1/2 or 0.25.", False), (r"Hence \boxed{1/2}", True), (r"Hence \boxed{1/2}", True),
         ("The answer is 0.5.", True)]
# Two equivalent wrong answers the rule stage of a cascade rejects: each gets its own LLM call.
DOC_C = [("The answer is 0.25.", False), (r"So it is $\frac14$.", False), (r"Hence \boxed{1/2}", True),
         ("I think 1/4, or maybe 1/2.", False)]
GRADES = dict(DOC_A + DOC_B + DOC_C)


# ---------------------------------------------------------------------- grouping for maj@k (pure)
@pytest.mark.local_judge
def test_the_local_rule_groups_the_realistic_answers_and_refuses_the_hedge():
    from lm_eval_mathjudge.backends.local import LocalBackend

    backend = LocalBackend(workers=1)
    try:
        assert backend.answer_classes(HALF, [t for t, _ in DOC_A]) == [0, 0, 0, 1]
        assert backend.answer_classes(HALF, [t for t, _ in DOC_B]) == [None, 0, 0, 0]
    finally:
        backend.close()


# ---------------------------------------------------------------------- the retired setting
RETIRED = "judge_dedupe was retired"


@pytest.mark.parametrize("yaml_settings, metadata, env, name", [
    (None, {"judge_dedupe": "answer"}, {}, "judge_dedupe"),
    (None, {"judge_dedupe": "off"}, {}, "judge_dedupe"),  # its old default too: the setting is gone
    (None, {"gpt4em_judge_dedupe": "answer"}, {}, "gpt4em_judge_dedupe"),
    (None, {"vlm_judge_dedupe": "answer"}, {}, "vlm_judge_dedupe"),  # every judge's keys are checked
    (None, {}, {"MATHJUDGE_DEDUPE": "answer"}, "MATHJUDGE_DEDUPE"),
    (None, {}, {"MATHJUDGE_GPT4EM_DEDUPE": "answer"}, "MATHJUDGE_GPT4EM_DEDUPE"),
    ({"dedupe": "answer"}, {}, {}, "setting dedupe"),
    (None, {"judge_panel": [{"backend": "local", "dedupe": "answer"}, {"backend": "openai"}]}, {}, "setting dedupe"),
])
def test_judge_dedupe_is_refused_as_unknown_and_retired(yaml_settings, metadata, env, name):
    with pytest.raises(ConfigError) as exc:
        resolve_settings("exact_match", yaml_settings, metadata, env)
        resolve_run_options("exact_match", yaml_settings, metadata, env)
    text = str(exc.value)
    assert name in text and "unknown" in text and RETIRED in text
    assert "did you mean" not in text  # no near name is offered in its place


def test_a_near_miss_of_a_live_setting_still_gets_did_you_mean():
    with pytest.raises(ConfigError) as exc:
        resolve_settings("exact_match", None, {"judge_dedup": "answer"}, {})
    assert RETIRED not in str(exc.value) and "unknown judge setting judge_dedup" in str(exc.value)


# ---------------------------------------------------------------------- the cost table
def test_cost_table_shows_duplicates():
    settings = JudgeSettings(model="gpt-4o-2024-08-06")
    ledger = Ledger()
    ledger.record("math500_gpt4em", settings, requests=8, calls=7, usage={"prompt_tokens": 4000,
                                                                          "completion_tokens": 200})
    ledger.record("math500_gpt4em", settings, duplicates=1)
    lines = ledger.table().splitlines()
    assert lines[1].split()[:4] == ["task", "requests", "dup", "calls"]
    assert lines[3].split()[:4] == ["math500_gpt4em", "8", "1", "7"]
    assert len({len(line) for line in lines[1:6]}) == 1  # fixed width
    assert lines[-1] == "dup: requests identical to another one, judged once"
    block = ledger.task_dict("math500_gpt4em")
    assert block["duplicates"] == 1 and "saved" not in block


# ---------------------------------------------------------------------- in flight and across tasks (wire)
def _request(response: str) -> JudgeRequest:
    prompt = (f"### Problem\nA fair coin is tossed. What is the probability of heads?\n### Reference solution\n"
              f"{HALF}\n### Student's solution\n{response}\n### How to grade\n")
    return JudgeRequest(prompt=prompt, fields={"answer": HALF, "response": response})


def _grade(body: dict) -> str:
    """A careful judge: equivalent answers get the same grade (the table), a hedge is wrong."""
    prompt = body["messages"][-1]["content"]
    correct = GRADES[max((text for text in GRADES if text in prompt), key=len)]
    return (f"Error Analysis: the student's final answer {'equals' if correct else 'differs from'} 1/2.\n"
            f"Final Verdict: {'Correct' if correct else 'Incorrect'}")


def _client(url: str, monkeypatch, **overrides):
    from tests.e2e import CANARY_KEY

    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
    settings = JudgeSettings(**{"backend": "openai", "model": "gpt-4o-2024-08-06", "base_url": url,
                                "cache": False, "preflight": False, "max_retries": 0, **overrides})
    return factory.open_client(JUDGES["exact_match"], settings, progress=False)


def test_two_identical_requests_in_flight_make_one_call(monkeypatch):
    """Without the cache (and so without leases) two threads asking at once would both pay."""
    from tests.loopback import ChatCompletionsServer

    with ChatCompletionsServer(_grade, latency=0.4) as server:
        client = _client(server.url, monkeypatch)
        try:
            request = _request(DOC_A[0][0])
            key = client.key(request)
            start, outcomes = threading.Barrier(2), []

            def ask():
                start.wait()
                outcomes.append(client.judge_one(key, request))
            threads = [threading.Thread(target=ask) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(THREAD_WAIT_S)
            assert server.call_count == 1
            assert [o.verdict.correct for o in outcomes] == [True, True]
            assert client.stats.calls == 1 and client.stats.as_dict()["shared_in_flight"] == 1
        finally:
            client.close()


def test_two_tasks_asking_the_same_requests_in_one_pass_pay_once(monkeypatch, capsys):
    """Two tasks of one run, each with its own client, the same three requests (one repeated)."""
    from tests.loopback import ChatCompletionsServer

    texts = [DOC_A[0][0], DOC_A[3][0], DOC_A[0][0]]
    with ChatCompletionsServer(_grade, latency=0.2) as server:
        clients = [_client(server.url, monkeypatch, concurrency=4) for _ in range(2)]
        try:
            jobs = [schedule.Job.build(f"task_{i}", c, len(texts), lambda s: _request(texts[s]))
                    for i, c in enumerate(clients)]
            schedule.judge(jobs, "judging", progress=False)
            schedule.summarise(jobs)
        finally:
            for c in clients:
                c.close()
    assert server.call_count == 2
    assert [[o.verdict.correct for o in job.slot_outcomes()] for job in jobs] == [[True, False, True]] * 2
    # each task repeats one of its own; one task took both of its unique requests from the other
    assert sum(job.duplicates for job in jobs) == 1 + 1 + 2
    assert sum(job.run_stats["duplicate_requests"] for job in jobs) == 4
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().err.splitlines()
            if line.startswith("task_")}
    assert sorted(int(rows[name][2]) for name in ("task_0", "task_1")) == [1, 3]


def test_a_failed_first_call_lets_the_waiter_ask_itself():
    flights, calls = Flights(), []
    entered, release = threading.Event(), threading.Event()

    def failing():
        calls.append("first")
        entered.set()
        release.wait(THREAD_WAIT_S)
        raise RuntimeError("connection reset")

    def first():
        with pytest.raises(RuntimeError):
            flights.run("k", failing, 5)
    thread = threading.Thread(target=first)
    thread.start()
    entered.wait(THREAD_WAIT_S)
    result: list = []
    waiter = threading.Thread(target=lambda: result.append(flights.run("k", lambda: calls.append("own") or 7, 5)))
    waiter.start()
    release.set()
    thread.join(THREAD_WAIT_S)
    waiter.join(THREAD_WAIT_S)
    assert result == [(7, False)] and calls == ["first", "own"]


# ---------------------------------------------------------------------- lm_eval, k = 4, replayed answers
TASK = "math500_gpt4em"
QUESTIONS = ["A fair coin is tossed once. What is the probability that it shows heads?",
             "Two of four equally likely cards are red. What is the probability that a card drawn is red?",
             "A fair die shows an even number. What is the probability that it is at most 3?"]


def _run(tmp_path, extra: dict | None = None, task: str = TASK, docs=(DOC_A, DOC_B), grade=_grade):
    from tests.e2e import CANARY_KEY, run_lm_eval
    from tests.loopback import ChatCompletionsServer

    root = write_data_slice(tmp_path / "data", 1)
    rows = [{"problem": q, "solution": f"Half of the outcomes qualify, so $\\boxed{{{HALF}}}$.", "answer": HALF,
             "subject": "Counting & Probability", "level": 1, "unique_id": f"test/dedupe/{i}.json"}
            for i, q in enumerate(QUESTIONS[:len(docs)])]
    (root / "math500" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    replay = tmp_path / "answers.jsonl"
    replay.write_text("".join(json.dumps({"question": q, "responses": [t for t, _ in doc]}) + "\n"
                              for q, doc in zip(QUESTIONS, docs)))
    with ChatCompletionsServer(grade) as judge:
        metadata = {"repeats": 4, "judge_base_url": judge.url, "judge_preflight": False, **(extra or {})}
        run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", task,
                           "--log_samples", "--metadata", json.dumps(metadata)],
                          {"MATHJUDGE_DATA_DIR": str(root), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
                           "OPENAI_API_KEY": CANARY_KEY}, tmp_path / "out")
        return run, judge.call_count


def _records(run, task: str = TASK) -> list[list[dict]]:
    samples = sorted(run.samples(task), key=lambda s: s["doc_id"])
    return [[json.loads(r) for r in s["filtered_resps"][0]] for s in samples]


@pytest.mark.e2e
def test_k4_every_distinct_answer_is_judged_once_through_lm_eval(tmp_path):
    run, made = _run(tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert made == 4 + 3  # every distinct text is judged; DOC_B's repeated text once
    results = run.results()
    meta = results["configs"][TASK]["metadata"]["judge"]
    assert "dedupe" not in meta and "calls_saved_by_dedupe" not in meta["run"]
    assert meta["run"]["requests"] == 8 and meta["run"]["duplicate_requests"] == 1 and meta["run"]["judge_calls"] == 7
    records = _records(run)
    assert [[r["verdict"]["correct"] for r in doc] for doc in records] == [[g for _, g in DOC_A], [g for _, g in DOC_B]]
    assert not any("verdict_shared_from_sample" in r for doc in records for r in doc)
    scores = results["results"][TASK]
    assert scores["gpt4_exact_match_avg@4,none"] == pytest.approx(3 / 4)
    assert scores["gpt4_exact_match_maj@4,none"] == pytest.approx(1.0)  # the answer classes still count maj@k
    # the cost table's row: requests, dup, calls
    row = next(line.split() for line in run.stderr.splitlines() if line.startswith(TASK + " "))
    assert row[1:4] == ["8", "1", "7"]


@pytest.mark.e2e
def test_k4_dry_run_estimates_each_distinct_request_once(tmp_path):
    run, made = _run(tmp_path, {"judge_dry_run": True})
    assert run.returncode == 0, run.stderr[-3000:]
    assert made == 0
    assert "Estimate: 7 judge call(s)" in run.stderr
    row = next(line.split() for line in run.stderr.splitlines() if line.startswith(TASK + " "))
    assert row[3] == "7"  # the estimate table's calls column


@pytest.mark.e2e
def test_k4_with_the_cascade_the_rule_stage_decides_first(tmp_path):
    """The rule accepts every way of writing 1/2 (decided there); the rest reach the LLM, each on its own."""
    run, made = _run(tmp_path, {"judge_cascade": True}, docs=(DOC_A, DOC_B, DOC_C))
    assert run.returncode == 0, run.stderr[-3000:]
    records = _records(run)
    stages = [[r.get("stage") for r in doc] for doc in records]
    assert stages == [["rule", "rule", "rule", "llm"], ["llm", "rule", "rule", "rule"], ["llm", "llm", "rule", "llm"]]
    assert made == 2 + 3  # 0.25 and \frac14 are two calls now
    assert [[r["verdict"]["correct"] for r in doc] for doc in records] == [[g for _, g in d] for d in (DOC_A, DOC_B, DOC_C)]
    assert "llm_calls_saved_by_dedupe" not in run.results()["configs"][TASK]["metadata"]["judge"]["run"]["cascade"]


@pytest.mark.e2e
@pytest.mark.parametrize("task, metadata", [
    (TASK, {"judge_dedupe": "answer"}),
    ("math500_vlmjudge", {"judge_dedupe": "answer"}),
    (TASK, {"gpt4em_judge_dedupe": "off"}),
])
def test_judge_dedupe_stops_the_run_before_generating_and_says_it_was_retired(tmp_path, task, metadata):
    run, made = _run(tmp_path, metadata, task=task)
    assert run.returncode != 0 and made == 0
    assert RETIRED in run.stderr and "unknown judge setting" in run.stderr
    assert "Traceback" not in run.stderr
