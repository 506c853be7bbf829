"""The stop mechanism at our own seams: every wait of ours wakes on a stop, the pool starts nothing after
one, guards put the handlers back, the savers speak once, and what is saved resumes (the resume command,
the checkpoint of generations, the finished generations in lm-eval's own cache format).

Real signals through the real CLI are in test_stop_e2e.py; here a stop is asked for with
``stop.request``, which never exits the process.
"""

from __future__ import annotations

import os
import signal
import stat
import sys
import threading
import time

import pytest

from lm_eval_mathjudge.harness import commands, recovery
from lm_eval_mathjudge.calls import stop
from lm_eval_mathjudge.batch import base
from lm_eval_mathjudge.batch.jobs import JobStore
from lm_eval_mathjudge.judging.batch import BatchRun
from lm_eval_mathjudge.judging.cache import ReplyCache
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.errors import Stopped, TransientJudgeError
from lm_eval_mathjudge.generators.job import Job
from lm_eval_mathjudge.generators.settings import GeneratorSettings
from lm_eval_mathjudge.generators.store import MediaStore
from lm_eval_mathjudge.calls.limits import AdaptiveGate, WindowLimiter
from lm_eval_mathjudge.calls.workers import run_bounded
from lm_eval_mathjudge.calls.retry import RetryPolicy, call_with_retries
from tests.e2e import THREAD_WAIT_S


@pytest.fixture(autouse=True)
def fresh_stop():
    stop.reset()
    yield
    stop.reset()


def _ends_in_stopped(wait, after: float = 0.3) -> None:
    """Run ``wait`` (a wait of at least a minute) in a thread, ask for a stop ``after`` s: it ends in Stopped.

    Only a stop ends it in Stopped; the join is a safety net, far below the wait's own length."""
    outcome = {}

    def target():
        try:
            wait()
            outcome["result"] = "returned"
        except Stopped:
            outcome["result"] = "stopped"

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    time.sleep(after)
    assert thread.is_alive(), "the wait ended before the stop"
    stop.request(signal.SIGINT)
    thread.join(THREAD_WAIT_S)
    assert outcome.get("result") == "stopped", outcome


def _always_busy():
    raise TransientJudgeError("HTTP 503", kind="http_503", status=503, retry_after=50.0)


class _NeverDone:
    name, limits = "fake", base.Limits(100, 10**9)

    def status(self, job):
        return base.JobStatus(base.RUNNING, total=1, raw_state="in_progress")


def _batch_wait(tmp_path):
    cache = ReplyCache(str(tmp_path / "cache"))
    run = BatchRun(_NeverDone(), cache, JudgeSettings(mode="batch", batch_poll_seconds=600.0), label="l",
                   progress=False)

    def wait():
        with JobStore(cache.path) as store:  # sqlite: opened in the thread that waits
            store.save("job1", "fake", ["k"], time.time())
            run._wait(store, ["job1"])
    return wait


def _lease_wait(tmp_path):
    mine, theirs = ReplyCache(str(tmp_path / "cache")), ReplyCache(str(tmp_path / "cache"))
    assert theirs.claim("k", 3600)  # another owner (alive: this process) is paying for "k"
    return lambda: mine.wait_for("k", 3600, sleep=stop.sleep)


def _video_poll(tmp_path):
    settings = GeneratorSettings(model="m", media_dir=str(tmp_path / "media"), poll_interval=600.0, poll_timeout=3600.0)
    job = Job(MediaStore(str(tmp_path / "media")), "k" * 64, "fake", settings)
    return lambda: job.wait(lambda: None, "the video")


def _limiter_wait(tmp_path):
    limiter = WindowLimiter(1, 3600.0)
    limiter.acquire()
    return limiter.acquire  # the next start is an hour away


WAITS = {
    "retry backoff": lambda tmp: lambda: call_with_retries(_always_busy, RetryPolicy(max_retries=3, max_delay=60)),
    "requests per minute": _limiter_wait,
    "a lease held by another process": _lease_wait,
    "a batch poll": _batch_wait,
    "a video poll": _video_poll,
    "stop.sleep": lambda tmp: lambda: stop.sleep(3600),
}


@pytest.mark.parametrize("name", WAITS)
def test_a_stop_ends_every_wait_of_ours_at_its_next_tick(tmp_path, name):
    _ends_in_stopped(WAITS[name](tmp_path))


def test_a_call_waiting_for_its_turn_at_the_gate_never_starts_after_a_stop():
    gate = AdaptiveGate(1)
    held = gate.acquire()
    outcome = {}

    def waiter():
        try:
            gate.acquire()
            outcome["got"] = "a place"
        except Stopped:
            outcome["got"] = "stopped"

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    time.sleep(0.2)
    stop.request()
    gate.release(held, "ok")  # the call in flight ends: the waiter wakes, and does not start
    thread.join(THREAD_WAIT_S)
    assert outcome == {"got": "stopped"} and gate.in_flight == 0


def test_the_pool_starts_nothing_after_a_stop_and_waits_for_the_calls_in_flight():
    lock, started, finished, asked = threading.Lock(), [], [], []

    def call(i):
        with lock:
            started.append(time.monotonic())
            if len(started) == 12:  # mid second wave: a stop while 8 calls are in flight
                asked.append(time.monotonic())
                stop.request()
        time.sleep(0.3)
        with lock:
            finished.append(i)
        return i

    with pytest.raises(Stopped) as info:
        run_bounded(list(range(200)), call, concurrency=8, desc="t", progress=False)
    assert info.value.code == 130
    assert len(started) == 12 and max(started) <= asked[0]  # nothing started after the stop
    assert len(finished) == len(started)  # every call in flight ran to its end before the pool raised


def test_calls_still_running_when_the_grace_runs_out_are_left_behind(monkeypatch):
    monkeypatch.setattr(stop, "GRACE_S", 0.5)
    release, ended = threading.Event(), []
    threading.Timer(0.2, stop.request, args=(signal.SIGTERM,)).start()
    with pytest.raises(Stopped) as info:
        run_bounded(list(range(4)), lambda i: ended.append(release.wait(THREAD_WAIT_S)), concurrency=4, desc="t",
                    progress=False)
    assert info.value.code == 143 and ended == []  # raised with all four calls still waiting
    release.set()


def test_guards_install_the_handlers_and_the_last_release_puts_the_old_ones_back():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    stop.guard("a", lambda: None)
    stop.guard("b", lambda: None)
    stop.guard("a", lambda: None)
    assert signal.getsignal(signal.SIGINT) is stop._handle and signal.getsignal(signal.SIGTERM) is stop._handle
    for key in ("a", "b"):
        stop.release(key)
        assert signal.getsignal(signal.SIGINT) is stop._handle
    stop.release("a")
    assert {s: signal.getsignal(s) for s in before} == before


def test_an_ignored_signal_stays_ignored():
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        stop.guard("a", lambda: None)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is stop._handle
        stop.release("a")
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_the_savers_run_once_and_the_stop_is_one_line(capfd):
    calls = []
    stop.guard("generations", lambda: calls.append("g") or "The generations are saved in G: resume with X.")
    stop.guard("broken", lambda: 1 / 0)
    stop.guard("batch", lambda: calls.append("b") or "The batch job(s) J keep running.")
    stop.request(signal.SIGTERM)
    first, second = stop.finish(), stop.finish()
    assert isinstance(first, Stopped) and first.code == second.code == 143 and calls == ["g", "b"]
    lines = [line for line in capfd.readouterr().err.splitlines() if line]
    assert lines == ["mathjudge: stopped by SIGTERM. The generations are saved in G: resume with X. "
                     "(could not save: ZeroDivisionError) The batch job(s) J keep running."]


def test_a_stop_leaving_a_guarded_block_runs_the_savers(capfd):
    with pytest.raises(Stopped):
        with stop.guarded("work", lambda: "Rerun the same command."):
            stop.request()
            stop.check()
    assert "mathjudge: stopped by SIGINT. Rerun the same command." in capfd.readouterr().err


def test_a_signal_in_a_polling_loop_only_asks_and_elsewhere_stops_at_once_without_ending_a_host(capfd):
    stop.guard("work", lambda: "Rerun the same command.")
    with stop.polling():
        stop._handle(signal.SIGINT, None)  # what the interpreter calls on a real Ctrl-C
        assert stop.requested() and "Ctrl-C again quits at once" in capfd.readouterr().err
    with pytest.raises(Stopped):  # the second one, outside our loop: the savers, the line, and (in a host that
        stop._handle(signal.SIGINT, None)  # is not lm_eval or mathjudge, e.g. this test run) Stopped, no exit
    assert "mathjudge: stopped by SIGINT. Rerun the same command." in capfd.readouterr().err


def test_a_host_starts_its_next_run_afresh_after_a_stopped_one():
    stop.guard("first run", lambda: "kept")
    stop.request()
    stop.finish()  # the stopped run unwinds in the host without releasing its guard
    stop.guard("next run", lambda: "kept")
    assert not stop.requested() and list(stop._state.savers) == ["next run"]
    stop.release("next run")


@pytest.mark.parametrize("argv0, expected", [
    ("/venv/bin/lm_eval", "lm_eval"), ("/venv/bin/lm-eval", "lm_eval"),
    ("/venv/lib/python3.11/site-packages/lm_eval/__main__.py", "lm_eval"), ("/venv/bin/mathjudge", "mathjudge"),
    ("/src/lm_eval_mathjudge/__main__.py", "mathjudge"), ("/venv/lib/ipykernel_launcher.py", None), ("", None),
])
def test_which_command_this_process_is(monkeypatch, argv0, expected):
    monkeypatch.setattr(sys, "argv", [argv0])
    assert stop.command() == expected


# ---------------------------------------------------------------------- the resume command
R, P = "mathjudge-replay", "/c/generations/generations-1.jsonl"
REPLAYED = ["--model", R, "--model_args", f"path={P}"]
ARGV_CASES = [
    (["--model", "hf", "--model_args", "pretrained=Qwen/Q,dtype=auto", "--tasks", "gsm8k_gpt4em",
      "--apply_chat_template", "--log_samples"], [*REPLAYED, "--tasks", "gsm8k_gpt4em", "--log_samples"]),
    (["run", "--model=vllm", "--model_args", "pretrained=x", "tensor_parallel_size=2", "--tasks", "t", "-L", "5"],
     ["run", *REPLAYED, "--tasks", "t", "-L", "5"]),
    (["-M", "local-chat-completions", "-a", "base_url=http://h/v1", "-c", "/tmp/lm", "--tasks", "t",
      "--apply_chat_template", "chatml", "--fewshot_as_multiturn", "--output_path", "out"],
     [*REPLAYED, "--tasks", "t", "--output_path", "out"]),
    (["--tasks", "t", "--use_cache=/tmp/lm", "--model_args=pretrained=x"], [*REPLAYED, "--tasks", "t"]),
    (["--tasks", "t"], [*REPLAYED, "--tasks", "t"]),  # the default model (hf): replaced all the same
]


@pytest.mark.parametrize("argv, expected", ARGV_CASES)
def test_the_replay_command_keeps_everything_but_the_model(argv, expected):
    assert commands.replay_args(argv, P) == expected


# A run that died during generation resumes from its live file: the replay model, with the run's own model
# (and the options that shape its prompts) for what the file lacks.
FALLBACK_CASES = [
    (["--model", "hf", "--model_args", "pretrained=Qwen/Q,dtype=auto", "--tasks", "gsm8k_gpt4em",
      "--apply_chat_template", "--log_samples"],
     ["--model", R, "--model_args", f"path={P},fallback=hf,pretrained=Qwen/Q,dtype=auto", "--tasks", "gsm8k_gpt4em",
      "--apply_chat_template", "--log_samples"]),
    (["run", "--model=vllm", "--model_args", "pretrained=x", "tensor_parallel_size=2", "--tasks", "t"],
     ["run", "--model", R, "--model_args", f"path={P},fallback=vllm,pretrained=x,tensor_parallel_size=2",
      "--tasks", "t"]),
    (["-M", "local-chat-completions", "-a", "base_url=http://h/v1", "-c", "/tmp/lm", "--tasks", "t",
      "--apply_chat_template", "chatml", "--fewshot_as_multiturn", "--output_path", "out"],
     ["--model", R, "--model_args", f"path={P},fallback=local-chat-completions,base_url=http://h/v1", "--tasks", "t",
      "--apply_chat_template", "chatml", "--fewshot_as_multiturn", "--output_path", "out"]),
    (["--tasks", "t"], ["--model", R, "--model_args", f"path={P},fallback=hf", "--tasks", "t"]),
    # a resume that died too: its own fallback stays, the new file replaces the old
    (["--model", R, "--model_args", "path=/old.jsonl,fallback=hf,pretrained=x", "--tasks", "t"],
     ["--model", R, "--model_args", f"path={P},fallback=hf,pretrained=x", "--tasks", "t"]),
]


@pytest.mark.parametrize("argv, expected", FALLBACK_CASES)
def test_the_resume_after_a_kill_replays_the_file_and_asks_the_runs_own_model_for_the_rest(argv, expected):
    assert commands.replay_args(argv, P, fallback=True) == expected


def test_the_resume_command_is_a_full_lm_eval_command_without_the_models_secrets(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/venv/bin/lm_eval", "--model", "openai-chat-completions", "--model_args",
                                      "model=gpt-4o,api_key=sk-canary-7f3d9c2b4a1e8f6d", "--tasks", "t",
                                      "--metadata", '{"judge_concurrency": 64}'])
    assert commands.resume_command(P) == (f"lm_eval --model {R} --model_args path={P} --tasks t --metadata "
                                          "'{\"judge_concurrency\": 64}'")
    monkeypatch.setattr(sys, "argv", ["/venv/bin/mathjudge", "rejudge", "s.jsonl", "--judge", "local"])
    assert commands.resume_command(P) == "the same command (mathjudge rejudge s.jsonl --judge local)"
    monkeypatch.setattr(sys, "argv", ["notebook.py"])  # Python's own API: name the replay model's arguments
    assert commands.resume_command(P) == f"--model {R} --model_args path={P}"


# ---------------------------------------------------------------------- what is saved
def _task(name, questions, generated=True):
    from lm_eval.api.instance import Instance

    instances = []
    for i, question in enumerate(questions):
        inst = Instance(request_type="generate_until", doc={"question": question},
                        arguments=(f"Problem: {question}\nSolution:", {"until": ["Problem:"], "do_sample": False}),
                        idx=0, metadata=(name, i, 1))
        if generated:
            inst.resps.append(f"so \\boxed{{{i}}}")
        instances.append(inst)
    return _Task(name, instances)


class _Task:
    """The parts of a judged task's run entry (harness/entry.py) that recovery reads."""

    def __init__(self, name, instances):
        self.name, self.instances = name, instances


@pytest.fixture
def tracked():
    kept = []

    def track(task):
        kept.append(task)
        recovery.track(task)
        return task
    yield track
    for task in kept:
        recovery._LIVE.pop(id(task), None)
    recovery._WANTED.clear()
    recovery._FINISHED.clear()


def test_the_checkpoint_holds_every_generation_once_complete_and_private(tmp_path, tracked, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["lm_eval", "--model", "hf", "--tasks", "a,b"])
    tracked(_task("a", ["q1", "q2"]))
    tracked(_task("b", ["q3"]))
    path = recovery.checkpoint(str(tmp_path))
    assert path is not None and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    written = os.stat(path).st_mtime_ns
    assert recovery.checkpoint(str(tmp_path)) == path and os.stat(path).st_mtime_ns == written  # not again
    message = recovery.keep_generations(str(tmp_path))
    assert f"saved in {path}: resume with lm_eval --model {R} --model_args path={path} --tasks a,b" in message
    assert os.listdir(tmp_path / "generations") == [os.path.basename(path)]
    rows = [line for line in open(path, encoding="ascii")]
    assert len(rows) == 3 and '"question": "q3"' in rows[2]


def test_nothing_is_checkpointed_while_generation_is_unfinished(tmp_path, tracked):
    tracked(_task("a", ["q1", "q2"], generated=False))
    assert recovery.checkpoint(str(tmp_path)) is None and not (tmp_path / "generations").exists()


def test_generations_lm_eval_reported_before_a_stop_are_kept_in_its_own_cache(tmp_path, tracked, monkeypatch):
    """What a model reported finished (CacheHook.add_partial) is what --use_cache gives back, and only that."""
    from lm_eval.api.model import LM, CacheHook, CachingLM

    monkeypatch.setattr(sys, "argv", ["lm_eval", "--model", "hf", "--tasks", "a"])
    task = tracked(_task("a", ["q1", "q2", "q3", "q4"], generated=False))
    hook = CacheHook(None)  # what a model holds without --use_cache
    for inst in task.instances[:2]:
        hook.add_partial("generate_until", inst.args, f"made for {inst.doc['question']}")
    hook.add_partial("generate_until", ("a prompt of another task", {}), "not ours")
    message = recovery.stop_message(str(tmp_path))
    assert message.startswith("2 of 4 generations of the judged tasks had finished")
    prefix = message.split("--use_cache ")[1].split(",")[0]
    assert message.endswith("which asks the model only for the others.") and prefix.startswith(str(tmp_path))

    class Model(LM):
        asked: list = []

        def generate_until(self, requests, disable_tqdm=False):
            self.asked.extend(r.doc["question"] for r in requests)
            return [f"new for {r.doc['question']}" for r in requests]

        loglikelihood = loglikelihood_rolling = generate_until

    lm = CachingLM(Model(), f"{prefix}_rank0.db")
    answers = lm.generate_until(task.instances)
    assert answers == ["made for q1", "made for q2", "new for q3", "new for q4"] and Model.asked == ["q3", "q4"]
