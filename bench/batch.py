"""Batch mode vs online mode on the same samples: verdicts, HTTP requests, tokens and cost.

Two runs of the real ``lm_eval`` CLI judge the same N GSM8K samples (task ``gsm8k_gpt4em``,
``--model mathjudge-replay``), each with an empty judge cache:

* ``online``: a loopback ``ChatCompletionsServer`` (every call waits ``--latency`` s);
* ``batch``: ``judge_mode=batch`` against a loopback ``OpenAIBatchServer`` (Files + Batches
  API; the job finishes after a few polls, ``judge_batch_poll_seconds`` = ``--poll``).

Both judges grade with the same rule (the gold answer as a number in the last line), so the
verdicts must be identical. The generations are written by this script: for each of the first
N test docs, the reference solution's steps followed by "The answer is X.", where X is the gold
answer except for every fourth doc (gold + 1), so about 75% are correct.

Figures: verdicts equal (count), HTTP requests each run sent to its judge (preflight included),
tokens recorded (``usage`` online, ``batch_usage`` in batch mode) and the cost of each run
from the price table (``lm_eval_mathjudge.cost.prices`` when this branch has it; otherwise a local
price pair, marked as such in the output). Token counts come from the loopback server (words),
so the cost ratio is what matters, not the dollar amounts. The batch run's wall time says
nothing about a real batch (hours); it is printed only to show the loopback job finished.

    python bench/batch.py --n 200 --out /tmp/bench-batch
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from _common import (REPO, add_common_arguments, base_env, finish, gold_of, judge_run_stats, last_line_has,
                     metric_of, read_jsonl, read_samples, run_replay)

from tests.loopback import ChatCompletionsServer  # noqa: E402  (the repo root is on sys.path via _common)
from tests.loopback.openai_batch_server import OpenAIBatchServer  # noqa: E402

TASK = "gsm8k_gpt4em"
MODEL = "gpt-4-turbo-2024-04-09"  # the exact-match judge's default
# Used only when lm_eval_mathjudge.cost.prices is not on this branch: OpenAI list prices, USD per 1M tokens,
# (input, output); the Batch API is half of each.
LOCAL_PRICES = {"online": (10.0, 30.0), "batch": (5.0, 15.0)}
_CALC = re.compile(r"<<[^>]*>>")


@dataclass
class RunRow:
    """One lm_eval run as summary.json records it."""
    name: str
    exit_code: int
    wall_s: float
    log: str


def write_generations(data_dir: Path, n: int, path: Path) -> None:
    rows = list(read_jsonl(data_dir / "gsm8k" / "test.jsonl"))[:n]
    with open(path, "w", encoding="utf-8") as fh:
        for i, row in enumerate(rows):
            steps, gold = row["answer"].split("####")
            gold = gold.strip().replace(",", "")
            answer = str(int(gold) + 1) if i % 4 == 3 else gold
            response = f"{_CALC.sub('', steps).strip()}\nThe answer is {answer}."
            fh.write(json.dumps({"doc_id": i, "question": row["question"], "response": response}) + "\n")


def grade(body: dict) -> str:
    prompt = body["messages"][-1]["content"]
    reference = prompt.split("### Reference solution", 1)[1].split("### Student's solution", 1)[0]
    student = prompt.split("### Student's solution", 1)[1].split("### How to grade", 1)[0]
    gold = gold_of(reference)
    same, last = last_line_has(gold, student)
    return (f"Error Analysis: the student's last line is '{last}' and the reference answer is {gold}.\n"
            f"Final Verdict: {'Correct' if same else 'Incorrect'}")


def prices() -> tuple[dict[str, tuple[float, float]], str]:
    try:
        from lm_eval_mathjudge.cost import prices as table
    except ImportError:
        return LOCAL_PRICES, "local price pair (lm_eval_mathjudge.cost.prices is not on this branch)"
    row = table.TABLE[MODEL]
    return {"online": row.rates(False), "batch": row.rates(True)}, f"lm_eval_mathjudge.cost.prices ({row.source})"


def usd(usage: dict, rate: tuple[float, float]) -> float:
    return (usage.get("prompt_tokens", 0) * rate[0] + usage.get("completion_tokens", 0) * rate[1]) / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_arguments(parser, n=200, latency=0.2, out=Path("/tmp/bench-batch"))
    parser.add_argument("--poll", type=float, default=0.2, help="judge_batch_poll_seconds")
    args = parser.parse_args()
    args.data_dir, args.out = args.data_dir.resolve(), args.out.resolve()
    if not (args.data_dir / "gsm8k" / "test.jsonl").is_file():
        parser.error(f"{args.data_dir}/gsm8k/test.jsonl is missing (see --data-dir)")
    args.out.mkdir(parents=True, exist_ok=True)
    replay = args.out / "generations.jsonl"
    write_generations(args.data_dir, args.n, replay)

    def env(name: str) -> dict:
        return base_env(args.data_dir, args.out / f"cache-{name}", {"OPENAI_API_KEY": "dummy"},
                        ("MATHJUDGE_", "OPENAI_", "AZURE_OPENAI_"))

    def meta(url: str, **extra) -> list[str]:
        return ["--metadata", json.dumps({"judge_base_url": url, "judge_concurrency": args.concurrency, **extra})]

    runs, problems, figures = [], [], {}
    for name, server in (("online", ChatCompletionsServer(grade, latency=args.latency)),
                         ("batch", OpenAIBatchServer(grade, latency=args.latency))):
        with server:
            extra = meta(server.url) if name == "online" else meta(server.url, judge_mode="batch",
                                                                   judge_batch_poll_seconds=args.poll)
            run = run_replay(name, TASK, replay, args.n, args.out, env(name), extra, args.timeout)
            runs.append(RunRow(name, run.exit_code, round(run.wall_s, 2), str(run.log)))
            if run.exit_code:
                problems.append(f"{name}: lm_eval exited with {run.exit_code} (see {run.log})")
                continue
            results = __import__("_common").read_results(run.run_dir)
            stats = judge_run_stats(results, TASK)
            figures[name] = {
                "http_requests": len(server.requests),
                "chat_calls": server.call_count,
                "batches_created": getattr(server, "batches_created", 0),
                "files_left": len(getattr(server, "files", {})),
                "wall_s": round(run.wall_s, 1),
                "accuracy": metric_of(results, TASK, "gpt4_exact_match"),
                "judge_failed": metric_of(results, TASK, "judge_failed"),
                "usage": stats.get("batch_usage") if name == "batch" else stats.get("usage"),
                "verdicts": {s["doc_id"]: json.loads(s["filtered_resps"][0])["verdict"]["correct"]
                             for s in read_samples(run.run_dir, TASK)},
            }
    if len(figures) == 2:
        report(figures, problems, args)
    for fig in figures.values():
        fig.pop("verdicts", None)
    return finish(args, runs, problems, {"poll_s": args.poll, "model": MODEL}, figures=figures)


def report(figures: dict, problems: list[str], args: argparse.Namespace) -> None:
    online, batch = figures["online"], figures["batch"]
    same = sum(online["verdicts"][d] == batch["verdicts"].get(d) for d in online["verdicts"])
    rates, source = prices()
    cost = {name: usd(figures[name]["usage"] or {}, rates[name]) for name in ("online", "batch")}
    figures["comparison"] = {"same_verdicts": same, "samples": args.n, "cost_usd": cost,
                             "cost_ratio": cost["batch"] / cost["online"] if cost["online"] else None,
                             "prices": {"source": source, **{k: list(v) for k, v in rates.items()}}}
    if same != args.n or len(online["verdicts"]) != args.n:
        problems.append(f"only {same} of {args.n} verdicts are the same in both modes")
    if online["usage"] != batch["usage"]:
        problems.append(f"token usage differs: online {online['usage']}, batch {batch['usage']}")
    print(f"\n{args.n} GSM8K samples, judge {MODEL}; prices: {source}")
    print(f"{'mode':8} {'HTTP req':>8} {'chat':>5} {'jobs':>4} {'accuracy':>8} {'prompt tok':>10} "
          f"{'compl tok':>9} {'USD':>8} {'wall s':>7}")
    for name in ("online", "batch"):
        f = figures[name]
        u = f["usage"] or {}
        print(f"{name:8} {f['http_requests']:>8} {f['chat_calls']:>5} {f['batches_created']:>4} "
              f"{f['accuracy']:>8.3f} {u.get('prompt_tokens', 0):>10} {u.get('completion_tokens', 0):>9} "
              f"{cost[name]:>8.4f} {f['wall_s']:>7}")
    ratio = figures["comparison"]["cost_ratio"]
    print(f"same verdicts: {same} of {args.n}; batch/online cost: {ratio:.3f}" if ratio is not None else "")


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "bench"))
    sys.exit(main())
