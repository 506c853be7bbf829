"""The real lm_eval CLI with the VLM judge on Gemini in batch mode: the online scores, at batch price.

A loopback model answers a GSM8K slice (every third problem wrongly); the
judge is GeminiBatchServer, reached through the real google-genai SDK. The same
command runs once online and once with vlm_judge_mode=batch; then a batch run
that submits and stops (vlm_judge_batch_wait=false), and its rerun, which
collects the same job.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import read_jsonl
from tests.e2e import boxed, question_of, run_lm_eval
from tests.loopback import ChatCompletionsServer
from tests.loopback.gemini_batch_server import GeminiBatchServer

pytestmark = pytest.mark.e2e

N = 12
GEMINI_CANARY = "AIza-canary-gemini-batch-e2e-0123456"
TASK = "gsm8k_vlmjudge"


def _model(gold: dict[str, str]):
    order = {q: i for i, q in enumerate(gold)}

    def respond(body: dict) -> str:
        question = question_of(body)
        answer = gold[question] if order[question] % 3 else f"{gold[question]}+1"
        return f"Let me work through it.\nAfter the steps, the total is {answer}.\n\\boxed{{{answer}}}"
    return respond


def _vlm_judge(body: dict) -> dict:
    """Grades the boxed answer against the official solution, thinking first like Gemini 2.5 Pro."""
    parts = body["contents"][0]["parts"]
    reference, output = parts[0]["text"], parts[1]["text"]
    answer = boxed(output)
    flag = int(answer is not None and "+1" not in answer and answer in reference)
    return {"thoughts": "Compare the boxed answer with the reference's final line.",
            "text": f"INTERMEDIATE_CORRECT: {flag}\nFINAL_CORRECT: {flag}\nACTION_REFLECTION: 0\n"
                    f"EXPLANATION: The final answer {answer} {'matches' if flag else 'does not match'} the reference."}


@pytest.fixture
def gsm8k(data_slice):
    root = data_slice(N)
    rows = read_jsonl(root / "gsm8k" / "test.jsonl")
    return root, {r["question"]: r["answer"].split("####")[-1].strip().replace(",", "") for r in rows}


def _run(model, judge, data_dir, cache_dir, out_dir, **metadata):
    args = ["--model", "local-chat-completions",
            "--model_args", f"model=loopback-model,base_url={model.chat_url},num_concurrent=4,max_retries=1",
            "--apply_chat_template", "--tasks", TASK, "--log_samples",
            "--metadata", json.dumps({"vlm_judge_base_url": judge.url, "vlm_judge_concurrency": 8, **metadata})]
    env = {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(cache_dir), "GEMINI_API_KEY": GEMINI_CANARY}
    return run_lm_eval(args, env, out_dir)


def _verdicts(run) -> dict[int, tuple]:
    records = {s["doc_id"]: json.loads(s["filtered_resps"][0]) for s in run.samples(TASK)}
    return {doc: (r["verdict"]["intermediate_correct"], r["verdict"]["final_correct"], r["raw_reply"])
            for doc, r in records.items()}


BATCH = {"vlm_judge_mode": "batch", "vlm_judge_batch_poll_seconds": 0.1}


def test_batch_mode_scores_like_online_and_a_stopped_batch_is_collected_by_the_rerun(gsm8k, tmp_path):
    data_dir, gold = gsm8k
    with ChatCompletionsServer(_model(gold)) as model, GeminiBatchServer(_vlm_judge) as judge:
        online = _run(model, judge, data_dir, tmp_path / "c-online", tmp_path / "o1")
        assert online.returncode == 0, online.stderr[-3000:]
        assert judge.generate_calls == N and judge.batch_creates == 0
        judge.reset()

        batch = _run(model, judge, data_dir, tmp_path / "c-batch", tmp_path / "o2", **BATCH)
        assert batch.returncode == 0, batch.stderr[-3000:]
        assert judge.generate_calls == 0 and judge.batch_creates == 1  # every verdict from one Batch Mode job
        assert judge.jobs == {} and len(judge.deleted_jobs) == 1
        judge.reset()

        judge.pending_reads = 4  # still pending when the no-wait run looks
        stopped = _run(model, judge, data_dir, tmp_path / "c-later", tmp_path / "o3",
                       **BATCH, vlm_judge_batch_wait=False)
        assert stopped.returncode != 0 and "Rerun the same command" in stopped.stderr
        [job] = judge.jobs
        assert job in stopped.stderr and judge.generate_calls == 0
        judge.pending_reads = judge.running_reads = 0  # hours later: the next read finds the job done
        collected = _run(model, judge, data_dir, tmp_path / "c-later", tmp_path / "o4", **BATCH,
                         vlm_judge_batch_wait=False)  # the same command
        assert collected.returncode == 0, collected.stderr[-3000:]
        assert judge.batch_creates == 1 and judge.generate_calls == 0 and judge.deleted_jobs == [job]

    expected = sum(1 for i in range(N) if i % 3 != 0) / N
    for run in (online, batch, collected):
        metrics = run.results()["results"][TASK]
        assert metrics["final_correct,none"] == pytest.approx(expected)
        assert metrics["intermediate_correct,none"] == pytest.approx(expected)
        assert metrics["judge_failed,none"] == 0
        assert GEMINI_CANARY not in run.stdout + run.stderr
    assert _verdicts(batch) == _verdicts(online) == _verdicts(collected)
    batch_run = batch.results()["configs"][TASK]["metadata"]["judge"]["run"]
    assert batch_run["judge_calls"] == 0 and batch_run["batch"]["succeeded"] == N
    online_run = online.results()["configs"][TASK]["metadata"]["judge"]["run"]
    assert batch_run["batch_usage"] == online_run["usage"]  # the same tokens, now at batch prices
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert GEMINI_CANARY.encode() not in path.read_bytes(), path
