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
                same prompt (judges.EXACT_MATCH.request), same parser
                (parsing.parse_exact_match), same judge model name and server.

Per run: wall time of the lm_eval subprocess, the judge stage as the server saw
it (first judge request received -> last judge reply sent), judge calls
(server.call_count), peak calls in flight, and gpt4_exact_match from the
results JSON. Plugin and baseline scores must agree (also per doc, from
--log_samples). Exit status 1 when they do not, or when the warm run calls the
judge.

    python bench/judge_stage.py [--n 100] [--latency 0.2] [--concurrency 16] [--out bench/out]

Sweep mode (``--sweep``): the plugin's cold judge stage only, for every (latency, concurrency)
pair, against the limit ceil(N/C) x latency (C calls at a time, each taking the latency), at
N up to the whole GSM8K test set. Beyond the 100 recorded generations the replayed response of
a doc is its reference solution (the synthetic judge grades it Correct), so N=1000 needs no
model; the judge prompt has the same shape and size.

    python bench/judge_stage.py --sweep --n 1000 --latencies 0.2,1 --concurrencies 16,32,64
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from _common import (REPO, add_common_arguments, base_env, check_common_arguments, finish, fmt as _fmt,
                     gold_of, judge_run_stats, last_line_has, metric_of, now, read_jsonl, read_results,
                     read_samples, run_replay)
from tests.loopback import ChatCompletionsServer

PLUGIN_TASK = "gsm8k_gpt4em"
BASELINE_TASK = "gsm8k_gpt4em_serial_baseline"
METRIC = "gpt4_exact_match"
ENV_STRIP = ("MATHJUDGE_", "OPENAI_", "AZURE_OPENAI_")  # inherited variables removed from every run

# --------------------------------------------------------------------------- judge server
_SECTION = re.compile(r"### Reference solution\n(?P<reference>.*?)\n\n"
                      r"### Student's solution\n(?P<response>.*?)\n\n### How to grade",
                      re.S)


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
        gold = gold_of(match["reference"])
        same, said = last_line_has(gold, match["response"])
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

from lm_eval_mathjudge.core import data_sets, docs as data
from lm_eval_mathjudge.settings.models import DEFAULT_EXACT_MATCH_MODEL
from lm_eval_mathjudge.core.judges import EXACT_MATCH
from lm_eval_mathjudge.core.errors import UnparseableReply
from lm_eval_mathjudge.core.parsing import parse_exact_match

_client = None


def load_docs(**_kwargs):
    """The same local GSM8K file and loader as the plugin (MATHJUDGE_DATA_DIR)."""
    return data.load_local(os.environ["MATHJUDGE_DATA_DIR"], "gsm8k", "test")


process_docs = data_sets.get("gsm8k").process_docs  # the plugin's own (its data-set registry entry)


def process_results(doc, results):
    global _client
    if _client is None:
        _client = OpenAI()
    response = results[0]
    if isinstance(response, (list, tuple)):
        response = response[0] if response else ""
    prompt = EXACT_MATCH.request(doc, response).prompt
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
    """One of the plugin's task YAMLs with its ``include:`` files merged in, as lm-eval does (own keys win)."""
    with open(REPO / "task_configs" / name, encoding="utf-8") as fh:
        config = yaml.load(fh, Loader=_TagTolerantLoader)  # noqa: S506 -- SafeLoader subclass
    included = config.pop("include", None) or []
    merged: dict = {}
    for base in [included] if isinstance(included, str) else included:
        merged.update(_plugin_yaml(base))
    return {**merged, **config}


def write_baseline_task(folder: Path) -> None:
    """The baseline YAML: the plugin task's prompt, target and generation settings, minus its class."""
    from lm_eval_mathjudge.core import data_sets

    judge_base, gsm8k = _plugin_yaml("_judge_gpt4em.yaml"), data_sets.get("gsm8k")
    config = {
        "task": BASELINE_TASK,
        "test_split": gsm8k.split,
        "output_type": judge_base["output_type"],
        "num_fewshot": judge_base["num_fewshot"],
        "doc_to_text": judge_base["doc_to_text"],
        "doc_to_target": judge_base["doc_to_target"],
        "generation_kwargs": {**judge_base["generation_kwargs"], "max_gen_toks": gsm8k.max_gen_toks},
        "metric_list": [{"metric": METRIC, "aggregation": "mean", "higher_is_better": True}],
        "metadata": {"version": 1.0},
    }
    text = yaml.safe_dump(config, sort_keys=False, allow_unicode=True, width=10_000)
    text += ("custom_dataset: !function baseline_judge.load_docs\n"
             "process_docs: !function baseline_judge.process_docs\n"
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


def run_lm_eval(name: str, task: str, args: argparse.Namespace, server: ChatCompletionsServer,
                responder: VerdictResponder, env: dict[str, str], out_dir: Path,
                extra: list[str]) -> RunResult:
    server.reset()
    responder.reset()
    run = run_replay(name, task, args.replay, args.n, out_dir, env, extra, args.timeout)
    wall = run.wall_s

    arrivals = sorted(r.time for r in server.requests if r.method == "POST" and "chat/completions" in r.path)
    replies = sorted(responder.reply_times)
    stage = (replies[-1] - arrivals[0]) if arrivals and replies else None
    span = (arrivals[-1] - arrivals[0]) if arrivals else None
    results = read_results(run.run_dir)
    result = RunResult(name=name, task=task, exit_code=run.exit_code, wall_s=wall,
                       judge_calls=server.call_count, judge_stage_s=stage, request_span_s=span,
                       max_in_flight=server.max_in_flight, score=metric_of(results, task, METRIC),
                       plugin_judge_calls=judge_run_stats(results, task).get("judge_calls"),
                       per_doc={int(row["doc_id"]): float(row[METRIC]) for row in read_samples(run.run_dir, task)},
                       log=str(run.log))
    status = "ok" if run.exit_code == 0 else f"FAILED (exit {run.exit_code}, see {run.log})"
    print(f"[{name}] {status}: wall {wall:.2f}s, judge calls {result.judge_calls}, "
          f"judge stage {_fmt(stage)}s, {METRIC} {result.score}", flush=True)
    return result


def _recorded_labels(replay: Path, n: int) -> dict[int, bool]:
    labels = {}
    for row in read_jsonl(replay):
        if isinstance(row.get("is_correct"), bool) and row.get("doc_id") is not None and int(row["doc_id"]) < n:
            labels[int(row["doc_id"])] = row["is_correct"]
    return labels


# --------------------------------------------------------------------------- report
def markdown_table(runs: list[RunResult]) -> str:
    rows = ["| run | lm_eval wall (s) | judge stage (s) | judge calls | peak in flight | gpt4_exact_match |",
            "|---|---:|---:|---:|---:|---:|"]
    for r in runs:
        rows.append(f"| {r.name} | {r.wall_s:.2f} | {_fmt(r.judge_stage_s)} | {r.judge_calls} | "
                    f"{r.max_in_flight} | {_fmt(r.score, 4)} |")
    return "\n".join(rows)


def _sweep_data(args: argparse.Namespace, folder: Path) -> Path:
    """A data dir with the first N GSM8K test docs, and a replay file answering each of them."""
    docs = list(read_jsonl(args.data_dir / "gsm8k" / "test.jsonl"))[:args.n]
    if len(docs) < args.n:
        raise SystemExit(f"--n {args.n}: {args.data_dir}/gsm8k/test.jsonl has only {len(docs)} docs")
    (folder / "gsm8k").mkdir(parents=True)
    with open(folder / "gsm8k" / "test.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in docs)
    recorded = {int(r["doc_id"]): r for r in read_jsonl(args.data_dir / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl")}
    with open(folder / "replay.jsonl", "w", encoding="utf-8") as fh:
        for i, doc in enumerate(docs):
            solution, gold = doc["answer"].rsplit("####", 1)
            response = recorded[i]["response"] if i in recorded else f"{solution.strip()}\nThe answer is {gold.strip()}."
            fh.write(json.dumps({"doc_id": i, "question": doc["question"], "response": response}) + "\n")
    return folder / "replay.jsonl"


def sweep(args: argparse.Namespace) -> int:
    args.data_dir, args.out = args.data_dir.resolve(), args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    latencies = [float(x) for x in args.latencies.split(",")]
    concurrencies = [int(x) for x in args.concurrencies.split(",")]
    responder = VerdictResponder()
    rows, problems = [], []
    with tempfile.TemporaryDirectory(prefix="mathjudge-bench-") as tmp:
        tmp = Path(tmp)
        replay = _sweep_data(args, tmp / "data")
        for latency in latencies:
            with ChatCompletionsServer(responder=responder, latency=latency) as server:
                for concurrency in concurrencies:
                    cache_dir = tmp / f"cache-{latency}-{concurrency}"
                    cache_dir.mkdir()
                    env = base_env(tmp / "data", cache_dir, {"OPENAI_API_KEY": "dummy"}, ENV_STRIP)
                    metadata = ["--metadata", json.dumps({"judge_base_url": server.url,
                                                           "judge_concurrency": concurrency})]
                    server.reset()
                    responder.reset()
                    name = f"sweep-L{latency:g}-C{concurrency}"
                    run = run_replay(name, PLUGIN_TASK, replay, args.n, args.out, env, metadata, args.timeout)
                    arrivals = sorted(r.time for r in server.requests if r.method == "POST")
                    replies = sorted(responder.reply_times)
                    stage = replies[-1] - arrivals[0] if arrivals and replies else None
                    limit = math.ceil(args.n / concurrency) * latency
                    row = {"latency_s": latency, "concurrency": concurrency, "n": args.n,
                           "judge_stage_s": stage, "limit_s": limit,
                           "ratio": stage / limit if stage else None, "judge_calls": server.call_count,
                           "peak_in_flight": server.max_in_flight, "wall_s": run.wall_s, "exit": run.exit_code}
                    rows.append(row)
                    print(f"[{name}] exit {run.exit_code}: judge stage {_fmt(stage)}s, limit {limit:.2f}s, "
                          f"ratio {_fmt(row['ratio'], 3)}, calls {server.call_count}, peak {server.max_in_flight}",
                          flush=True)
                    if run.exit_code != 0 or server.call_count != args.n:
                        problems.append(f"{name}: exit {run.exit_code}, {server.call_count} calls (log {run.log})")
    table = ["| latency (s) | concurrency | judge stage (s) | limit ceil(N/C) x latency (s) | ratio | peak in flight |",
             "|---:|---:|---:|---:|---:|---:|"]
    table += [f"| {r['latency_s']:g} | {r['concurrency']} | {_fmt(r['judge_stage_s'])} | {r['limit_s']:.2f} | "
              f"{_fmt(r['ratio'], 3)} | {r['peak_in_flight']} |" for r in rows]
    print(f"\nN={args.n}, plugin cold judge stage, {os.cpu_count()} CPUs, {now()}, load {os.getloadavg()[0]:.1f}\n")
    print("\n".join(table))
    for problem in problems:
        print(f"PROBLEM: {problem}")
    (args.out / "sweep.json").write_text(json.dumps({"date": now(), "rows": rows, "problems": problems,
                                                     "table_markdown": "\n".join(table)}, indent=2) + "\n")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser, n=100, latency=0.2, out=REPO / "bench" / "out")
    parser.add_argument("--sweep", action="store_true", help="plugin cold runs only, vs the limit (see above)")
    parser.add_argument("--latencies", default="0.2,1", help="sweep: judge latencies, seconds")
    parser.add_argument("--concurrencies", default="16,32,64", help="sweep: judge_concurrency values")
    args = parser.parse_args(argv)
    if args.sweep:
        return sweep(args)
    replay = args.replay = check_common_arguments(parser, args)

    responder = VerdictResponder()
    with tempfile.TemporaryDirectory(prefix="mathjudge-bench-") as tmp, \
            ChatCompletionsServer(responder=responder, latency=args.latency) as server:
        tmp = Path(tmp)
        cache_dir, task_dir = tmp / "judge_cache", tmp / "baseline_task"
        cache_dir.mkdir()
        task_dir.mkdir()
        write_baseline_task(task_dir)
        env = base_env(args.data_dir, cache_dir, {"OPENAI_API_KEY": "dummy"}, ENV_STRIP)
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
          f"{args.concurrency}, {os.cpu_count()} CPUs, {now()}")
    print()
    print(table)
    print()
    print(f"judge stage, baseline / plugin-cold: {_fmt(stage_ratio, 1)}x   "
          f"(lm_eval wall, baseline / plugin-cold: {_fmt(wall_ratio, 2)}x)")
    print(f"scores agree (total and per doc, all three runs): {'yes' if not problems else 'NO'}")
    print(f"synthetic judge vs the replay file's is_correct labels: {label_agree}/{len(labels)} docs agree")
    return finish(args, runs, problems, {},
                  judge_stage_ratio_baseline_over_plugin=stage_ratio, wall_ratio_baseline_over_plugin=wall_ratio,
                  synthetic_judge_agrees_with_recorded_is_correct=f"{label_agree}/{len(labels)}",
                  table_markdown=table)

if __name__ == "__main__":
    sys.exit(main())
