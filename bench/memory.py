"""Memory per sample: peak RSS of a judged GSM8K run against lm-eval's built-in gsm8k, at two sizes.

The data are synthetic GSM8K docs made from ``<data-dir>/gsm8k/test.jsonl``: the
1,319 problems repeated, each copy's question suffixed ``(copy k)`` so that every
doc is distinct (its own prompt, its own judge cache key); the replayed
response of a doc is the data set's worked solution with its final answer
written as ``\\boxed{...}``. Every run is the real ``lm_eval`` CLI with
``--model mathjudge-replay --limit N --log_samples``:

  builtin       lm-eval's gsm8k.yaml on the same local file (see bench/warm_rerun.py)
  plugin-cold   gsm8k_gpt4em, empty judge cache, a loopback judge answering at once
  plugin-warm   the same command again: every verdict from the cache

each at ``--small`` and ``--large`` docs. The figure is the peak resident memory of
the lm_eval process (``ru_maxrss`` from ``os.wait4``) and its growth per sample
between the two sizes, which cancels what every run pays whatever its size
(Python, torch, datasets, the task index).

    python bench/memory.py [--small 2000] [--large 10000] [--out bench/out/memory]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

from _common import REPO, base_env, finish, read_jsonl
from _rusage import replay_measured
from tests.loopback import ChatCompletionsServer
from warm_rerun import BUILTIN_TASK, ENV_STRIP, PLUGIN_TASK, builtin_task_dir

_CALCULATOR = re.compile(r"<<[^<>]*>>")


def verdict(body: dict) -> str:
    return "Error Analysis: the boxed answer is the reference's.\nFinal Verdict: Correct"


def synthetic_data(source: Path, n: int, folder: Path) -> tuple[Path, Path]:
    """(a MATHJUDGE_DATA_DIR with n distinct GSM8K docs, a replay file answering each of them)."""
    rows = list(read_jsonl(source))
    (folder / "gsm8k").mkdir(parents=True, exist_ok=True)
    replay = folder / "replay.jsonl"
    with open(folder / "gsm8k" / "test.jsonl", "w", encoding="utf-8") as docs, \
            open(replay, "w", encoding="utf-8") as answers:
        for i in range(n):
            row, copy = rows[i % len(rows)], i // len(rows)
            question = row["question"] if copy == 0 else f"{row['question']} (copy {copy})"
            steps, _, gold = row["answer"].rpartition("####")
            docs.write(json.dumps({"question": question, "answer": row["answer"]}) + "\n")
            response = f"{_CALCULATOR.sub('', steps).strip()}\nSo the answer is \\boxed{{{gold.strip()}}}."
            answers.write(json.dumps({"question": question, "response": response}) + "\n")
    return folder, replay


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=2000)
    parser.add_argument("--large", type=int, default=10000)
    parser.add_argument("--concurrency", type=int, default=32, help="the plugin's judge concurrency")
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "memory")
    parser.add_argument("--timeout", type=float, default=3600)
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="mj-memory-"))
    problems: list[str] = []
    rows: dict[str, dict[int, dict]] = {}
    try:
        data_dir, replay = synthetic_data(args.data_dir / "gsm8k" / "test.jsonl", args.large, tmp / "data")
        include = builtin_task_dir(tmp / "builtin", data_dir)
        with ChatCompletionsServer(verdict) as judge:
            for n in (args.small, args.large):
                cache = tmp / f"cache-{n}"
                env = base_env(data_dir, cache, {"OPENAI_API_KEY": "dummy"}, ENV_STRIP)
                plugin = ["--metadata", json.dumps({"judge_base_url": judge.url,
                                                    "judge_concurrency": args.concurrency})]
                for name, task, extra in (("builtin", BUILTIN_TASK, ["--include_path", str(include)]),
                                          ("plugin-cold", PLUGIN_TASK, plugin), ("plugin-warm", PLUGIN_TASK, plugin)):
                    done = replay_measured(f"{name}-{n}", task, replay, n, args.out, env, extra, args.timeout)
                    if done.exit_code != 0:
                        problems.append(f"{name} at {n} exited {done.exit_code} (see {done.log})")
                    rows.setdefault(name, {})[n] = {"max_rss_mib": done.max_rss_mib, "cpu_s": done.cpu_s,
                                                    "wall_s": done.wall_s}
                    shutil.rmtree(done.run_dir, ignore_errors=True)  # samples files of 10k docs add up
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report(args, rows, problems)


def report(args, rows, problems) -> int:
    span = args.large - args.small
    print(f"\n| run | peak RSS at {args.small} MiB | at {args.large} MiB | growth per sample KiB "
          f"| CPU s at {args.large} |\n|---|---:|---:|---:|---:|")
    figures = {}
    for name, sizes in rows.items():
        small, large = sizes.get(args.small), sizes.get(args.large)
        if not small or not large:
            continue
        per_sample = (large["max_rss_mib"] - small["max_rss_mib"]) * 1024 / span
        figures[name] = {**{str(n): v for n, v in sizes.items()}, "kib_per_sample": per_sample}
        print(f"| {name} | {small['max_rss_mib']:.0f} | {large['max_rss_mib']:.0f} | {per_sample:.1f} | "
              f"{large['cpu_s']:.1f} |")
    args.n, args.latency, args.concurrency = args.large, 0.0, args.concurrency
    return finish(args, [], problems, {"small": args.small, "large": args.large}, memory=figures)


if __name__ == "__main__":
    sys.exit(main())
