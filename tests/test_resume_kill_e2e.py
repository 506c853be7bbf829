"""A kill at any moment leaves one resume path that works, and it pays only for what is missing.

Each scenario is a real ``lm_eval`` process (``local-chat-completions`` against a loopback model, a
loopback GPT4-EM judge) killed with SIGKILL, to its process group, at one moment: before any
generation finished, mid-generation and mid-judging (judging while generating, and after it), and
in the middle of lm-eval's final write (``tests/kill_at``: the process kills itself there). The run
is then resumed with a command it printed: ``mathjudge resume OUT`` (printed when the judged tasks
are built) or the ``lm_eval`` command of the run's generations file (printed at the first
generation). The model server counts what the resume asks for: exactly the generations the file
lacks; the judge server counts the verdicts: exactly those the judge cache lacks.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, SHARED_DATA, read_jsonl
from tests.e2e import LM_EVAL, MATHJUDGE, TIMEOUT_S, exact_match_judge, question_of, run_env
from tests.loopback import ChatCompletionsServer

pytestmark = [pytest.mark.e2e]

TASK = "gsm8k_gpt4em"
N = 24  # docs (--limit)
GOLD = {r["question"]: r["answer"].split("####")[-1].strip().replace(",", "")
        for r in read_jsonl(SHARED_DATA / "gsm8k" / "test.jsonl")}
KILL_AT = REPO / "tests" / "kill_at"  # sitecustomize: SIGKILL in the middle of lm-eval's final write


def model(body: dict) -> str:
    return f"Adding up the amounts step by step.\n\\boxed{{{GOLD[question_of(body)]}}}"


class SlowJudge:
    """Grades like a careful judge, ``latency`` s a call."""

    def __init__(self, latency: float):
        self.latency = latency

    def __call__(self, body: dict) -> str:
        time.sleep(self.latency)
        return exact_match_judge(body)


@dataclass
class Killed:
    stderr: str
    cache: Path
    out: Path
    lm: ChatCompletionsServer
    judge: ChatCompletionsServer

    def env(self, **more: str) -> dict[str, str]:
        return run_env({"MATHJUDGE_DATA_DIR": str(SHARED_DATA), "MATHJUDGE_CACHE_DIR": str(self.cache),
                        "OPENAI_API_KEY": "sk-loopback", **more})

    def start_command(self) -> list[str]:
        """``mathjudge resume OUT``, as printed when the judged tasks were built."""
        match = re.search(r"should this run die, `(mathjudge resume .+?)` resumes it", self.stderr)
        assert match, self.stderr[-3000:]
        return [MATHJUDGE, *shlex.split(match.group(1))[1:]]

    def file_command(self) -> list[str]:
        """The ``lm_eval`` command that replays the run's generations file, as printed at the first generation."""
        match = re.search(r"as it finishes; should this run die, resume with (lm_eval .+?) \(it asks the model",
                          self.stderr)
        assert match, self.stderr[-3000:]
        return [LM_EVAL, *shlex.split(match.group(1))[1:]]

    def run_file(self) -> list[dict]:
        [path] = (self.cache / "generations").glob("run-*.jsonl")
        return [json.loads(line) for line in path.read_bytes().splitlines(keepends=True) if line.endswith(b"\n")]

    def cached(self) -> int:
        if not (self.cache / "judge_cache.sqlite3").exists():
            return 0
        with sqlite3.connect(self.cache / "judge_cache.sqlite3") as db:
            return db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def resume(self, argv: list[str], new_shell: bool = False) -> dict:
        """Run ``argv`` (fast model and judge now; ``new_shell``: without the run's MATHJUDGE_* variables,
        which ``mathjudge resume`` restores); what it asked for, and the results."""
        self.lm.latency, self.judge.responder = 0.0, exact_match_judge
        model_before, judge_before, cached = len(self._asked()), self.judge.call_count, self.cached()
        env = run_env({"OPENAI_API_KEY": "sk-loopback"}) if new_shell else self.env()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        assert done.returncode == 0, (argv, done.stderr[-4000:])
        newest = max(self.out.rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
        metrics = {name.split("::")[-1]: v for name, v in json.loads(newest.read_text())["results"].items()}[TASK]
        return {"asked": self._asked()[model_before:], "judge_calls": self.judge.call_count - judge_before,
                "cached_before": cached, "metrics": metrics, "stderr": done.stderr}

    def _asked(self) -> list[str]:
        return [question_of(r.body) for r in self.lm.requests if self.lm.is_model_call(r.method, r.path)]


def _argv(lm: ChatCompletionsServer, judge: ChatCompletionsServer, out: Path, stream: bool) -> list[str]:
    return [LM_EVAL, "--model", "local-chat-completions", "--model_args",
            f"model=loopback-model,base_url={lm.chat_url},num_concurrent=4,max_retries=1",
            "--apply_chat_template", "--tasks", TASK, "--limit", str(N), "--log_samples", "--output_path", str(out),
            "--metadata", json.dumps({"judge_base_url": judge.url, "judge_concurrency": 2, "judge_stream": stream})]


def _killed(tmp: Path, lm, judge, *, stream: bool, when=None, kill_at: str | None = None) -> Killed:
    """Start the run and SIGKILL it once ``when()`` holds (or let it kill itself at ``kill_at``)."""
    run = Killed("", tmp / "cache", tmp / "out", lm, judge)
    env = run.env(**({"PYTHONPATH": str(KILL_AT), "MJ_TEST_KILL_AT": kill_at} if kill_at else {}))
    log = tmp / "stderr.txt"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(_argv(lm, judge, run.out, stream), env=env, stdout=subprocess.DEVNULL, stderr=fh,
                                start_new_session=True)
    deadline = time.monotonic() + TIMEOUT_S
    while when is not None and not when():
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        assert time.monotonic() < deadline, "the run never reached the moment of the kill"
        time.sleep(0.01)
    if when is not None:
        os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=TIMEOUT_S) == -signal.SIGKILL, log.read_text(errors="replace")[-3000:]
    run.stderr = log.read_text(errors="replace")
    return run


def _saved(cache: Path) -> int:
    """Generations in the run's file so far."""
    return sum(path.read_bytes().count(b"\n") for path in (cache / "generations").glob("run-*.jsonl"))


def _all_credited(resumed: dict) -> None:
    assert resumed["metrics"]["gpt4_exact_match,none"] == 1.0 and resumed["metrics"]["judge_failed,none"] == 0


def test_a_kill_before_any_generation_resumes_with_mathjudge_resume(tmp_path):
    with ChatCompletionsServer(model, latency=5.0) as lm, ChatCompletionsServer(exact_match_judge) as judge:
        run = _killed(tmp_path, lm, judge, stream=True, when=lambda: lm.call_count >= 1)
        assert not lm.replies_sent  # nothing had finished
        resumed = run.resume(run.start_command())
    assert sorted(resumed["asked"]) == sorted(set(resumed["asked"])) and len(resumed["asked"]) == N
    assert resumed["judge_calls"] == N - resumed["cached_before"]
    assert re.search(r"mathjudge resume: running lm_eval (run )?--model local-chat-completions", resumed["stderr"])
    _all_credited(resumed)
    assert not list(run.out.glob("mathjudge-resume-*.json"))  # the resumed run finished: no notice is left


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "judged-after"])
def test_a_kill_mid_generation_resumes_asking_the_model_only_for_what_the_file_lacks(tmp_path, stream):
    with ChatCompletionsServer(model, latency=0.5) as lm, ChatCompletionsServer(exact_match_judge) as judge:
        run = _killed(tmp_path, lm, judge, stream=stream, when=lambda: _saved(tmp_path / "cache") >= 8)
        kept = {r["question"] for r in run.run_file()}
        assert 8 <= len(kept) < N
        # the printed lm_eval command, or mathjudge resume: the same resume
        resumed = run.resume(run.file_command() if stream else run.start_command())
    assert len(resumed["asked"]) == N - len(kept) and not set(resumed["asked"]) & kept
    assert resumed["judge_calls"] == N - resumed["cached_before"]
    _all_credited(resumed)


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "judged-after"])
def test_a_kill_mid_judging_resumes_without_the_model_and_pays_the_judge_only_for_what_is_not_cached(
        tmp_path, stream):
    judged = SlowJudge(0.5)
    with ChatCompletionsServer(model) as lm, ChatCompletionsServer(judged) as judge:
        run = _killed(tmp_path, lm, judge, stream=stream,
                      when=lambda: len(lm.replies_sent) >= N and len(judge.replies_sent) >= 6)
        assert len(run.run_file()) == N  # the run's file holds every generation, under the name printed first
        # the printed lm_eval command; or mathjudge resume from a new shell (it restores the cache folder)
        resumed = run.resume(run.file_command()) if not stream else run.resume(run.start_command(), new_shell=True)
    assert resumed["asked"] == []  # no model call
    assert 0 < resumed["cached_before"] < N and resumed["judge_calls"] == N - resumed["cached_before"]
    _all_credited(resumed)


@pytest.mark.parametrize("kill_at", ["results", "samples"])
def test_a_kill_during_the_final_write_resumes_with_no_call_and_reports_skip_the_half_written_file(
        tmp_path, kill_at):
    with ChatCompletionsServer(model) as lm, ChatCompletionsServer(exact_match_judge) as judge:
        run = _killed(tmp_path, lm, judge, stream=True, kill_at=kill_at)
        assert judge.call_count == N
        resumed = run.resume(run.file_command())
    assert resumed["asked"] == [] and resumed["judge_calls"] == 0
    _all_credited(resumed)
    board = subprocess.run([MATHJUDGE, "leaderboard", str(run.out), "--out", str(tmp_path / "board")],
                           env=run.env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    assert board.returncode == 0, board.stderr[-3000:]
    if kill_at == "results":  # the empty results file is skipped, by name
        [empty] = [p for p in run.out.rglob("results_*.json") if p.stat().st_size == 0]
        assert f"skipped {empty}" in board.stderr
    assert "| loopback-model |" in board.stdout


def test_a_report_with_only_a_half_written_results_file_refuses_and_says_what_to_do(tmp_path):
    with ChatCompletionsServer(model) as lm, ChatCompletionsServer(exact_match_judge) as judge:
        run = _killed(tmp_path, lm, judge, stream=True, kill_at="results")
    board = subprocess.run([MATHJUDGE, "leaderboard", str(run.out), "--out", str(tmp_path / "board")],
                           env=run.env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    assert board.returncode == 2 and "Traceback" not in board.stderr
    assert "is empty" in board.stderr and "mathjudge resume" in board.stderr
