"""Ctrl-C and SIGTERM through the real lm_eval CLI (and `mathjudge rejudge`), signalled as a terminal
and a scheduler do: to the whole process group.

The model under test is a loopback `local-chat-completions` server, the judge a loopback OpenAI server
that takes its time; both count what they receive and when each reply went out. Each scenario checks
what a stop must keep: judge calls started after the signal (at most a handful), every reply the judge
sent stored in the cache, the generations saved and the printed resume command making no model call,
the exit status (130/143) and no traceback. The scenarios run side by side
(tests/e2e.py Scenarios); each test checks its own.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import SHARED_DATA, read_jsonl
from tests.e2e import _INHERITED_PREFIXES, CANARY_KEY, LM_EVAL, TIMEOUT_S, exact_match_judge, question_of
from tests.loopback import ChatCompletionsServer

pytestmark = pytest.mark.e2e

TASK = "gsm8k_gpt4em"
ROWS = read_jsonl(SHARED_DATA / "gsm8k" / "test.jsonl")
N = len(ROWS)  # 100 docs
GOLD = {r["question"]: r["answer"].split("####")[-1].strip().replace(",", "") for r in ROWS}
MATHJUDGE = str(Path(sys.executable).with_name("mathjudge"))
HANDFUL = 3  # judge calls that may still start after a signal (a thread already past its last check)


def model(body: dict) -> str:
    return f"Adding up the amounts step by step.\n\\boxed{{{GOLD[question_of(body)]}}}"


class SlowJudge:
    """Grades like a careful judge, taking ``latency`` s per call (``fast`` calls first take ``fast_latency``)."""

    def __init__(self, latency: float, fast: int = 0, fast_latency: float = 0.0):
        self.latency, self.fast, self.fast_latency = latency, fast, fast_latency
        self._count = itertools.count()
        self._lock = threading.Lock()

    def __call__(self, body: dict) -> str:
        with self._lock:
            n = next(self._count)
        time.sleep(self.fast_latency if n < self.fast else self.latency)
        return exact_match_judge(body)


@dataclass
class StoppedRun:
    """What a signalled run left behind."""
    returncode: int
    stderr: str
    signalled: list[float]  # when each signal was sent
    exited: float
    judge_calls_after: int  # judge calls that reached the server after the first signal
    replies_sent: list[float]
    replies_cached: int
    model_calls: int
    cache: Path
    out: Path
    extra: dict = field(default_factory=dict)


def _env(cache: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(_INHERITED_PREFIXES)}
    return {**clean, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
            "MATHJUDGE_DATA_DIR": str(SHARED_DATA), "MATHJUDGE_CACHE_DIR": str(cache), "OPENAI_API_KEY": CANARY_KEY}


def _args(model_url: str, judge_url: str, concurrency: int, out: Path, model_concurrency: int = 16,
          stream: bool = True) -> list[str]:
    return [LM_EVAL, "--model", "local-chat-completions", "--model_args",
            f"model=loopback-model,base_url={model_url},num_concurrent={model_concurrency},max_retries=1",
            "--apply_chat_template", "--tasks", TASK, "--log_samples", "--output_path", str(out),
            "--metadata", json.dumps({"judge_base_url": judge_url, "judge_concurrency": concurrency,
                                      **({} if stream else {"judge_stream": False})})]


def _start(argv: list[str], cache: Path, log: Path) -> subprocess.Popen:
    with open(log, "wb") as fh:  # a file, not a pipe: the progress bars must never block the run
        return subprocess.Popen(argv, env=_env(cache), stdout=subprocess.DEVNULL, stderr=fh, start_new_session=True)


def _until(condition, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert proc.poll() is None, f"the run ended before {what}"
        assert time.monotonic() < deadline, f"the run never reached {what}"
        time.sleep(0.02)


def _signal_group(proc: subprocess.Popen, signums: list[int], gap: float = 1.0) -> list[float]:
    sent = []
    for i, signum in enumerate(signums):
        if i:
            time.sleep(gap)
        sent.append(time.time())
        os.killpg(proc.pid, signum)
    return sent


def _cached_replies(cache: Path) -> int:
    with sqlite3.connect(cache / "judge_cache.sqlite3") as db:
        return db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]


def _stop_during_judging(tmp: Path, concurrency: int, signums: list[int], judge: SlowJudge, in_flight: int,
                         resume: bool = False) -> StoppedRun:
    """Generate all docs, then signal once ``in_flight`` judge calls have arrived and are being answered
    (a stop of the judge pass: without streaming, so generation is surely over; a stop while streaming is
    the during-generation scenario's)."""
    cache, out, log = tmp / "cache", tmp / "out", tmp / "stderr.txt"
    with ChatCompletionsServer(model) as lm, ChatCompletionsServer(judge) as judge_server:
        proc = _start(_args(lm.chat_url, judge_server.url, concurrency, out, stream=False), cache, log)
        _until(lambda: judge_server.call_count >= in_flight, proc, f"{in_flight} judge calls")
        time.sleep(0.3)  # the calls are in flight, the pool full
        sent = _signal_group(proc, signums)
        returncode = proc.wait(timeout=TIMEOUT_S)
        exited = time.time()
        after = sum(1 for r in judge_server.requests if judge_server.is_model_call(r.method, r.path)
                    and r.time > sent[0])
        stopped = StoppedRun(returncode, log.read_text(errors="replace"), sent, exited, after,
                          judge_server.replies_sent, _cached_replies(cache), lm.call_count, cache, out)
        if resume:
            stopped.extra = _resume(stopped, lm, judge_server)
    return stopped


def resume_command(stderr: str) -> list[str]:
    """The command the stop line names (``lm_eval ...``), as an argv for this environment."""
    line = next(line for line in stderr.splitlines() if line.startswith("mathjudge: stopped by"))
    command = re.search(r"resume with (lm_eval .+?)(?: \(it judges|, which asks)", line)
    assert command, line
    argv = shlex.split(command.group(1))
    return [LM_EVAL, *argv[1:]]


def _resume(stopped: StoppedRun, lm: ChatCompletionsServer, judge_server: ChatCompletionsServer) -> dict:
    model_before, judge_before = lm.call_count, judge_server.call_count
    argv = resume_command(stopped.stderr)
    proc = subprocess.run(argv, env=_env(stopped.cache), capture_output=True, text=True, timeout=TIMEOUT_S)
    results = sorted(stopped.out.rglob("results_*.json"))
    return {"returncode": proc.returncode, "stderr": proc.stderr, "argv": argv,
            "model_calls": lm.call_count - model_before, "judge_calls": judge_server.call_count - judge_before,
            "results": json.loads(results[-1].read_text()) if results else None}


def _stop_during_generation(tmp: Path) -> StoppedRun:
    """The model takes 1 s a reply; signal once 40 generations were asked for (about 32 answered); the
    judge (streaming, the default) has been asked about those already."""
    cache, out, log = tmp / "cache", tmp / "out", tmp / "stderr.txt"
    with ChatCompletionsServer(model, latency=1.0) as lm, ChatCompletionsServer(SlowJudge(0.0)) as judge_server:
        proc = _start(_args(lm.chat_url, judge_server.url, 16, out, model_concurrency=8), cache, log)
        _until(lambda: lm.call_count >= 40, proc, "40 model calls")
        sent = _signal_group(proc, [signal.SIGINT])
        returncode = proc.wait(timeout=TIMEOUT_S)
        exited = time.time()
        stopped = StoppedRun(returncode, log.read_text(errors="replace"), sent, exited, judge_server.call_count,
                          judge_server.replies_sent, _cached_replies(cache), lm.call_count, cache, out)
        stopped.extra["model_replies_sent"] = lm.replies_sent
        stopped.extra["kept"] = _kept_generations(cache)
        lm.latency = 0.0
        stopped.extra["resume"] = _resume(stopped, lm, judge_server)
        again = _resume(stopped, lm, judge_server)  # the same command once more: everything is cached now
        stopped.extra["again"] = again
    return stopped


def _kept_generations(cache: Path) -> dict[str, str]:
    """What lm-eval's generation cache holds (the file a stop during generation writes)."""
    from sqlitedict import SqliteDict

    found = list((cache / "generations").glob("lm-eval-cache-*_rank0.db"))
    if len(found) != 1:
        return {}
    with SqliteDict(str(found[0]), flag="r") as db:
        return dict(db.items())


def _samples_file(folder: Path) -> Path:
    """A samples file as lm_eval --log_samples writes it (the generations a rejudge reads)."""
    folder.mkdir(parents=True)
    path = folder / f"samples_{TASK}_2026-01-01T00-00-00.000000.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for i, row in enumerate(ROWS):
            text = f"Adding up the amounts step by step.\n\\boxed{{{GOLD[row['question']]}}}"
            fh.write(json.dumps({"doc_id": i, "doc": row, "resps": [[text]], "filtered_resps": [text],
                                 "filter": "none", "metrics": []}) + "\n")
    return path


def _stop_a_rejudge(tmp: Path) -> StoppedRun:
    cache, log = tmp / "cache", tmp / "stderr.txt"
    source = _samples_file(tmp / "runs" / "loopback-model")
    with ChatCompletionsServer(SlowJudge(1.0)) as judge_server:
        argv = [MATHJUDGE, "rejudge", str(source), "--output_path", str(tmp / "out"), "--judge",
                "openai:loopback-model", "--metadata",
                json.dumps({"judge_base_url": judge_server.url, "judge_concurrency": 8})]
        proc = _start(argv, cache, log)
        # three full waves of 8, then a pause: the signal falls while a wave is in flight, never while one
        # is still arriving (calls sent before the signal may reach the server just after it)
        _until(lambda: judge_server.call_count >= 24, proc, "24 judge calls")
        time.sleep(0.3)
        sent = _signal_group(proc, [signal.SIGINT])
        returncode = proc.wait(timeout=TIMEOUT_S)
        exited = time.time()
        after = sum(1 for r in judge_server.requests if judge_server.is_model_call(r.method, r.path)
                    and r.time > sent[0])
        stopped = StoppedRun(returncode, log.read_text(errors="replace"), sent, exited, after,
                          judge_server.replies_sent, _cached_replies(cache), 0, cache, tmp / "out")
        judge_server.responder = exact_match_judge
        before = judge_server.call_count
        rerun = subprocess.run(argv, env=_env(cache), capture_output=True, text=True, timeout=TIMEOUT_S)
        stopped.extra = {"returncode": rerun.returncode, "stderr": rerun.stderr,
                         "judge_calls": judge_server.call_count - before}
    return stopped


SCENARIOS = {
    "test_one_sigint_at_concurrency_64_keeps_every_reply_and_resumes_without_the_model":
        lambda tmp: _stop_during_judging(tmp, 64, [signal.SIGINT], SlowJudge(2.0), in_flight=64, resume=True),
    "test_one_sigint_at_concurrency_8": lambda tmp: _stop_during_judging(tmp, 8, [signal.SIGINT], SlowJudge(1.0),
                                                                         in_flight=20),
    "test_sigterm_at_concurrency_64": lambda tmp: _stop_during_judging(tmp, 64, [signal.SIGTERM], SlowJudge(2.0),
                                                                       in_flight=64),
    # 64 quick replies first, then calls that take 8 s: the second Ctrl-C comes while they are in flight.
    "test_a_second_sigint_quits_at_once_and_loses_no_generation":
        lambda tmp: _stop_during_judging(tmp, 64, [signal.SIGINT, signal.SIGINT], SlowJudge(8.0, 64, 0.3),
                                         in_flight=N, resume=True),
    "test_sigint_during_generation_keeps_the_finished_generations": _stop_during_generation,
    "test_sigint_during_a_rejudge": _stop_a_rejudge,
}


def _clean_stop(stopped: StoppedRun, signum: int) -> None:
    assert stopped.returncode == 128 + signum, stopped.stderr[-3000:]
    assert "Traceback" not in stopped.stderr, stopped.stderr[-3000:]
    lines = [line for line in stopped.stderr.splitlines() if line.startswith("mathjudge: stopped by")]
    assert len(lines) == 1 and signal.Signals(signum).name in lines[0], stopped.stderr[-3000:]


def _generations_saved(stopped: StoppedRun) -> Path:
    [saved] = (stopped.cache / "generations").glob("generations-*.jsonl")
    rows = read_jsonl(saved)
    assert len(rows) == N and {r["question"] for r in rows} == set(GOLD)
    assert all(r["response"].endswith(f"\\boxed{{{GOLD[r['question']]}}}") for r in rows)
    return saved


def _no_paid_reply_lost(stopped: StoppedRun) -> None:
    assert stopped.judge_calls_after <= HANDFUL, stopped.judge_calls_after
    assert stopped.replies_cached == len(stopped.replies_sent) > 0


def test_one_sigint_at_concurrency_64_keeps_every_reply_and_resumes_without_the_model(scenario):
    stopped = scenario()
    _clean_stop(stopped, signal.SIGINT)
    _no_paid_reply_lost(stopped)
    assert stopped.replies_cached == 64  # the first wave, all of it; nothing after it started
    saved = _generations_saved(stopped)
    resumed = stopped.extra
    assert str(saved) in resumed["argv"][resumed["argv"].index("--model_args") + 1]
    assert resumed["returncode"] == 0, resumed["stderr"][-3000:]
    assert resumed["model_calls"] == 0  # the resume command replays the saved generations
    assert resumed["judge_calls"] == N - stopped.replies_cached  # and pays only for what was not cached
    metrics = resumed["results"]["results"][TASK]
    assert metrics["gpt4_exact_match,none"] == 1.0 and metrics["judge_failed,none"] == 0


def test_one_sigint_at_concurrency_8(scenario):
    stopped = scenario()
    _clean_stop(stopped, signal.SIGINT)
    _no_paid_reply_lost(stopped)
    _generations_saved(stopped)


def test_sigterm_at_concurrency_64(scenario):
    stopped = scenario()
    _clean_stop(stopped, signal.SIGTERM)
    _no_paid_reply_lost(stopped)
    assert stopped.replies_cached == 64
    _generations_saved(stopped)


def test_a_second_sigint_quits_at_once_and_loses_no_generation(scenario):
    stopped = scenario()
    _clean_stop(stopped, signal.SIGINT)
    # the 36 calls in flight take 8 s: a first Ctrl-C alone waits up to 10 s for them and stores them all
    assert stopped.replies_cached < N
    assert stopped.judge_calls_after <= HANDFUL
    received = sum(1 for t in stopped.replies_sent if t < stopped.signalled[0])
    assert received >= 64 and stopped.replies_cached >= received  # every reply received before the quit
    _generations_saved(stopped)
    resumed = stopped.extra
    assert resumed["returncode"] == 0, resumed["stderr"][-3000:]
    assert resumed["model_calls"] == 0 and resumed["judge_calls"] == N - stopped.replies_cached


@pytest.mark.e2e_versions  # lm-eval's own generation cache and CacheHook, through compat.py
def test_sigint_during_generation_keeps_the_finished_generations(scenario):
    stopped = scenario()
    _clean_stop(stopped, signal.SIGINT)
    # streaming judged the finished ones while the model generated; every reply sent is in the cache
    assert 0 < stopped.judge_calls_after <= len(stopped.extra["kept"])  # only about finished generations
    assert stopped.replies_cached == len(stopped.replies_sent) > 0
    answered = [t for t in stopped.extra["model_replies_sent"] if t < stopped.signalled[0] - 1.0]  # and received
    kept = stopped.extra["kept"]
    finished = len(kept)
    assert finished >= len(answered) >= 16, (finished, len(answered))
    assert all(text.startswith("Adding up the amounts") for text in kept.values())
    assert f"{finished} of {N} generations" in stopped.stderr
    resumed = stopped.extra["resume"]
    assert "--use_cache" in resumed["argv"]
    assert resumed["returncode"] == 0, resumed["stderr"][-3000:]
    assert resumed["model_calls"] == N - finished  # lm-eval's cache answers the finished ones
    assert resumed["judge_calls"] == N - stopped.replies_cached  # the streamed verdicts come from the cache
    assert resumed["results"]["results"][TASK]["gpt4_exact_match,none"] == 1.0
    again = stopped.extra["again"]
    assert again["returncode"] == 0, again["stderr"][-3000:]
    assert (again["model_calls"], again["judge_calls"]) == (0, 0)  # --use_cache and the judge cache: no call


def test_sigint_during_a_rejudge(scenario):
    stopped = scenario()
    _clean_stop(stopped, signal.SIGINT)
    _no_paid_reply_lost(stopped)
    assert "rerun the same command" in stopped.stderr
    rerun = stopped.extra
    assert rerun["returncode"] == 0, rerun["stderr"][-3000:]
    assert rerun["judge_calls"] == N - stopped.replies_cached
