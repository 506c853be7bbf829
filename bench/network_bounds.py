"""Peak memory, disk and end time of a run whose judge misbehaves at the HTTP level (``backends/wire``).

Real ``lm_eval`` processes (``_rusage.py``; the peak RSS reported by a small wrapper process, since a
child measured from here would start from this process's own high-water mark) replay the first N
recorded GSM8K generations (``gsm8k_gpt4em``, the plugin's default judge concurrency of 64); the judge
is a loopback OpenAI server in this process that, per scenario:

    honest        answers every call at once with a contract reply (the baseline)
    flood         a 200 of 100 MB, chunked (no Content-Length to refuse early)
    gzip-bomb     a 1 MB gzip body that inflates to 1 GiB
    nested-bomb   ``Content-Encoding: gzip, gzip``: 2 KB that inflate to 1 GiB
    drip          one byte a second, with judge_timeout T and judge_max_retries R

Reported per run: exit code, judge_failed, judge calls, peak RSS and its ratio to the honest run, the
largest file the run wrote (cache, samples, results), wall time; for the drip, wall time against
T x (R + 1) attempts (the run also starts and loads the tasks: the difference is start-up and backoff).

``--overhead K`` measures instead what the bounds cost an honest call: K chat completions (a 3 KB
reply) through the openai SDK with its own HTTP client and with the bounded one, alternately in
rounds, CPU time of this process (SDK, transport and the loopback server) per call.

    python bench/network_bounds.py --n 20 --timeout-s 10 --retries 1
    python bench/network_bounds.py --overhead 3000
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPLAY_FILE, REPO, base_env, judge_run_stats, metric_of, read_results  # noqa: E402
from _rusage import replay_measured  # noqa: E402

from tests._helpers import PEAK_RSS_WRAPPER  # noqa: E402
from tests.loopback import ChatCompletionsServer  # noqa: E402
from tests.loopback import wire_faults as faults  # noqa: E402

TASK = "gsm8k_gpt4em"
MiB = 1 << 20
VERDICT = "Error Analysis: The final answer matches the reference.\nFinal Verdict: Correct"
# What the judge answers every call with (built once per run: a bomb is compressed once, not per call).
SCENARIOS = {
    "honest": lambda: VERDICT,
    "flood": lambda: {"wire": faults.flood(100 * MiB, declare=False)},
    "gzip-bomb": lambda: {"wire": faults.bomb(1 << 30)},
    "nested-bomb": lambda: {"wire": faults.bomb(1 << 30, 2)},
    "drip": lambda: {"wire": faults.drip({"choices": []}, 1.0)},
}


def largest_file(*roots: Path) -> tuple[int, str]:
    sizes = [(p.stat().st_size, p.name) for root in roots for p in root.rglob("*") if p.is_file()]
    return max(sizes, default=(0, "-"))


def run(name: str, args: argparse.Namespace, scratch: Path) -> dict:
    cache = scratch / f"cache-{name}"
    shutil.rmtree(cache, ignore_errors=True)
    env = base_env(args.data_dir, cache, {"OPENAI_API_KEY": "sk-bench-0123456789"},
                   ("MATHJUDGE_", "OPENAI_", "GOOGLE_", "GEMINI_"))
    reply = SCENARIOS[name]()
    with ChatCompletionsServer(lambda body: reply) as judge:
        metadata = {"judge_base_url": judge.url, "judge_timeout": args.timeout_s, "judge_max_retries": args.retries}
        report = scratch / f"{name}.peak_rss_kib"
        measured = replay_measured(name, TASK, args.data_dir / REPLAY_FILE, args.n, scratch, env,
                                   ["--metadata", json.dumps(metadata)], timeout=args.run_timeout,
                                   prefix=(sys.executable, "-c", PEAK_RSS_WRAPPER, str(report)))
        calls = judge.call_count
    peak_mib = int(report.read_text()) / 1024  # wait4's figure would start from this process's own peak
    results = read_results(measured.run_dir)
    size, where = largest_file(measured.run_dir, cache)
    return {"scenario": name, "exit": measured.exit_code, "judge_failed": metric_of(results, TASK, "judge_failed"),
            "failures": judge_run_stats(results, TASK).get("failures"), "judge_calls": calls,
            "peak_rss_mib": round(peak_mib, 1), "largest_file_kib": round(size / 1024, 1),
            "largest_file": where, "wall_s": round(measured.wall_s, 1), "cpu_s": round(measured.cpu_s, 1)}


def overhead(calls: int, rounds: int = 5) -> None:
    """CPU per honest call, the SDK's own client against the bounded one, alternating rounds."""
    import os
    import time

    import openai

    from lm_eval_mathjudge.backends import wire
    from lm_eval_mathjudge.settings.schema import JudgeSettings

    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-0123456789")
    reply = VERDICT + " " + "x" * 3000
    spent = {"own": 0.0, "bounded": 0.0}
    with ChatCompletionsServer(lambda body: reply) as judge:
        clients = {"own": openai.OpenAI(base_url=judge.url, max_retries=0, timeout=30),
                   "bounded": openai.OpenAI(base_url=judge.url, max_retries=0, timeout=30,
                                            http_client=wire.openai_http_client(wire.judge_bounds(JudgeSettings())))}
        ask = [{"role": "user", "content": "Is 2 + 2 = 4?"}]
        for _ in range(rounds):
            for name, client in clients.items():
                start = time.process_time()
                for _ in range(calls // rounds):
                    client.chat.completions.create(model="m", messages=ask)
                spent[name] += time.process_time() - start
    per = {name: 1000 * cpu / (calls // rounds * rounds) for name, cpu in spent.items()}
    print(f"| client | CPU ms per call |\n|---|---:|\n| SDK's own | {per['own']:.3f} |\n"
          f"| bounded | {per['bounded']:.3f} |\n\nbounded / own: {per['bounded'] / per['own']:.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20, help="GSM8K docs (replayed generations)")
    parser.add_argument("--timeout-s", type=float, default=10.0, help="judge_timeout for every run")
    parser.add_argument("--retries", type=int, default=1, help="judge_max_retries for every run")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated, from " + ", ".join(SCENARIOS))
    parser.add_argument("--data-dir", type=Path, default=REPO / "examples" / "data")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "mathjudge-network-bounds")
    parser.add_argument("--run-timeout", type=float, default=1800.0, help="kill a run after this many seconds")
    parser.add_argument("--overhead", type=int, default=0, help="instead: CPU per honest call over this many calls")
    args = parser.parse_args(argv)
    if args.overhead:
        overhead(args.overhead)
        return 0
    args.data_dir = args.data_dir.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [run(name, args, args.out) for name in args.scenarios.split(",")]
    honest = next((r["peak_rss_mib"] for r in rows if r["scenario"] == "honest"), None)
    attempts = args.retries + 1
    print(f"\nN={args.n}, judge_timeout={args.timeout_s:g}s, judge_max_retries={args.retries} "
          f"({attempts} attempts: {args.timeout_s * attempts:g}s of deadlines per sample)")
    print("| scenario | exit | judge_failed | judge calls | peak RSS MiB | vs honest | largest file KiB | wall s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        ratio = f"{r['peak_rss_mib'] / honest:.2f}" if honest else "-"
        failed = "-" if r["judge_failed"] is None else f"{r['judge_failed']:.2f}"
        print(f"| {r['scenario']} | {r['exit']} | {failed} | {r['judge_calls']} | {r['peak_rss_mib']} | {ratio} | "
              f"{r['largest_file_kib']} | {r['wall_s']} |")
    (args.out / "summary.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                       "runs": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
