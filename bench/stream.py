"""Benchmark of judging while the model generates (``judge_stream``) against judging after it.

The real ``lm_eval`` CLI (a subprocess) on the first N ``gsm8k_gpt4em`` docs, with a loopback
OpenAI-compatible model behind ``local-chat-completions`` (``num_concurrent``, ``--apply_chat_template``)
that takes ``G`` s per generation, and a loopback judge that takes ``J`` s per call; both servers live
in this process and record when each request arrived and each reply went out. For every (G, J) the
two runs go side by side (streaming on, then off, ``--repeat`` times), so the ratios hold on a noisy
machine.

Per run: the generation stage (first model request -> last generation sent), the judge tail (last
generation -> last judge reply), the total (process start -> exit), and the ideal: start-up (process
start -> first model request) + max(generation, judging) + one judge call, where judging is
ceil(N / judge_concurrency) x J. Scores of the two runs must agree (exit status 1 otherwise).

    python bench/stream.py [--n 300] [--generation 1,3] [--judge 1] [--concurrency 32] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.e2e import exact_match_judge, question_of, run_env  # noqa: E402
from tests.loopback import ChatCompletionsServer  # noqa: E402

TASK = "gsm8k_gpt4em"


def _gold(data_dir: Path) -> dict[str, str]:
    rows = [json.loads(line) for line in (data_dir / "gsm8k" / "test.jsonl").read_text().splitlines() if line.strip()]
    return {r["question"]: r["answer"].split("####")[-1].strip().replace(",", "") for r in rows}


def one_run(args: argparse.Namespace, gold: dict[str, str], generation: float, judge_s: float, stream: bool,
            work: Path) -> dict:
    def model(body: dict) -> str:
        return f"Adding the amounts step by step.\n\\boxed{{{gold[question_of(body)]}}}"

    cache, out = work / "cache", work / "out"
    with ChatCompletionsServer(model, latency=generation) as lm, \
            ChatCompletionsServer(exact_match_judge, latency=judge_s) as judge:
        meta = {"judge_base_url": judge.url, "judge_concurrency": args.concurrency, "judge_stream": stream}
        argv = [str(Path(sys.executable).with_name("lm_eval")), "--model", "local-chat-completions",
                "--model_args", f"model=loopback-model,base_url={lm.chat_url},num_concurrent={args.concurrency},"
                "max_retries=1", "--apply_chat_template", "--tasks", TASK, "--limit", str(args.n),
                "--output_path", str(out), "--metadata", json.dumps(meta)]
        env = run_env({"MATHJUDGE_DATA_DIR": str(args.data_dir), "MATHJUDGE_CACHE_DIR": str(cache),
                       "OPENAI_API_KEY": "sk-loopback"})
        started = time.time()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=args.timeout)
        ended = time.time()
        model_in = [r.time for r in lm.requests if lm.is_model_call(r.method, r.path)]
        generated, judged = lm.replies_sent, judge.replies_sent
    if proc.returncode != 0:
        raise SystemExit(f"lm_eval failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    results = json.loads(max(out.rglob("results_*.json")).read_text())
    score = {k.split("::")[-1]: v for k, v in results["results"].items()}[TASK]["gpt4_exact_match,none"]
    startup, generation_stage = min(model_in) - started, max(generated) - min(model_in)
    judging = math.ceil(args.n / args.concurrency) * judge_s
    ideal = startup + max(generation_stage, judging) + judge_s
    total = ended - started
    return {"stream": stream, "generation_s": generation, "judge_s": judge_s, "startup": startup,
            "generation": generation_stage, "tail": max(judged) - max(generated), "total": total,
            "ideal": ideal, "to_ideal": total / ideal, "judge_calls": len(judged), "score": score}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--generation", default="1,3", help="seconds per generation, comma-separated")
    parser.add_argument("--judge", default="1", help="seconds per judge call, comma-separated")
    parser.add_argument("--concurrency", type=int, default=32, help="num_concurrent and judge_concurrency")
    parser.add_argument("--repeat", type=int, default=1, help="on/off pairs per setting")
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    args.data_dir = args.data_dir.resolve()
    gold = _gold(args.data_dir)
    rows, ok = [], True
    for generation in (float(x) for x in args.generation.split(",")):
        for judge_s in (float(x) for x in args.judge.split(",")):
            for _ in range(args.repeat):
                pair = []
                for stream in (True, False):
                    with tempfile.TemporaryDirectory(prefix="mathjudge-bench-stream-") as work:
                        pair.append(one_run(args, gold, generation, judge_s, stream, Path(work)))
                ok &= pair[0]["score"] == pair[1]["score"]
                rows.append(pair)
    print(f"N={args.n}, num_concurrent={args.concurrency}, judge_concurrency={args.concurrency}, "
          f"{os.cpu_count()} CPUs")
    print("| generation | judge call | streaming | generation stage | judge tail | total | ideal | total/ideal "
          "| total on/off | score |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for on, off in rows:
        for run in (on, off):
            print(f"| {run['generation_s']:g} s | {run['judge_s']:g} s | {'on' if run['stream'] else 'off'} "
                  f"| {run['generation']:.2f} s | {run['tail']:.2f} s | {run['total']:.2f} s | {run['ideal']:.2f} s "
                  f"| {run['to_ideal']:.2f} | {on['total'] / off['total']:.2f} | {run['score']:.3f} |")
    if not ok:
        print("scores differ between streaming on and off", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
