"""Batch mode through the real lm_eval CLI (and `mathjudge rejudge`), judged by a loopback OpenAI Batch server.

The generations are real (GPT-3 175B + verifier GSM8K solutions, replayed), so batch and
online runs judge the same samples; the judge answers both modes with the same grader.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import SHARED_DATA, read_jsonl
from tests.e2e import CANARY_KEY, LM_EVAL, TIMEOUT_S, Run, fenced, run_env, run_lm_eval, run_mathjudge
from tests.loopback import ChatCompletionsServer
from tests.loopback.openai_batch_server import OpenAIBatchServer

pytestmark = pytest.mark.e2e

N = 24
OUTPUTS = SHARED_DATA / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl"
TASK = "gsm8k_gpt4em"


def final_number_judge(body: dict) -> str:
    """Grades like a careful judge: the student's last number against the reference's final answer."""
    prompt = body["messages"][-1]["content"]
    reference = prompt.split("### Reference solution", 1)[1].split("### Student's solution", 1)[0]
    student = fenced(prompt)
    gold = reference.strip().splitlines()[-1].split(":")[-1].strip().replace(",", "")
    numbers = re.findall(r"-?\d[\d,]*\.?\d*", student.strip().splitlines()[-1])
    answer = numbers[-1].replace(",", "").rstrip(".") if numbers else None
    same = answer is not None and float(answer) == float(gold)
    return (f"Error Analysis: The student's final answer is {answer} and the reference answer is {gold}, so they "
            f"{'match' if same else 'differ'}.\nFinal Verdict: {'Correct' if same else 'Incorrect'}")


def _args(judge_url: str, **metadata) -> list[str]:
    meta = {"judge_base_url": judge_url, "judge_batch_poll_seconds": 0.1, **metadata}
    return ["--model", "mathjudge-replay", "--model_args", f"path={OUTPUTS}", "--tasks", TASK, "--limit", str(N),
            "--log_samples", "--metadata", json.dumps(meta)]


def _env(cache: Path) -> dict[str, str]:
    return {"MATHJUDGE_DATA_DIR": str(SHARED_DATA), "MATHJUDGE_CACHE_DIR": str(cache), "OPENAI_API_KEY": CANARY_KEY}


def _verdicts(run: Run) -> dict[int, bool]:
    return {s["doc_id"]: json.loads(s["filtered_resps"][0])["verdict"]["correct"] for s in run.samples(TASK)}


def _assert_no_canary(root: Path, *runs) -> None:
    for run in runs:
        assert CANARY_KEY not in run.stdout + run.stderr
    for path in root.rglob("*"):
        if path.is_file():
            assert CANARY_KEY.encode() not in path.read_bytes(), path


@pytest.fixture(scope="module")
def online(tmp_path_factory):
    """The reference: the same samples judged online."""
    root = tmp_path_factory.mktemp("online")
    with ChatCompletionsServer(final_number_judge) as judge:
        run = run_lm_eval(_args(judge.url), _env(root / "cache"), root / "out")
        calls = judge.call_count
    assert run.returncode == 0, run.stderr[-3000:]
    assert calls == N
    labels = {r["doc_id"]: r["is_correct"] for r in read_jsonl(OUTPUTS)[:N]}
    assert _verdicts(run) == labels  # the grader agrees with the upstream labels: a meaningful reference
    return run


def test_batch_mode_gives_the_online_verdicts_and_a_rerun_pays_nothing(online, tmp_path):
    with OpenAIBatchServer(final_number_judge) as judge:
        batch = run_lm_eval(_args(judge.url, judge_mode="batch"), _env(tmp_path / "cache"), tmp_path / "out1")
        assert batch.returncode == 0, batch.stderr[-3000:]
        assert (judge.batches_created, judge.call_count) == (1, 0)  # one job, no online call
        assert len(judge.jobs["batch_loopback1"].lines) == N
        assert judge.files == {} and len(judge.deleted) == 2  # the input and the output file are gone
        rerun = run_lm_eval(_args(judge.url, judge_mode="batch"), _env(tmp_path / "cache"), tmp_path / "out2")
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        assert (judge.batches_created, judge.call_count, len(judge.files)) == (1, 0, 0)
        assert all(r.headers.get("authorization") == f"Bearer {CANARY_KEY}" for r in judge.requests)
    assert _verdicts(batch) == _verdicts(online) == _verdicts(rerun)
    for key in ("gpt4_exact_match,none", "judge_failed,none"):
        assert batch.results()["results"][TASK][key] == online.results()["results"][TASK][key]
    stats = batch.results()["configs"][TASK]["metadata"]["judge"]["run"]
    assert stats["batch"]["submitted"] == stats["batch"]["succeeded"] == N and stats["judge_calls"] == 0
    assert stats["batch_usage"]["prompt_tokens"] > 0 and stats["usage"] == {}
    again = rerun.results()["configs"][TASK]["metadata"]["judge"]["run"]
    assert again["batch"]["submitted"] == 0 and again["cache_hits"] == N  # nothing left to batch
    _assert_no_canary(tmp_path, batch, rerun)


def _start(args: list[str], env: dict[str, str], out: Path) -> subprocess.Popen:
    return subprocess.Popen([LM_EVAL, *args, "--output_path", str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=run_env(env))


def _jobs(cache: Path) -> list[tuple]:
    with sqlite3.connect(cache / "judge_cache.sqlite3") as db:
        return db.execute("SELECT provider, job_id, size, collected FROM batch_jobs").fetchall()


def _one_byte_changed(path: Path, doc_id: int) -> Path:
    """The replayed generations, with one sample's text one byte longer (a resampled or re-served generation)."""
    rows = read_jsonl(OUTPUTS)
    rows[doc_id] = {**rows[doc_id], "response": rows[doc_id]["response"] + " "}
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _polling(judge: OpenAIBatchServer, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while judge.polls < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert judge.polls >= 3, "the run never polled the batch job"


def test_a_run_killed_while_polling_and_rerun_with_one_generation_changed_resumes_the_job(online, tmp_path):
    """Jobs are matched to requests by cache key: the rerun takes the first job's replies for the 23
    unchanged samples, submits only the changed one, and leaves no job uncollected."""
    cache = tmp_path / "cache"
    with OpenAIBatchServer(final_number_judge) as judge:
        judge.hold = True  # the job stays in_progress: the run is polling when it is killed
        proc = _start(_args(judge.url, judge_mode="batch"), _env(cache), tmp_path / "out1")
        _polling(judge, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=TIMEOUT_S)
        assert _jobs(cache) == [("openai", "batch_loopback1", N, 0)]  # stored before the first poll
        judge.release()
        args = _args(judge.url, judge_mode="batch")
        args[args.index("--model_args") + 1] = f"path={_one_byte_changed(tmp_path / 'changed.jsonl', 5)}"
        rerun = run_lm_eval(args, _env(cache), tmp_path / "out2")
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        assert judge.batches_created == 2 and len(judge.jobs["batch_loopback2"].lines) == 1  # the changed one only
        assert judge.call_count == 0 and judge.files == {}
    assert _jobs(cache) == [("openai", "batch_loopback1", N, 1), ("openai", "batch_loopback2", 1, 1)]
    assert _verdicts(rerun) == _verdicts(online)
    stats = rerun.results()["configs"][TASK]["metadata"]["judge"]["run"]["batch"]
    assert (stats["resumed"], stats["submitted"], stats["succeeded"]) == (1, 1, N + 1)
    _assert_no_canary(tmp_path, rerun)


def test_sigint_while_polling_saves_the_generations_and_the_resume_command_collects_the_job(online, tmp_path):
    from tests.test_stop_e2e import resume_command

    cache, log = tmp_path / "cache", tmp_path / "stderr.txt"
    env = run_env(_env(cache))
    with OpenAIBatchServer(final_number_judge) as judge:
        judge.hold = True
        with open(log, "wb") as fh:
            proc = subprocess.Popen([LM_EVAL, *_args(judge.url, judge_mode="batch"), "--output_path",
                                     str(tmp_path / "out1")], env=env, stdout=subprocess.DEVNULL, stderr=fh,
                                    start_new_session=True)
        _polling(judge, proc)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=TIMEOUT_S) == 130
        stderr = log.read_text()
        assert "Traceback" not in stderr and "batch_loopback1 keep running at openai" in stderr, stderr[-3000:]
        assert _jobs(cache) == [("openai", "batch_loopback1", N, 0)]
        judge.release()
        argv = resume_command(stderr)
        assert argv[argv.index("--model") + 1] == "mathjudge-replay"
        resumed = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert judge.batches_created == 1 and judge.call_count == 0 and judge.files == {}
    assert _jobs(cache) == [("openai", "batch_loopback1", N, 1)]
    assert _verdicts(Run(0, resumed.stdout, resumed.stderr, tmp_path / "out1")) == _verdicts(online)


def test_no_wait_submits_and_stops_and_the_same_command_collects_later(online, tmp_path):
    args = _args("", judge_mode="batch", judge_batch_wait=False)
    with OpenAIBatchServer(final_number_judge) as judge:
        args[-1] = json.dumps({**json.loads(args[-1]), "judge_base_url": judge.url})
        first = run_lm_eval(args, _env(tmp_path / "cache"), tmp_path / "out1")
        assert first.returncode != 0
        assert "judge_batch_wait=false" in first.stderr and "batch_loopback1" in first.stderr
        assert "Rerun the same command" in first.stderr
        assert not list((tmp_path / "out1").rglob("results_*.json"))
        judge.complete_jobs()  # the hours a real batch takes
        second = run_lm_eval(args, _env(tmp_path / "cache"), tmp_path / "out2")
        assert second.returncode == 0, second.stderr[-3000:]
        assert (judge.batches_created, judge.call_count, judge.files) == (1, 0, {})
    assert _verdicts(second) == _verdicts(online)
    _assert_no_canary(tmp_path, first, second)


def _expire_first_fail_second(index: int, body: dict):
    return {0: "expired", 1: "failed"}.get(index)


@pytest.mark.parametrize("fallback", ["online", "fail"])
def test_failed_and_expired_items_fall_back_as_asked(online, tmp_path, fallback):
    with OpenAIBatchServer(final_number_judge, fate=_expire_first_fail_second) as judge:
        run = run_lm_eval(_args(judge.url, judge_mode="batch", judge_batch_fallback=fallback),
                          _env(tmp_path / "cache"), tmp_path / "out")
        assert run.returncode == 0, run.stderr[-3000:]
        assert judge.batches_created == 1 and judge.files == {}
        online_calls = judge.call_count
    metrics = run.results()["results"][TASK]
    samples = {s["doc_id"]: json.loads(s["filtered_resps"][0]) for s in run.samples(TASK)}
    stats = run.results()["configs"][TASK]["metadata"]["judge"]["run"]
    assert (stats["batch"]["expired"], stats["batch"]["failed"]) == (1, 1)
    if fallback == "online":
        assert online_calls == 2
        assert _verdicts(run) == _verdicts(online) and metrics["judge_failed,none"] == 0
    else:
        assert online_calls == 0
        assert metrics["judge_failed,none"] == pytest.approx(2 / N)
        assert (samples[0]["failure"], samples[1]["failure"]) == ("batch_expired", "batch_failed")
        others = {d: r["verdict"]["correct"] for d, r in samples.items() if d > 1}
        assert others == {d: v for d, v in _verdicts(online).items() if d > 1}


def test_rejudge_of_saved_samples_in_batch_mode(online, tmp_path):
    source = max(online.out_dir.rglob(f"samples_{TASK}_*.jsonl"))
    with OpenAIBatchServer(final_number_judge) as judge:
        proc = run_mathjudge(
            ["rejudge", str(source), "--output_path", str(tmp_path / "out"), "--judge",
             "openai:loopback-model", "--metadata", json.dumps({"judge_base_url": judge.url, "judge_mode": "batch",
                                                                "judge_batch_poll_seconds": 0.1})],
            _env(tmp_path / "cache"))
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert (judge.batches_created, judge.call_count, judge.files) == (1, 0, {})
        assert len(judge.jobs["batch_loopback1"].lines) == N
    rejudged = Run(0, proc.stdout, proc.stderr, tmp_path / "out")
    assert _verdicts(rejudged) == _verdicts(online)
    _assert_no_canary(tmp_path, rejudged)
