"""Benchmark of the JUDGE STAGE of an lm-eval run: this plugin vs a PISA-style task.

Three runs of the real ``lm_eval`` CLI (subprocesses) on the first N GSM8K test
docs, replaying recorded generations (``--model mathjudge-replay``), all judged
by one loopback OpenAI-compatible server (``tests/loopback``) that lives in
this process and answers every call after a fixed synthetic latency:

  plugin-cold   task gsm8k_gpt4em, empty judge cache (MATHJUDGE_CACHE_DIR = fresh temp dir)
  plugin-warm   the same command again, same cache dir: must make 0 judge calls
  baseline      a task written to a temp folder (--include_path) whose
                ``process_results: !function`` makes one synchronous openai call
                per doc, as lm-eval's built-in PISA ``*_llm_judged`` tasks do;
                same prompt (prompts.load("exact_match")), same parser
                (parsing.parse_exact_match), same judge model name and server.

Per run: wall time of the lm_eval subprocess, the judge stage as the server saw
it (first judge request received -> last judge reply sent), judge calls
(server.call_count), peak calls in flight, and gpt4_exact_match from the
results JSON. Plugin and baseline scores must agree (also per doc, from
--log_samples). Exit status 1 when they do not, or when the warm run calls the
judge.

    python bench/judge_stage.py [--n 100] [--latency 0.2] [--concurrency 16] [--out bench/out]
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
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.loopback

from tests.loopback import ChatCompletionsServer  # noqa: E402

PLUGIN_TASK = "gsm8k_gpt4em"
BASELINE_TASK = "gsm8k_gpt4em_serial_baseline"
METRIC = "gpt4_exact_match"
REPLAY_FILE = "gsm8k_outputs/gpt3_175b_verifier_first100.jsonl"

# --------------------------------------------------------------------------- judge server
_SECTION = re.compile(r"### Reference solution\n(?P<reference>.*?)\n\n### Student's solution\n(?P<response>.*?)\n\n### How to grade",
                      re.S)
_GOLD = re.compile(r"Final answer:\s*(?P<gold>\S+)\s*$")


class VerdictResponder:
    """A deterministic stand-in for GPT-4: Correct iff the gold answer is in the response's last line.

    Also records when each reply leaves (it runs after the server's latency sleep).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reply_times: list[float] = []

    def reset(self) -> None:
        with self._lock:
            self.reply_times = []

    def __call__(self, body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        if not isinstance(prompt, str):
            prompt = " ".join(p.get("text", "") for p in prompt if isinstance(p, dict))
        verdict, analysis = self._grade(prompt)
        with self._lock:
            self.reply_times.append(time.time())
        return f"Error Analysis: {analysis}\nFinal Verdict: {verdict}"

    @staticmethod
    def _grade(prompt: str) -> tuple[str, str]:
        match = _SECTION.search(prompt)
        if not match:
            return "Incorrect", "The prompt has no reference/student sections, so nothing can be compared."
        gold_match = _GOLD.search(match["reference"].strip())
        gold = gold_match["gold"] if gold_match else ""
        lines = [ln for ln in match["response"].splitlines() if ln.strip()]
        last = lines[-1].replace(",", "").replace("$", "") if lines else ""
        same = bool(gold) and re.search(rf"(?<![\d.]){re.escape(gold)}(?![\d])", last) is not None
        said = last.strip()[:80] or "nothing"
        return ("Correct" if same else "Incorrect",
                f"The student's final line is '{said}' and the reference answer is {gold or '?'}; "
                f"they are {'the same' if same else 'not the same'}.")


# --------------------------------------------------------------------------- baseline task
BASELINE_PY = '''\
"""PISA-style judging: one synchronous, uncached OpenAI call per doc, from process_results.

Written by bench/judge_stage.py. Same prompt, parser and judge model as the
plugin's gsm8k_gpt4em; the SDK reads OPENAI_API_KEY and OPENAI_BASE_URL.
One client is reused for all docs (PISA even builds a new one per call).
"""
import os

from openai import OpenAI

from lm_eval_mathjudge import data, prompts
from lm_eval_mathjudge.config import DEFAULT_EXACT_MATCH_MODEL
from lm_eval_mathjudge.errors import UnparseableReply
from lm_eval_mathjudge.parsing import parse_exact_match

_client = None


def load_docs(**_kwargs):
    """The same local GSM8K file and loader as the plugin (MATHJUDGE_DATA_DIR)."""
    return data.load_local(os.environ["MATHJUDGE_DATA_DIR"], "gsm8k", "test")


def process_results(doc, results):
    global _client
    if _client is None:
        _client = OpenAI()
    response = results[0]
    if isinstance(response, (list, tuple)):
        response = response[0] if response else ""
    prompt = prompts.load("exact_match").render(
        question=doc["mj_question"], reference=doc["mj_reference"], response=response)
    reply = _client.chat.completions.create(
        model=DEFAULT_EXACT_MATCH_MODEL, messages=[{"role": "user", "content": prompt}],
        temperature=0.0, max_tokens=1024)
    try:
        correct = parse_exact_match(reply.choices[0].message.content or "").correct
    except UnparseableReply:
        correct = False
    return {"gpt4_exact_match": float(correct)}
'''


class _TagTolerantLoader(yaml.SafeLoader):
    """Reads the plugin's YAMLs without resolving their !function tags."""


_TagTolerantLoader.add_constructor("!function", lambda loader, node: {"!function": loader.construct_scalar(node)})


def _plugin_yaml(name: str) -> dict:
    with open(REPO / "task_configs" / name, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=_TagTolerantLoader)  # noqa: S506 -- SafeLoader subclass


def write_baseline_task(folder: Path) -> None:
    """The baseline YAML: the plugin task's prompt, target and generation settings, minus its class."""
    judge_base, data_base = _plugin_yaml("_judge_gpt4em.yaml"), _plugin_yaml("_data_gsm8k.yaml")
    config = {
        "task": BASELINE_TASK,
        "test_split": data_base["test_split"],
        "output_type": judge_base["output_type"],
        "num_fewshot": judge_base["num_fewshot"],
        "doc_to_text": judge_base["doc_to_text"],
        "doc_to_target": judge_base["doc_to_target"],
        "generation_kwargs": data_base["generation_kwargs"],
        "metric_list": [{"metric": METRIC, "aggregation": "mean", "higher_is_better": True}],
        "metadata": {"version": 1.0},
    }
    text = yaml.safe_dump(config, sort_keys=False, allow_unicode=True, width=10_000)
    text += ("custom_dataset: !function baseline_judge.load_docs\n"
             "process_docs: !function lm_eval_mathjudge.data.gsm8k\n"
             "process_results: !function baseline_judge.process_results\n")
    (folder / f"{BASELINE_TASK}.yaml").write_text(text, encoding="utf-8")
    (folder / "baseline_judge.py").write_text(BASELINE_PY, encoding="utf-8")


# --------------------------------------------------------------------------- runs
@dataclass
class RunResult:
    name: str
    task: str
    exit_code: int
    wall_s: float
    judge_calls: int
    judge_stage_s: float | None  # first judge request received -> last judge reply sent
    request_span_s: float | None  # first -> last judge request received
    max_in_flight: int
    score: float | None
    plugin_judge_calls: int | None = None  # the plugin's own count, from the results metadata
    per_doc: dict[int, float] = field(default_factory=dict, repr=False)
    log: str = ""


def lm_eval_exe() -> str:
    beside = Path(sys.executable).with_name("lm_eval")
    return str(beside) if beside.exists() else (shutil.which("lm_eval") or "lm_eval")


def base_env(data_dir: Path, cache_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MATHJUDGE_", "OPENAI_", "AZURE_OPENAI_"))}
    no_proxy = ",".join(filter(None, [env.get("NO_PROXY", ""), "127.0.0.1,localhost"]))
    env.update({
        "OPENAI_API_KEY": "dummy",
        "MATHJUDGE_DATA_DIR": str(data_dir),
        "MATHJUDGE_CACHE_DIR": str(cache_dir),
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "NO_PROXY": no_proxy,
        "no_proxy": no_proxy,
    })
    return env


def run_lm_eval(name: str, task: str, args: argparse.Namespace, server: ChatCompletionsServer,
                responder: VerdictResponder, env: dict[str, str], out_dir: Path,
                extra: list[str]) -> RunResult:
    run_dir = out_dir / name
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    cmd = [lm_eval_exe(), "--model", "mathjudge-replay",
           "--model_args", f"path={args.data_dir / REPLAY_FILE}",
           "--tasks", task, "--limit", str(args.n),
           "--output_path", str(run_dir), "--log_samples", *extra]
    server.reset()
    responder.reset()
    log_path = out_dir / f"{name}.log"
    print(f"[{name}] {' '.join(cmd)}", flush=True)
    start = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO),
                              timeout=args.timeout)
    wall = time.perf_counter() - start

    arrivals = sorted(r.time for r in server.requests if r.method == "POST" and "chat/completions" in r.path)
    replies = sorted(responder.reply_times)
    stage = (replies[-1] - arrivals[0]) if arrivals and replies else None
    span = (arrivals[-1] - arrivals[0]) if arrivals else None
    score, plugin_calls = _read_results(run_dir, task)
    result = RunResult(name=name, task=task, exit_code=proc.returncode, wall_s=wall,
                       judge_calls=server.call_count, judge_stage_s=stage, request_span_s=span,
                       max_in_flight=server.max_in_flight, score=score, plugin_judge_calls=plugin_calls,
                       per_doc=_read_samples(run_dir, task), log=str(log_path))
    status = "ok" if proc.returncode == 0 else f"FAILED (exit {proc.returncode}, see {log_path})"
    print(f"[{name}] {status}: wall {wall:.2f}s, judge calls {result.judge_calls}, "
          f"judge stage {_fmt(stage)}s, {METRIC} {score}", flush=True)
    return result


def _read_results(run_dir: Path, task: str) -> tuple[float | None, int | None]:
    files = sorted(glob.glob(str(run_dir / "**" / "results_*.json"), recursive=True))
    if not files:
        return None, None
    with open(files[-1], encoding="utf-8") as fh:
        results = json.load(fh)
    score = results.get("results", {}).get(task, {}).get(f"{METRIC},none")
    run = (results.get("configs", {}).get(task, {}).get("metadata") or {}).get("judge", {}).get("run") or {}
    return score, run.get("judge_calls")


def _read_samples(run_dir: Path, task: str) -> dict[int, float]:
    files = sorted(glob.glob(str(run_dir / "**" / f"samples_{task}_*.jsonl"), recursive=True))
    per_doc: dict[int, float] = {}
    for path in files[-1:]:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    row = json.loads(line)
                    per_doc[int(row["doc_id"])] = float(row[METRIC])
    return per_doc


def _recorded_labels(replay: Path, n: int) -> dict[int, bool]:
    labels = {}
    with open(replay, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line) if line.strip() else {}
            if isinstance(row.get("is_correct"), bool) and row.get("doc_id") is not None and int(row["doc_id"]) < n:
                labels[int(row["doc_id"])] = row["is_correct"]
    return labels


# --------------------------------------------------------------------------- report
def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def markdown_table(runs: list[RunResult]) -> str:
    rows = ["| run | lm_eval wall (s) | judge stage (s) | judge calls | peak in flight | gpt4_exact_match |",
            "|---|---:|---:|---:|---:|---:|"]
    for r in runs:
        rows.append(f"| {r.name} | {r.wall_s:.2f} | {_fmt(r.judge_stage_s)} | {r.judge_calls} | "
                    f"{r.max_in_flight} | {_fmt(r.score, 4)} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100, help="GSM8K test docs (the first N; at most 100)")
    parser.add_argument("--latency", type=float, default=0.2, help="synthetic judge latency per call, seconds")
    parser.add_argument("--concurrency", type=int, default=16, help="the plugin's judge_concurrency")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out", help="results, logs and summary")
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data",
                        help="MATHJUDGE_DATA_DIR (gsm8k/test.jsonl and gsm8k_outputs/)")
    parser.add_argument("--timeout", type=float, default=900, help="per lm_eval run, seconds")
    args = parser.parse_args(argv)
    args.data_dir = args.data_dir.resolve()
    args.out = args.out.resolve()

    replay = args.data_dir / REPLAY_FILE
    for needed in (args.data_dir / "gsm8k" / "test.jsonl", replay):
        if not needed.is_file():
            parser.error(f"{needed} is missing (see --data-dir)")
    with open(replay, encoding="utf-8") as fh:
        recorded = sum(1 for line in fh if line.strip())
    if not 1 <= args.n <= recorded:
        parser.error(f"--n must be between 1 and {recorded} (the recorded generations)")
    args.out.mkdir(parents=True, exist_ok=True)

    responder = VerdictResponder()
    with tempfile.TemporaryDirectory(prefix="mathjudge-bench-") as tmp, \
            ChatCompletionsServer(responder=responder, latency=args.latency) as server:
        tmp = Path(tmp)
        cache_dir, task_dir = tmp / "judge_cache", tmp / "baseline_task"
        cache_dir.mkdir()
        task_dir.mkdir()
        write_baseline_task(task_dir)
        env = base_env(args.data_dir, cache_dir)
        metadata = ["--metadata", json.dumps({"judge_base_url": server.url, "judge_concurrency": args.concurrency})]
        print(f"judge server {server.url}, latency {args.latency}s; N={args.n}; "
              f"plugin concurrency {args.concurrency}; output {args.out}", flush=True)

        runs = [
            run_lm_eval("plugin-cold", PLUGIN_TASK, args, server, responder, env, args.out, metadata),
            run_lm_eval("plugin-warm", PLUGIN_TASK, args, server, responder, env, args.out, metadata),
            run_lm_eval("baseline", BASELINE_TASK, args, server, responder,
                        {**env, "OPENAI_BASE_URL": server.url}, args.out, ["--include_path", str(task_dir)]),
        ]
    cold, warm, base = runs

    problems = []
    for r in runs:
        if r.exit_code != 0:
            problems.append(f"{r.name} exited with {r.exit_code} (log: {r.log})")
        if r.score is None:
            problems.append(f"{r.name}: no {METRIC} in its results JSON")
    if warm.judge_calls != 0:
        problems.append(f"plugin-warm made {warm.judge_calls} judge calls (expected 0: all cached)")
    if cold.judge_calls != args.n or base.judge_calls != args.n:
        problems.append(f"expected {args.n} judge calls cold and baseline, got {cold.judge_calls} and {base.judge_calls}")
    if cold.plugin_judge_calls is not None and cold.plugin_judge_calls != cold.judge_calls:
        problems.append(f"plugin counted {cold.plugin_judge_calls} calls, server saw {cold.judge_calls}")
    if not (cold.score == warm.score == base.score):
        problems.append(f"{METRIC} differs: cold {cold.score}, warm {warm.score}, baseline {base.score}")
    differing = sorted(d for d in set(cold.per_doc) | set(base.per_doc) | set(warm.per_doc)
                       if not cold.per_doc.get(d) == warm.per_doc.get(d) == base.per_doc.get(d))
    if differing or len(cold.per_doc) != args.n:
        problems.append(f"per-doc scores differ or are missing for doc_id {differing[:10]} "
                        f"({len(cold.per_doc)} plugin samples, {len(base.per_doc)} baseline samples)")

    labels = _recorded_labels(replay, args.n)  # sanity check of the synthetic judge, not a pass condition
    label_agree = sum(1 for d, ok in labels.items() if d in cold.per_doc and cold.per_doc[d] == float(ok))

    stage_ratio = (base.judge_stage_s / cold.judge_stage_s
                   if base.judge_stage_s and cold.judge_stage_s else None)
    wall_ratio = base.wall_s / cold.wall_s if cold.wall_s else None
    table = markdown_table(runs)
    print()
    print(f"N={args.n} docs, judge latency {args.latency}s (loopback, synthetic), plugin concurrency "
          f"{args.concurrency}, {os.cpu_count()} CPUs, {_dt.datetime.now().isoformat(timespec='seconds')}")
    print()
    print(table)
    print()
    print(f"judge stage, baseline / plugin-cold: {_fmt(stage_ratio, 1)}x   "
          f"(lm_eval wall, baseline / plugin-cold: {_fmt(wall_ratio, 2)}x)")
    print(f"scores agree (total and per doc, all three runs): {'yes' if not problems else 'NO'}")
    print(f"synthetic judge vs the replay file's is_correct labels: {label_agree}/{len(labels)} docs agree")
    for problem in problems:
        print(f"PROBLEM: {problem}")

    summary = {
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "settings": {"n": args.n, "latency_s": args.latency, "concurrency": args.concurrency,
                     "data_dir": str(args.data_dir)},
        "runs": [{k: v for k, v in asdict(r).items() if k != "per_doc"} for r in runs],
        "judge_stage_ratio_baseline_over_plugin": stage_ratio,
        "wall_ratio_baseline_over_plugin": wall_ratio,
        "synthetic_judge_agrees_with_recorded_is_correct": f"{label_agree}/{len(labels)}",
        "problems": problems,
        "table_markdown": table,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"summary: {args.out / 'summary.json'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
