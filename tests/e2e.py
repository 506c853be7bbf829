"""Helpers for end-to-end runs of the real ``lm_eval`` CLI against loopback servers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tests.marks import require_e2e

LM_EVAL = str(Path(sys.executable).with_name("lm_eval"))
CANARY_KEY = "sk-canary-7f3d9c2b4a1e8f6d"
# Safety nets, never claims about speed: how long a test waits for what it is sure to see (a process
# ending, a run reaching a state, a thread or a barrier) before it fails saying what never came. The
# suite runs beside other work on 2 cores: a wait that is only ever cut short by a bug can be long.
TIMEOUT_S = 900.0  # a process or a CLI run
THREAD_WAIT_S = 120.0  # a thread, an event or a barrier of the test process


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    out_dir: Path

    def results(self) -> dict:
        """The results file; lm-eval 0.5 names a group's tasks ``group::task``, tests use the task name."""
        data = json.loads(next(self.out_dir.rglob("results_*.json")).read_text())
        for section in ("results", "configs"):
            data[section] = {name.split("::")[-1]: value for name, value in data[section].items()}
        return data

    def samples(self, task: str) -> list[dict]:
        path = max([*self.out_dir.rglob(f"samples_{task}_*.jsonl"), *self.out_dir.rglob(f"samples_*::{task}_*.jsonl")])
        return [json.loads(line) for line in path.read_text().splitlines()]


# Variables that could point a run away from loopback or change its settings.
_INHERITED_PREFIXES = ("MATHJUDGE_", "OPENAI_", "AZURE_OPENAI_", "GOOGLE_", "GEMINI_", "ANTHROPIC_")


def run_env(env: dict[str, str]) -> dict[str, str]:
    """The environment of a run: this process's, minus anything that could point it away from loopback."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(_INHERITED_PREFIXES)}
    return {**clean, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **env}


# A run needs its own process when the process itself is what is tested: its start-up (PYTHONPATH,
# the start-up hook switched off), or variables that libraries read once at import (HF_*).
_PROCESS_ENV = ("PYTHONPATH", "MATHJUDGE_NO_AUTOLOAD")


def _needs_process(asked: bool, env: dict[str, str]) -> bool:
    return (asked or os.environ.get("MJ_TEST_PROCESS") == "1"
            or any(k in _PROCESS_ENV or k.startswith("HF_") for k in env))


def run_lm_eval(args: list[str], env: dict[str, str], out_dir: Path, timeout: float = TIMEOUT_S, *,
                process: bool = False, cwd: Path | None = None) -> Run:
    """One ``lm_eval`` CLI run: in this process (tests/inprocess.py) unless ``process`` or the env needs one.

    ``MJ_TEST_PROCESS=1`` runs every call as a real process (the slow, fully isolated way).
    """
    require_e2e("runs lm_eval")
    if not _needs_process(process, env):
        from tests.inprocess import run_cli

        code, stdout, stderr = run_cli(LM_EVAL_ENTRY, [*args, "--output_path", str(out_dir)], run_env(env), cwd)
        return Run(code, stdout, stderr, out_dir)
    proc = subprocess.run([LM_EVAL, *args, "--output_path", str(out_dir)], env=run_env(env), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)
    return Run(proc.returncode, proc.stdout, proc.stderr, out_dir)


LM_EVAL_ENTRY = "lm_eval"  # the console script whose entry point run_cli calls
MATHJUDGE = str(Path(sys.executable).with_name("mathjudge"))


def run_mathjudge(args: list[str], env: dict[str, str], timeout: float = TIMEOUT_S, *,
                  process: bool = False) -> subprocess.CompletedProcess:
    """One ``mathjudge`` command, in this process like ``run_lm_eval`` (or as a process)."""
    require_e2e("runs mathjudge")
    if not _needs_process(process, env):
        from tests.inprocess import run_cli

        code, stdout, stderr = run_cli("mathjudge", args, run_env(env))
        return subprocess.CompletedProcess([MATHJUDGE, *args], code, stdout, stderr)
    return subprocess.run([MATHJUDGE, *args], env=run_env(env), capture_output=True, text=True, timeout=timeout)


def run_together(*calls: Callable[[], Any]) -> list:
    """Run independent calls (each usually one lm_eval run) side by side; their results in order."""
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
        return [f.result() for f in futures]


class Scenarios:
    """A module's end-to-end scenarios, each awaited by its own test.

    With ``lm_eval`` run in this process (the default), a scenario runs in the test that
    asks for it: runs are one at a time anyway, and pytest swaps the standard streams
    between tests, which a run in a background thread would write through. With
    ``MJ_TEST_PROCESS=1`` every run is a process of its own, mostly one busy core, so the
    module's scenarios start side by side at once (they share nothing: own loopback
    servers, cache, output folders). Either way, what a scenario asserted fails its test.
    """

    WORKERS = 4

    def __init__(self) -> None:
        background = os.environ.get("MJ_TEST_PROCESS") == "1"
        self._pool = ThreadPoolExecutor(self.WORKERS, thread_name_prefix="scenario") if background else None
        self._futures: dict[str, Future] = {}
        self._waiting: dict[str, Callable[[], Any]] = {}

    def start(self, name: str, scenario: Callable[..., Any], tmp: Path, params: dict) -> None:
        if self._pool is not None:
            self._futures[name] = self._pool.submit(scenario, tmp, **params)
        else:
            self._waiting[name] = lambda: scenario(tmp, **params)

    def result(self, name: str) -> Any:
        if name in self._waiting:
            future: Future = Future()
            try:
                future.set_result(self._waiting.pop(name)())
            except BaseException as exc:  # noqa: BLE001 - kept, and raised to every test that asks
                future.set_exception(exc)
            self._futures[name] = future
        return self._futures[name].result()

    def __enter__(self) -> Scenarios:
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def boxed(text: str) -> str | None:
    """The content of the last \\boxed{...}, nested braces included."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, begin = 0, start + len("\\boxed{")
    for i in range(begin - 1, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[begin:i].strip()
    return None


_FENCE = re.compile(r"^<<<BEGIN ANSWER (?P<token>[A-Z]+)>>>\n(?P<answer>.*?)\n<<<END ANSWER (?P=token)>>>$", re.S | re.M)


def fenced(text: str) -> str:
    """The model's answer as a judge prompt carries it: the text between the fence lines."""
    match = _FENCE.search(text)
    assert match, "no fenced answer in the judge prompt"
    return match["answer"]


def exact_match_judge(body: dict) -> str:
    """A loopback judge that grades like a careful GPT-4: boxed answer vs reference."""
    prompt = body["messages"][-1]["content"]
    reference = prompt.split("### Reference solution", 1)[1].split("### Student's solution", 1)[0]
    student = prompt.split("### Student's solution", 1)[1].split("### How to grade", 1)[0]
    gold = reference.strip().splitlines()[-1].split(":")[-1].strip()
    answer = boxed(student)
    same = answer is not None and answer.replace(",", "") == gold
    return (f"Error Analysis: The student's final answer is {answer} and the reference answer is {gold}, "
            f"so they {'match' if same else 'differ'}.\nFinal Verdict: {'Correct' if same else 'Incorrect'}")


def question_of(body: dict) -> str:
    prompt = body["messages"][-1]["content"]
    return prompt.split("Problem: ", 1)[1].rsplit("\n\nSolution:", 1)[0]
