"""A judge that hangs, floods, bombs or redirects, through the real ``lm_eval`` CLI as its own process.

Generations are replayed (real GSM8K questions, right answers); the judge is a loopback OpenAI server
misbehaving at the HTTP level. What holds: a dripping judge ends the run (exit 8, saying how to resume)
after each sample's attempts timed out; a 100 MB reply and gzip bombs are counted judge failures, the
run's peak memory stays under 600 MB and no file it wrote (cache, samples, results) reaches 5 MB; a
redirect to another origin stops the run and nothing reaches the other server. No wall clock is read:
the outer timeout only turns a hang into a failure.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from lm_eval_mathjudge.judging.client import UNRESPONSIVE_CALLS
from tests._helpers import PEAK_RSS_WRAPPER
from tests.conftest import read_jsonl, write_data_slice
from tests.e2e import CANARY_KEY, LM_EVAL, Run, run_env
from tests.loopback import ChatCompletionsServer
from tests.loopback import wire_faults as faults

pytestmark = pytest.mark.e2e

N = 4
assert N > UNRESPONSIVE_CALLS
TASK = "gsm8k_gpt4em"
MiB = 1 << 20
PEAK_RSS_MIB = 600
MAX_FILE_BYTES = 5 * MiB
OUTER_TIMEOUT_S = 600  # a hang fails the test instead of the suite


@dataclass
class Measured:
    run: Run
    peak_rss_mib: float
    root: Path


def _replay(root: Path) -> Path:
    rows = read_jsonl(write_data_slice(root / "data", N) / "gsm8k" / "test.jsonl")
    path = root / "replay.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            gold = row["answer"].split("####")[-1].strip().replace(",", "")
            fh.write(json.dumps({"question": row["question"], "response": f"Working it out: $\\boxed{{{gold}}}$"})
                     + "\n")
    return path


def lm_eval_measured(root: Path, judge: ChatCompletionsServer, **metadata) -> Measured:
    """One ``lm_eval`` process against ``judge``; its peak RSS as measured by ``PEAK_RSS_WRAPPER``."""
    replay, out = _replay(root), root / "out"
    env = run_env({"MATHJUDGE_DATA_DIR": str(root / "data"), "MATHJUDGE_CACHE_DIR": str(root / "cache"),
                   "OPENAI_API_KEY": CANARY_KEY})
    args = [LM_EVAL, "--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", TASK,
            "--log_samples", "--output_path", str(out),
            "--metadata", json.dumps({"judge_base_url": judge.url, "judge_model": "gpt-4-turbo-2024-04-09",
                                      **metadata})]
    report = root / "peak_rss_kib"
    with open(root / "stdout", "w+") as stdout, open(root / "stderr", "w+") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", PEAK_RSS_WRAPPER, str(report), *args], env=env,
                                stdout=stdout, stderr=stderr, start_new_session=True)
        try:
            code = proc.wait(timeout=OUTER_TIMEOUT_S)  # a hang fails the test instead of the suite
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        stdout.seek(0), stderr.seek(0)
        run = Run(code, stdout.read(), stderr.read(), out)
    return Measured(run, int(report.read_text()) / 1024, root)


def _largest_file(root: Path) -> tuple[int, str]:
    sizes = [(p.stat().st_size, str(p)) for p in root.rglob("*") if p.is_file() and p.name not in ("stdout", "stderr")]
    assert sizes
    return max(sizes)


def _chat_calls(judge: ChatCompletionsServer) -> int:
    return judge.call_count


FLOODS = {
    "100mb-reply": lambda: faults.flood(100 * MiB, declare=False),
    "gzip-bomb": lambda: faults.bomb(1 << 30),
    "nested-gzip-bomb": lambda: faults.bomb(1 << 30, 2),
}


@pytest.mark.parametrize("fault", FLOODS)
def test_a_flooding_judge_ends_in_counted_failures_within_memory_and_disk(tmp_path, fault):
    with ChatCompletionsServer(lambda body: {"wire": FLOODS[fault]()}) as judge:
        measured = lm_eval_measured(tmp_path, judge)
        calls = _chat_calls(judge)
    run = measured.run
    assert run.returncode == 0, run.stderr[-3000:]
    metrics = run.results()["results"][TASK]
    assert metrics["judge_failed,none"] == 1.0 and metrics["gpt4_exact_match,none"] == 0.0
    assert calls == N  # one call per sample: a reply over the cap is not asked again
    samples = run.samples(TASK)
    assert {json.loads(s["filtered_resps"][0])["failure"] for s in samples} == {"reply_too_large"}
    assert measured.peak_rss_mib < PEAK_RSS_MIB, measured.peak_rss_mib
    size, path = _largest_file(tmp_path)
    assert size < MAX_FILE_BYTES, (size, path)


def test_a_dripping_judge_ends_the_run_after_a_few_calls_attempts(tmp_path):
    drip = faults.drip({"choices": []}, 1.0)  # one byte a second: never a whole reply within the deadline
    with ChatCompletionsServer(lambda body: {"wire": drip}) as judge:
        # one call at a time, so the count is exact: UNRESPONSIVE_CALLS calls time out on both attempts,
        # then the endpoint counts as stopped and the last sample is not sent at all
        measured = lm_eval_measured(tmp_path, judge, judge_timeout=2, judge_max_retries=1, judge_concurrency=1)
        calls = _chat_calls(judge)
    run = measured.run
    assert run.returncode == 8, run.stderr[-3000:]
    assert f"{N} of {N} samples got no verdict (timeout: {N})" in run.stderr
    assert "stopped answering" in run.stderr
    assert calls == 2 * UNRESPONSIVE_CALLS < 2 * N  # each ended by its deadline; the rest never sent
    assert not list((tmp_path / "out").rglob("results_*.json"))


def test_a_redirect_to_another_origin_stops_the_run_and_nothing_reaches_it(tmp_path):
    with ChatCompletionsServer(lambda body: "Final Verdict: Correct") as elsewhere:
        def moved(body):
            return {"wire": faults.redirect(307, elsewhere.chat_url)}

        with ChatCompletionsServer(moved) as judge:
            measured = lm_eval_measured(tmp_path, judge)
        reached = list(elsewhere.requests)
    run = measured.run
    assert run.returncode == 8, run.stderr[-3000:]
    assert "redirected the request (HTTP 307) to another origin" in run.stderr
    assert "judge_base_url" in run.stderr
    assert reached == []  # no prompt, no model answer, no key went there
    assert "Traceback" not in run.stderr
