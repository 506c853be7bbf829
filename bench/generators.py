"""Benchmark of the GENERATION stage: wall time vs the concurrency limit, and the free rerun.

A loopback OpenAI Images/Videos server (``tests/loopback/openai_media_server.py``)
answers every call after a fixed latency. Two parts:

1. ``sweep`` (in process, through ``OpenAIImageLM.generate_until`` and the real
   ``openai`` SDK): N GSM8K questions, for each concurrency limit C a fresh
   media folder; wall time of the cold run vs the ideal ceil(N/C) x latency,
   peak calls in flight (server side), then the same requests again (must make
   0 calls). One Sora row too: N video jobs of ``--polls`` polls each.
2. ``cli`` (the real ``lm_eval`` CLI, subprocess): ``--model mathjudge-openai-image``
   on ``gsm8k_vlmjudge --limit N`` judged by the loopback Gemini server, cold and
   then warm (same cache): the warm run must make 0 generation and 0 judge calls.

    python bench/generators.py [--n 32] [--latency 0.5] [--concurrency 1,2,4,8,16] [--out bench/out/gen]

Exit status 1 when a rerun made a call, or a cold run exceeded its bound.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, base_env, lm_eval_exe, machine, now, read_jsonl, read_results  # noqa: E402

from tests import media_fixtures as fx  # noqa: E402
from tests.loopback import GeminiServer  # noqa: E402
from tests.loopback.openai_media_server import OpenAIMediaServer  # noqa: E402

PNG, MP4 = fx.png(width=64, height=64), fx.mp4(payload_bytes=64 * 1024)
KEY = "sk-bench-not-a-real-key"


class Req:
    def __init__(self, question: str, doc_id: int):
        self.doc, self.doc_id, self.task_name, self.args = {"mj_question": question}, doc_id, "gsm8k_vlmjudge", ("", {})


def _timed(lm, requests) -> tuple[float, list[str]]:
    start = time.perf_counter()
    answers = lm.generate_until(requests, disable_tqdm=True)
    return time.perf_counter() - start, answers


def sweep(questions: list[str], args: argparse.Namespace) -> tuple[list[dict], list[str]]:
    from lm_eval_mathjudge.generators.openai_image import OpenAIImageLM
    from lm_eval_mathjudge.generators.sora import SoraLM

    rows, problems = [], []
    requests = [Req(q, i) for i, q in enumerate(questions)]
    with OpenAIMediaServer(image_responder=lambda body: PNG, video_responder=lambda form: MP4,
                           latency=args.latency, polls=args.polls) as server:
        os.environ.update({"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": server.url})
        for c in args.concurrency:
            with tempfile.TemporaryDirectory() as media:
                server.reset()
                cold, _ = _timed(OpenAIImageLM(model="gpt-image-1", media_dir=media, num_concurrent=c), requests)
                calls, peak = server.count("images"), server.max_in_flight
                warm, _ = _timed(OpenAIImageLM(model="gpt-image-1", media_dir=media, num_concurrent=c), requests)
                rerun_calls = server.count("images") - calls
            ideal = math.ceil(len(requests) / c) * args.latency
            rows.append({"kind": "image", "concurrency": c, "n": len(requests), "cold_s": round(cold, 3),
                         "ideal_s": round(ideal, 3), "overhead_s": round(cold - ideal, 3), "calls": calls,
                         "peak_in_flight": peak, "rerun_s": round(warm, 3), "rerun_calls": rerun_calls})
            print(json.dumps(rows[-1]), flush=True)
            if rerun_calls:
                problems.append(f"image rerun at concurrency {c} made {rerun_calls} calls")
            if peak > c or cold < ideal:
                problems.append(f"image run at concurrency {c}: peak {peak}, {cold:.2f}s vs ideal {ideal:.2f}s")
        video = requests[:args.video_n]
        with tempfile.TemporaryDirectory() as media:
            server.reset()
            settings = dict(model="sora-2", media_dir=media, num_concurrent=len(video), poll_interval=args.poll_interval)
            cold, _ = _timed(SoraLM(**settings), video)
            calls = {r: server.count(r) for r in ("create", "poll", "download")}
            warm, _ = _timed(SoraLM(**settings), video)
            rerun_calls = sum(server.count(r) for r in calls) - sum(calls.values())
        # create, `polls` status checks (poll_interval apart), download: each one latency
        ideal = (2 + args.polls) * args.latency + (args.polls - 1) * args.poll_interval
        rows.append({"kind": "video", "concurrency": len(video), "n": len(video), "cold_s": round(cold, 3),
                     "ideal_s": round(ideal, 3), "overhead_s": round(cold - ideal, 3), "calls": calls,
                     "peak_in_flight": server.max_in_flight, "rerun_s": round(warm, 3), "rerun_calls": rerun_calls})
        print(json.dumps(rows[-1]), flush=True)
        if rerun_calls:
            problems.append(f"video rerun made {rerun_calls} calls")
    return rows, problems


def _judge(body: dict) -> str:
    return "INTERMEDIATE_CORRECT: 1\nFINAL_CORRECT: 1\nACTION_REFLECTION: 0\nEXPLANATION: The page shows the work."


def cli(args: argparse.Namespace) -> tuple[list[dict], list[str]]:
    rows, problems = [], []
    c = max(args.concurrency)
    cache = Path(tempfile.mkdtemp(prefix="mj-gen-bench-"))
    with OpenAIMediaServer(image_responder=lambda body: PNG, latency=args.latency) as media, \
            GeminiServer(_judge) as judge:
        env = base_env(args.data_dir, cache, {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": media.url,
                                              "GEMINI_API_KEY": "bench-not-a-real-key"},
                       ("MATHJUDGE_", "OPENAI_", "GEMINI_", "GOOGLE_"))
        for name in ("cli-cold", "cli-warm"):
            before = (media.count("images"), judge.generate_calls)
            out = args.out / name
            cmd = [lm_eval_exe(), "--model", "mathjudge-openai-image", "--model_args",
                   f"model=gpt-image-1,num_concurrent={c}", "--tasks", "gsm8k_vlmjudge", "--limit", str(args.n),
                   "--output_path", str(out), "--metadata", json.dumps({"vlm_judge_base_url": judge.url})]
            start = time.perf_counter()
            with open(args.out / f"{name}.log", "w") as log:
                proc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO),
                                      timeout=args.timeout)
            wall = time.perf_counter() - start
            results = read_results(out)
            meta = results.get("configs", {}).get("gsm8k_vlmjudge", {}).get("metadata", {})
            rows.append({"run": name, "exit_code": proc.returncode, "wall_s": round(wall, 2),
                         "generation_calls": media.count("images") - before[0],
                         "judge_calls": judge.generate_calls - before[1],
                         "final_correct": results.get("results", {}).get("gsm8k_vlmjudge", {}).get("final_correct,none"),
                         "generator_run": meta.get("generator", {}).get("run")})
            print(json.dumps(rows[-1]), flush=True)
            if proc.returncode:
                problems.append(f"{name} exited {proc.returncode} (see {args.out / (name + '.log')})")
    if rows[-1]["generation_calls"] or rows[-1]["judge_calls"]:
        problems.append(f"the warm CLI run made calls: {rows[-1]}")
    return rows, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=32, help="GSM8K questions (the first N)")
    parser.add_argument("--latency", type=float, default=0.5, help="server latency per call, seconds")
    parser.add_argument("--concurrency", default="1,2,4,8,16", help="comma-separated num_concurrent values")
    parser.add_argument("--video-n", type=int, default=8, help="video jobs in the Sora row")
    parser.add_argument("--polls", type=int, default=3, help="status checks until a video job completes")
    parser.add_argument("--poll-interval", type=float, default=0.5, help="seconds between status checks")
    parser.add_argument("--data-dir", type=Path, default=REPO / "examples" / "data")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "gen")
    parser.add_argument("--skip-cli", action="store_true", help="only the in-process sweep")
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    args.concurrency = sorted({int(c) for c in args.concurrency.split(",")})
    args.data_dir, args.out = args.data_dir.resolve(), args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    questions = [r["question"] for r in read_jsonl(args.data_dir / "gsm8k" / "test.jsonl")][:args.n]
    if len(questions) < args.n:
        parser.error(f"only {len(questions)} GSM8K questions in {args.data_dir}")
    rows, problems = sweep(questions, args)
    cli_rows, cli_problems = ([], []) if args.skip_cli else cli(args)
    for problem in problems + cli_problems:
        print(f"PROBLEM: {problem}")
    summary = {"date": now(), "machine": machine(), "settings": {k: str(v) for k, v in vars(args).items()},
               "sweep": rows, "cli": cli_rows, "problems": problems + cli_problems}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"summary: {args.out / 'summary.json'}")
    return 1 if problems or cli_problems else 0


if __name__ == "__main__":
    sys.exit(main())
