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

LM_EVAL = str(Path(sys.executable).with_name("lm_eval"))
CANARY_KEY = "sk-canary-7f3d9c2b4a1e8f6d"


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
_INHERITED_PREFIXES = ("MATHJUDGE_", "OPENAI_", "AZURE_OPENAI_", "GOOGLE_", "GEMINI_")


def run_lm_eval(args: list[str], env: dict[str, str], out_dir: Path, timeout: float = 600) -> Run:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(_INHERITED_PREFIXES)}
    full_env = {**clean, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                "TOKENIZERS_PARALLELISM": "false", **env}
    proc = subprocess.run([LM_EVAL, *args, "--output_path", str(out_dir)], env=full_env,
                          capture_output=True, text=True, timeout=timeout)
    return Run(proc.returncode, proc.stdout, proc.stderr, out_dir)


def run_together(*calls: Callable[[], Any]) -> list:
    """Run independent calls (each usually one lm_eval run) side by side; their results in order."""
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
        return [f.result() for f in futures]


class Scenarios:
    """A module's end-to-end scenarios, started together and awaited one per test.

    An lm_eval run is mostly one busy core (lm-eval indexes its whole task folder at
    start), and the scenarios of a module share nothing (own loopback servers, cache,
    output folders), so running them side by side keeps every core busy. Each test
    waits for its own scenario: what the scenario asserted fails that test.
    """

    WORKERS = 4

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(self.WORKERS, thread_name_prefix="scenario")
        self._futures: dict[str, Future] = {}

    def start(self, name: str, scenario: Callable[..., Any], tmp: Path, params: dict) -> None:
        self._futures[name] = self._pool.submit(scenario, tmp, **params)

    def result(self, name: str) -> Any:
        return self._futures[name].result()

    def __enter__(self) -> "Scenarios":
        return self

    def __exit__(self, *exc) -> None:
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
