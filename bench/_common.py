"""Helpers shared by the lm_eval benchmarks in this folder (judge_stage.py, vlm_judge.py).

Each benchmark runs the real ``lm_eval`` CLI as a subprocess on the first N GSM8K
test docs of ``--data-dir``, replaying recorded generations through
``--model mathjudge-replay``, against a loopback judge server living in the
benchmark process. Importing this module also puts the repo root on sys.path,
for ``tests.loopback`` and ``tests.media_fixtures``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

REPLAY_FILE = "gsm8k_outputs/gpt3_175b_verifier_first100.jsonl"
GSM8K_TEST = "gsm8k/test.jsonl"

_GOLD = re.compile(r"Final answer:\s*(?P<gold>\S+)\s*$")


# --------------------------------------------------------------------------- command line
def add_common_arguments(parser: argparse.ArgumentParser, *, n: int, latency: float, out: Path) -> None:
    parser.add_argument("--n", type=int, default=n, help="GSM8K test docs (the first N; at most 100)")
    parser.add_argument("--latency", type=float, default=latency, help="synthetic judge latency per call, seconds")
    parser.add_argument("--concurrency", type=int, default=16, help="the plugin's judge concurrency")
    parser.add_argument("--out", type=Path, default=out, help="results, logs and summary")
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data",
                        help="MATHJUDGE_DATA_DIR (gsm8k/test.jsonl and gsm8k_outputs/)")
    parser.add_argument("--timeout", type=float, default=900, help="per lm_eval run, seconds")


def check_common_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Path:
    """Resolve the paths, check the data files and --n; returns the replay file."""
    args.data_dir = args.data_dir.resolve()
    args.out = args.out.resolve()
    replay = args.data_dir / REPLAY_FILE
    for needed in (args.data_dir / GSM8K_TEST, replay):
        if not needed.is_file():
            parser.error(f"{needed} is missing (see --data-dir)")
    recorded = sum(1 for _ in read_jsonl(replay))
    if not 1 <= args.n <= recorded:
        parser.error(f"--n must be between 1 and {recorded} (the recorded generations)")
    args.out.mkdir(parents=True, exist_ok=True)
    return replay


# --------------------------------------------------------------------------- lm_eval runs
def lm_eval_exe() -> str:
    beside = Path(sys.executable).with_name("lm_eval")
    return str(beside) if beside.exists() else (shutil.which("lm_eval") or "lm_eval")


def base_env(data_dir: Path, cache_dir: Path, credentials: Mapping[str, str],
             strip: tuple[str, ...]) -> dict[str, str]:
    """This environment minus variables starting with ``strip``, plus offline data, cache and ``credentials``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(strip)}
    no_proxy = ",".join(filter(None, [env.get("NO_PROXY", ""), "127.0.0.1,localhost"]))
    env.update({
        **credentials,
        "MATHJUDGE_DATA_DIR": str(data_dir),
        "MATHJUDGE_CACHE_DIR": str(cache_dir),
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "NO_PROXY": no_proxy,
        "no_proxy": no_proxy,
    })
    return env


@dataclass
class Finished:
    """One finished lm_eval subprocess."""
    run_dir: Path  # --output_path
    exit_code: int
    wall_s: float
    log: Path  # its stdout + stderr


def run_replay(name: str, task: str, replay: Path, n: int, out_dir: Path, env: dict[str, str],
               extra: list[str], timeout: float) -> Finished:
    """``lm_eval --model mathjudge-replay`` on the first n docs of task, into out_dir/name (emptied first)."""
    run_dir = out_dir / name
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    cmd = [lm_eval_exe(), "--model", "mathjudge-replay", "--model_args", f"path={replay}",
           "--tasks", task, "--limit", str(n), "--output_path", str(run_dir), "--log_samples", *extra]
    log_path = out_dir / f"{name}.log"
    print(f"[{name}] {' '.join(cmd)}", flush=True)
    start = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO), timeout=timeout)
    return Finished(run_dir, proc.returncode, time.perf_counter() - start, log_path)


def read_results(run_dir: Path) -> dict[str, Any]:
    """The newest results_*.json under run_dir, or {}."""
    files = sorted(glob.glob(str(run_dir / "**" / "results_*.json"), recursive=True))
    if not files:
        return {}
    with open(files[-1], encoding="utf-8") as fh:
        return json.load(fh)


def metric_of(results: Mapping[str, Any], task: str, metric: str) -> float | None:
    return results.get("results", {}).get(task, {}).get(f"{metric},none")


def judge_run_stats(results: Mapping[str, Any], task: str) -> dict[str, Any]:
    """The plugin's own counters for the run (judge.run in the task's metadata), or {}."""
    return (results.get("configs", {}).get(task, {}).get("metadata") or {}).get("judge", {}).get("run") or {}


def read_samples(run_dir: Path, task: str) -> list[dict[str, Any]]:
    """The rows of the newest samples_<task>_*.jsonl under run_dir (--log_samples)."""
    files = sorted(glob.glob(str(run_dir / "**" / f"samples_{task}_*.jsonl"), recursive=True))
    return list(read_jsonl(Path(files[-1]))) if files else []


def read_jsonl(path: Path):
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


# --------------------------------------------------------------------------- synthetic grading
def gold_of(reference: str) -> str:
    """The gold answer from the ``Final answer:`` line the plugin appends to a GSM8K reference."""
    match = _GOLD.search(reference.strip())
    return match["gold"] if match else ""


_FENCE_LINE = re.compile(r"<<<(?:BEGIN|END) ANSWER [A-Z]+>>>$")  # the judge prompt's fence around the answer


def last_line_has(gold: str, response: str) -> tuple[bool, str]:
    """(whether gold appears as a number in the response's last non-empty line, that line shortened)."""
    lines = [ln for ln in response.splitlines() if ln.strip() and not _FENCE_LINE.match(ln)]
    last = lines[-1].replace(",", "").replace("$", "") if lines else ""
    same = bool(gold) and re.search(rf"(?<![\d.]){re.escape(gold)}(?![\d])", last) is not None
    return same, last.strip()[:80] or "nothing"


# --------------------------------------------------------------------------- report
def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def now() -> str:
    return _dt.datetime.now().isoformat(timespec="seconds")


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}


def finish(args: argparse.Namespace, runs: Iterable[Any], problems: list[str], settings: Mapping[str, Any],
           **figures: Any) -> int:
    """Print the problems, write <out>/summary.json; the exit status (1 when a check failed)."""
    for problem in problems:
        print(f"PROBLEM: {problem}")
    summary = {
        "date": now(),
        "machine": machine(),
        "settings": {"n": args.n, "latency_s": args.latency, "concurrency": args.concurrency,
                     "data_dir": str(args.data_dir), **settings},
        "runs": [{k: v for k, v in asdict(r).items() if k != "per_doc"} for r in runs],
        **figures,
        "problems": problems,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"summary: {args.out / 'summary.json'}")
    return 1 if problems else 0
