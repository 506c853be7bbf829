"""The real lm_eval CLI, end to end: a loopback model server, a loopback judge, GSM8K slices.

The scenarios run side by side (tests/e2e.py Scenarios); each test checks its own.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import SHARED_DATA, read_jsonl, write_data_slice
from tests.e2e import CANARY_KEY, exact_match_judge, question_of, run_lm_eval, run_together
from tests.loopback import ChatCompletionsServer

pytestmark = pytest.mark.e2e

N = 12
QUICKSTART = SHARED_DATA / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl"


def _model(gold_by_question: dict[str, str]):
    """Answers every third question wrongly, the rest correctly, as a worked solution."""
    def respond(body: dict) -> str:
        question = question_of(body)
        gold = int(gold_by_question[question])
        index = list(gold_by_question).index(question)
        answer = gold + 1 if index % 3 == 0 else gold
        return f"Let me work through it.\nAfter the steps, the total is {answer}.\n\\boxed{{{answer}}}"
    return respond


def _gsm8k_slice(tmp_path):
    root = write_data_slice(tmp_path / "data", N)
    rows = read_jsonl(root / "gsm8k" / "test.jsonl")
    gold = {r["question"]: r["answer"].split("####")[-1].strip().replace(",", "") for r in rows}
    return root, gold


def _args(model_url: str, judge_url: str, *extra: str) -> list[str]:
    return ["--model", "local-chat-completions",
            "--model_args", f"model=loopback-model,base_url={model_url},num_concurrent=4,max_retries=1",
            "--apply_chat_template", "--tasks", "gsm8k_gpt4em", "--log_samples",
            "--metadata", json.dumps({"judge_base_url": judge_url, "judge_concurrency": 8}), *extra]


def _env(data_dir, cache_dir, **extra) -> dict[str, str]:
    return {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(cache_dir),
            "OPENAI_API_KEY": CANARY_KEY, **extra}


def _scores_runs(tmp_path):
    data_dir, gold = _gsm8k_slice(tmp_path)
    with ChatCompletionsServer(_model(gold)) as model, ChatCompletionsServer(exact_match_judge) as judge:
        first = run_lm_eval(_args(model.chat_url, judge.url), _env(data_dir, tmp_path / "cache"), tmp_path / "out1")
        assert first.returncode == 0, first.stderr[-3000:]
        assert judge.call_count == N and model.call_count == N

        # Side by side, both from the first run's cache: the same command again, and the first
        # run's samples file replayed without the model.
        samples_file = max((tmp_path / "out1").rglob("samples_gsm8k_gpt4em_*.jsonl"))
        rerun, replay = run_together(
            lambda: run_lm_eval(_args(model.chat_url, judge.url), _env(data_dir, tmp_path / "cache"),
                                tmp_path / "out2"),
            lambda: run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={samples_file}",
                                 "--tasks", "gsm8k_gpt4em", "--metadata", json.dumps({"judge_base_url": judge.url})],
                                _env(data_dir, tmp_path / "cache"), tmp_path / "out3"))
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        assert replay.returncode == 0, replay.stderr[-3000:]
        assert judge.call_count == N, "the rerun and the replay must be served from the judge cache"
        assert model.call_count == 2 * N  # the rerun generates again; the replay never asks the model
    return tmp_path, judge.requests, first, rerun, replay


@pytest.mark.e2e_versions
def test_scores_match_the_judge_and_a_rerun_makes_no_judge_call(scenario):
    tmp_path, judge_requests, first, rerun, replay = scenario()
    expected = sum(1 for i in range(N) if i % 3 != 0) / N

    # The judge saw the real key; nothing on disk or in the logs did.
    assert all(r.headers.get("authorization") == f"Bearer {CANARY_KEY}" for r in judge_requests)
    for run in (first, rerun, replay):
        metrics = run.results()["results"]["gsm8k_gpt4em"]
        assert metrics["gpt4_exact_match,none"] == pytest.approx(expected)
        assert metrics["judge_failed,none"] == 0
        assert metrics["gpt4_exact_match_stderr,none"] > 0
        assert CANARY_KEY not in run.stdout + run.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert CANARY_KEY.encode() not in path.read_bytes(), path

    samples = sorted(first.samples("gsm8k_gpt4em"), key=lambda s: s["doc_id"])
    assert len(samples) == N
    for sample in samples:
        record = json.loads(sample["filtered_resps"][0])
        assert record["verdict"]["correct"] is (sample["doc_id"] % 3 != 0)
        assert record["verdict"]["analysis"].startswith("The student's final answer is")
        assert record["raw_reply"].splitlines()[-1].startswith("Final Verdict: ") and not record["judge_failed"]
        assert sample["gpt4_exact_match"] == float(record["verdict"]["correct"])
    assert all(json.loads(s["filtered_resps"][0])["cached"] for s in rerun.samples("gsm8k_gpt4em"))

    judge_meta = first.results()["configs"]["gsm8k_gpt4em"]["metadata"]["judge"]
    assert judge_meta["backend"] == "openai" and judge_meta["model"] == "gpt-4-turbo-2024-04-09"
    assert judge_meta["prompt_version"].startswith("exact_match@") and judge_meta["temperature"] == 0
    assert judge_meta["run"]["judge_calls"] == N


def _off_contract_run(tmp_path):
    data_dir, gold = _gsm8k_slice(tmp_path)
    first_question = next(iter(gold))

    def judge_reply(body):
        if first_question in body["messages"][-1]["content"]:
            return "I think the student is probably right."  # no verdict line, twice
        return exact_match_judge(body)

    with ChatCompletionsServer(_model(gold)) as model, ChatCompletionsServer(judge_reply) as judge:
        run = run_lm_eval(_args(model.chat_url, judge.url), _env(data_dir, tmp_path / "cache"), tmp_path / "out")
        assert judge.call_count == N + 1  # the off-contract reply was asked once more
    return run


def test_off_contract_replies_are_counted_as_judge_failures(scenario):
    run = scenario()
    assert run.returncode == 0, run.stderr[-3000:]
    metrics = run.results()["results"]["gsm8k_gpt4em"]
    assert metrics["judge_failed,none"] == pytest.approx(1 / N)
    failed = [s for s in run.samples("gsm8k_gpt4em") if s["judge_failed"] == 1]
    assert [s["doc_id"] for s in failed] == [0]
    record = json.loads(failed[0]["filtered_resps"][0])
    assert record["failure"] == "unparseable" and record["raw_reply"] == "I think the student is probably right."
    assert failed[0]["gpt4_exact_match"] == 0


def _transport_failure_runs(tmp_path):
    data_dir, gold = _gsm8k_slice(tmp_path)
    cache = tmp_path / "cache"
    with ChatCompletionsServer(_model(gold)) as model, ChatCompletionsServer(exact_match_judge) as judge:
        judge.inject(status=503, times=10_000)
        failed = run_lm_eval(_args(model.chat_url, judge.url) + ["--metadata", json.dumps(
            {"judge_base_url": judge.url, "judge_max_retries": 1})], _env(data_dir, cache), tmp_path / "out1")
        assert failed.returncode != 0
        assert "12 of 12 samples got no verdict" in failed.stderr
        assert "Nothing was scored as wrong" in failed.stderr
        assert not list((tmp_path / "out1").rglob("results_*.json"))
        saved = next((cache / "generations").glob("generations-*.jsonl"))

        judge.reset()  # the judge is back: replay the saved generations, no model needed
        calls_to_model = model.call_count
        replay = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={saved}",
                              "--tasks", "gsm8k_gpt4em", "--log_samples", "--metadata",
                              json.dumps({"judge_base_url": judge.url})], _env(data_dir, cache), tmp_path / "out2")
        assert replay.returncode == 0, replay.stderr[-3000:]
        assert model.call_count == calls_to_model
    return replay


@pytest.mark.e2e_versions
def test_transport_failure_stops_the_run_and_saved_generations_replay(scenario):
    replay = scenario()
    expected = sum(1 for i in range(N) if i % 3 != 0) / N
    assert replay.results()["results"]["gsm8k_gpt4em"]["gpt4_exact_match,none"] == pytest.approx(expected)


def _missing_key_runs(tmp_path):
    """Two independent runs side by side, each with its own model server (run_lm_eval passes no OPENAI_*)."""
    data_dir, gold = _gsm8k_slice(tmp_path)
    with ChatCompletionsServer(_model(gold)) as model, ChatCompletionsServer(_model(gold)) as predict_model, \
            ChatCompletionsServer(exact_match_judge) as judge:
        env = _env(data_dir, tmp_path / "cache")
        del env["OPENAI_API_KEY"]
        no_key, predict = run_together(
            lambda: run_lm_eval(_args(model.chat_url, judge.url), env, tmp_path / "out1"),
            lambda: run_lm_eval(_args(predict_model.chat_url, judge.url, "--predict_only"), env, tmp_path / "out2"))
        assert no_key.returncode != 0
        assert "OPENAI_API_KEY" in no_key.stderr and model.call_count == 0

        assert predict.returncode == 0, predict.stderr[-3000:]
        assert predict_model.call_count == N and judge.call_count == 0


@pytest.mark.e2e_versions
def test_missing_key_fails_before_generation_and_predict_only_never_judges(scenario):
    scenario()


def _quickstart_run(tmp_path):
    return run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={QUICKSTART}", "--tasks", "gsm8k_gpt4em",
                        "--limit", "100", "--metadata", '{"judge_backend": "local"}', "--log_samples"],
                       {"MATHJUDGE_DATA_DIR": str(SHARED_DATA), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache")},
                       tmp_path / "out")


@pytest.mark.e2e_versions
def test_quickstart_replays_real_outputs_through_the_local_judge(scenario):
    """The README's first command: 100 real GPT-3 solutions, judged offline by math-verify."""
    outputs = QUICKSTART
    run = scenario()
    assert run.returncode == 0, run.stderr[-3000:]
    metrics = run.results()["results"]["gsm8k_gpt4em"]
    assert metrics["gpt4_exact_match,none"] == pytest.approx(0.58)  # upstream labels: 58 of 100 correct
    assert metrics["judge_failed,none"] == 0
    labels = {r["doc_id"]: r["is_correct"] for r in read_jsonl(outputs)}
    verdicts = {s["doc_id"]: json.loads(s["filtered_resps"][0])["verdict"]["correct"]
                for s in run.samples("gsm8k_gpt4em")}
    assert verdicts == labels


SCENARIOS = {"test_scores_match_the_judge_and_a_rerun_makes_no_judge_call": _scores_runs,
             "test_off_contract_replies_are_counted_as_judge_failures": _off_contract_run,
             "test_transport_failure_stops_the_run_and_saved_generations_replay": _transport_failure_runs,
             "test_missing_key_fails_before_generation_and_predict_only_never_judges": _missing_key_runs,
             "test_quickstart_replays_real_outputs_through_the_local_judge": _quickstart_run}
