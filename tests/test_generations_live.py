"""Generations kept as they arrive: a run SIGKILLed mid-generation loses no finished answer.

The real ``lm_eval`` CLI with ``local-chat-completions`` against a loopback model that takes 1 s a
reply; the run is killed (SIGKILL, to its process group: nothing of ours runs after it) once 40
generations were asked for. The run's generations file must hold every answer the model sent before the
kill, and the resume command the run printed when the first one arrived must ask the model for exactly
the others. (Kills at the other moments of a run: ``test_resume_kill_e2e.py``.)
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
from pathlib import Path

import pytest

from tests.conftest import SHARED_DATA, read_jsonl
from tests.e2e import LM_EVAL, TIMEOUT_S, exact_match_judge, question_of, run_env
from tests.loopback import ChatCompletionsServer

pytestmark = [pytest.mark.e2e, pytest.mark.e2e_versions]  # CacheHook and get_model through compat.py

TASK = "gsm8k_gpt4em"
ROWS = read_jsonl(SHARED_DATA / "gsm8k" / "test.jsonl")
N = len(ROWS)
GOLD = {r["question"]: r["answer"].split("####")[-1].strip().replace(",", "") for r in ROWS}


def model(body: dict) -> str:
    return f"Adding up the amounts step by step.\n\\boxed{{{GOLD[question_of(body)]}}}"


def _asked(server: ChatCompletionsServer, after: float) -> list[str]:
    """The questions the model was asked (by arrival) after ``after``."""
    return [question_of(r.body) for r in server.requests if server.is_model_call(r.method, r.path) and r.time > after]


def _env(cache: Path) -> dict[str, str]:
    return run_env({"MATHJUDGE_DATA_DIR": str(SHARED_DATA), "MATHJUDGE_CACHE_DIR": str(cache),
                    "OPENAI_API_KEY": "sk-loopback"})


def _argv(model_url: str, judge_url: str, out: Path) -> list[str]:
    return [LM_EVAL, "--model", "local-chat-completions", "--model_args",
            f"model=loopback-model,base_url={model_url},num_concurrent=8,max_retries=1",
            "--apply_chat_template", "--tasks", TASK, "--log_samples", "--output_path", str(out),
            "--metadata", json.dumps({"judge_base_url": judge_url, "judge_concurrency": 16})]


def _run_files(cache: Path) -> list[Path]:
    found = sorted((cache / "generations").glob("run-*.jsonl"))
    assert all(path.stat().st_mode & 0o077 == 0 for path in found)  # what was paid for is the user's alone
    return found


def _live_records(cache: Path) -> list[dict]:
    [path] = _run_files(cache)
    return [json.loads(line) for line in path.read_text().splitlines()]


def _written(cache: Path) -> int:
    try:
        return len(_live_records(cache))
    except (AssertionError, ValueError):  # no file yet
        return 0


def _cached_replies(cache: Path) -> int:
    if not (cache / "judge_cache.sqlite3").exists():
        return 0
    with sqlite3.connect(cache / "judge_cache.sqlite3") as db:
        return db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]


def _resume_argv(stderr: str) -> list[str]:
    match = re.search(r"should this run die, resume with (lm_eval .+?) \(it asks the model", stderr)
    assert match, stderr[-3000:]
    return [LM_EVAL, *shlex.split(match.group(1))[1:]]


def test_a_sigkill_mid_generation_keeps_every_finished_generation_and_the_resume_asks_only_for_the_rest(tmp_path):
    cache, out, log = tmp_path / "cache", tmp_path / "out", tmp_path / "stderr.txt"
    with ChatCompletionsServer(model, latency=1.0) as lm, ChatCompletionsServer(exact_match_judge) as judge:
        with open(log, "wb") as fh:
            proc = subprocess.Popen(_argv(lm.chat_url, judge.url, out), env=_env(cache), stdout=subprocess.DEVNULL,
                                    stderr=fh, start_new_session=True)
        deadline = time.monotonic() + TIMEOUT_S
        while lm.call_count < 40:
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "the run never reached 40 model calls"
            time.sleep(0.02)
        answered = len(lm.replies_sent)  # the file takes each answer as it arrives: these, before the kill
        while _written(cache) < answered:
            assert proc.poll() is None and time.monotonic() < deadline, "the answers never reached the file"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=TIMEOUT_S) == -signal.SIGKILL
        stderr = log.read_text(errors="replace")

        records = _live_records(cache)
        assert len(records) >= answered >= 16, (len(records), answered)
        assert len(records) < N  # the kill was mid-generation
        judged_while_generating = judge.call_count  # streaming (the default): only finished generations
        assert judged_while_generating <= len(records)
        kept = {r["question"]: r["response"] for r in records}
        assert len(kept) == len(records)  # each generation once
        assert all(r["task"] == TASK and r["response"] == f"Adding up the amounts step by step.\n"
                   f"\\boxed{{{GOLD[r['question']]}}}" for r in records)

        cached = _cached_replies(cache)  # the verdicts streamed before the kill
        lm.latency = 0.0
        resumed_at = time.time()
        resumed = subprocess.run(_resume_argv(stderr), env=_env(cache), capture_output=True, text=True, timeout=TIMEOUT_S)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        asked_again = _asked(lm, resumed_at)
        assert not set(asked_again) & set(kept), len(set(asked_again) & set(kept))
        assert len(asked_again) == N - len(kept), (len(asked_again), len(set(asked_again)))  # exactly the missing calls
        assert not set(asked_again) & set(kept)  # and none that had finished
        assert judge.call_count - judged_while_generating == N - cached  # the rest, once each
    results = json.loads(max(out.rglob("results_*.json")).read_text())
    metrics = {name.split("::")[-1]: value for name, value in results["results"].items()}[TASK]
    assert metrics["gpt4_exact_match,none"] == 1.0 and metrics["judge_failed,none"] == 0
    saved = list((cache / "generations").glob("generations-*.jsonl"))
    assert len(saved) == 1 and len(saved[0].read_text().splitlines()) == N
    # the dead run's file still holds what it held; the resume's own file is a second name of the whole one
    whole = [p for p in _run_files(cache) if p.read_bytes() == saved[0].read_bytes()]
    [dead] = [p for p in _run_files(cache) if p not in whole]
    assert len(whole) == 1 and len(dead.read_text().splitlines()) == len(kept)
