"""A judge that answers 429 above R requests per second: total time vs N/R, and the 429 count.

One loopback OpenAI-compatible server (``tests/loopback``, option ``rate_limit``: a 1-s sliding
window over the calls it served; above it, an immediate 429 with ``Retry-After: 1``) answers N
judge requests sent by the plugin's real ``JudgeClient`` through the real ``openai`` SDK
(``OpenAIChatBackend``, no cache), at concurrency C (default 32). Scenarios, run side by side in one
process, each against a fresh server state:

  no limits        judge_rpm unset, the adaptive gate on (the default)
  rpm = 60 R       judge_rpm set exactly at the server's limit
  no limits, fixed judge_rpm unset, judge_adaptive=false (the behaviour before the gate)

Per scenario: total time, time / (N/R), the server's 429 count, the retries the client made, and
samples without a verdict (lost). N/R is the floor: the server serves at most R calls per second.

    python bench/rate_limit.py [--n 100] [--rate 5] [--latency 0.5] [--concurrency 32] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass

from _common import machine, now
from tests.loopback import ChatCompletionsServer

REPLY = "Error Analysis: The student's final answer of 18 matches the reference answer of 18.\nFinal Verdict: Correct"


@dataclass
class Result:
    scenario: str
    n: int
    seconds: float
    ratio: float  # seconds / (n / rate)
    server_429: int
    retries: int
    lost: int
    peak_in_flight: int
    final_gate_cap: int


def _requests(n: int, tag: str):
    from lm_eval_mathjudge.core.types import JudgeRequest

    return [JudgeRequest(prompt=f"[{tag}] Problem {i}: Janet's ducks lay 16 eggs per day. "
                                f"The student says 18. Is it right?") for i in range(n)]


def run(name: str, server: ChatCompletionsServer, args: argparse.Namespace, **settings) -> Result:
    from lm_eval_mathjudge.backends.openai.chat import OpenAIChatBackend
    from lm_eval_mathjudge.judging.client import JudgeClient
    from lm_eval_mathjudge.settings.schema import JudgeSettings
    from lm_eval_mathjudge.core.parsing import parse_exact_match

    server.reset()
    s = JudgeSettings(backend="openai", model="gpt-4-turbo-2024-04-09", base_url=server.url, cache=False,
                      concurrency=args.concurrency, preflight=False, timeout=30.0, **settings)
    backend = OpenAIChatBackend(s)
    client = JudgeClient(backend, parse_exact_match, s, "bench", None, progress=False)
    time.sleep(1.1)  # the server's window from the previous scenario is empty again
    start = time.perf_counter()
    outcomes = client.judge_all(_requests(args.n, f"{name}-{time.time()}"))
    seconds = time.perf_counter() - start
    cap = client._limits.gate.cap
    client.close()
    lost = sum(1 for o in outcomes if o.verdict is None)
    result = Result(name, args.n, seconds, seconds / (args.n / args.rate), server.rate_limited,
                    client.stats.retries, lost, server.max_in_flight, cap)
    print(f"[{name}] {seconds:.2f}s = {result.ratio:.3f} x N/R, 429s {result.server_429}, "
          f"retries {result.retries}, lost {lost}, peak in flight {result.peak_in_flight}", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--rate", type=float, default=5.0, help="R: calls the server serves per second")
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per served call")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--scenarios", default="nolimits,rpm,fixed")
    args = parser.parse_args(argv)
    os.environ.setdefault("OPENAI_API_KEY", "bench-dummy-key")
    scenarios = {"nolimits": ("no limits (adaptive gate)", {}),
                 "rpm": ("judge_rpm = 60 R", {"rpm": 60 * args.rate}),
                 "fixed": ("no limits, adaptive off", {"adaptive": False})}
    results = []
    with ChatCompletionsServer(responder=lambda body: REPLY, latency=args.latency) as server:
        server.rate_limit = args.rate
        for _ in range(args.repeat):
            for key in args.scenarios.split(","):
                label, settings = scenarios[key]
                results.append(run(label, server, args, **settings))
    print(f"\nN={args.n}, R={args.rate}/s (N/R = {args.n / args.rate:.1f}s), latency {args.latency}s, "
          f"concurrency {args.concurrency}, {now()}, load {os.getloadavg()[0]:.1f}\n")
    print("| scenario | total (s) | / (N/R) | 429s | retries | lost samples | peak in flight |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r.scenario} | {r.seconds:.2f} | {r.ratio:.3f} | {r.server_429} | {r.retries} | {r.lost} | "
              f"{r.peak_in_flight} |")
    print(json.dumps({"machine": machine(), "settings": vars(args), "results": [asdict(r) for r in results]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
