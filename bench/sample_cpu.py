"""CPU per judged sample: the plugin's own against the openai SDK's (and its HTTP stack).

N GSM8K test docs with their worked solutions as the responses are judged by the
real exact-match judge (prompt, request, cache, parser) through the real
``openai`` backend, against a loopback judge that answers at once and runs in a
child process (its CPU is not counted). Two passes over the same requests:

  cold   empty judge cache: one call per sample
  warm   the same requests again: every verdict from the cache

The SDK is imported before the passes: its import is a one-time cost, not a
per-sample one. Each pass runs twice: once plain, for the CPU time per sample
(``time.process_time``), and once under cProfile, to split that time by package.
The client's pool is made serial for both (``client.run_bounded`` replaced by a
loop in the main thread) so the profiler sees every frame. Time in the standard
library or in builtins (json, sqlite3, sockets) goes to whoever called it: its
share is handed up the profiler's caller graph in proportion to each caller's
cumulative time. ``plugin`` is lm_eval_mathjudge; ``sdk`` is openai and what it
calls to send a request (pydantic, httpx2, httpcore, h11, anyio, ...).

    python bench/sample_cpu.py [--n 300] [--out bench/out/sample_cpu]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, finish, read_jsonl

from lm_eval_mathjudge import backends
from lm_eval_mathjudge.judging import client as client_module
from lm_eval_mathjudge.core import data_sets, prompts
from lm_eval_mathjudge.judging.cache import ReplyCache
from lm_eval_mathjudge.judging.client import JudgeClient
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.judges import JUDGES

MODEL = "gpt-4-turbo-2024-04-09"
SDK_PARTS = ("/openai/", "/pydantic/", "/pydantic_core/", "/httpx2/", "/httpx/", "/httpcore/", "/h11/", "/anyio/",
             "/sniffio/", "/jiter/", "/distro/", "/certifi/", "/typing_extensions", "/annotated_types/")
SERVER = ("import sys; sys.path.insert(0, {repo!r}); from tests.loopback import ChatCompletionsServer\n"
          "reply = lambda body: 'Error Analysis: the answers agree.\\nFinal Verdict: Correct'\n"
          "with ChatCompletionsServer(reply) as s:\n    print(s.url, flush=True); sys.stdin.read()")


def group_of(filename: str) -> str | None:
    if "/lm_eval_mathjudge/" in filename:
        return "plugin"
    if any(part in filename for part in SDK_PARTS):
        return "sdk"
    return None  # the standard library or a builtin: charged to its callers


def split_by_package(stats: pstats.Stats) -> dict[str, float]:
    """Seconds of own time per group, stdlib and builtins handed up to their callers."""
    table = stats.stats  # func -> (cc, nc, tt, ct, callers{caller: (cc, nc, tt, ct)})
    memo: dict = {}

    def shares(func, seen=()) -> dict[str, float]:
        if func in memo:
            return memo[func]
        own = group_of(func[0])
        if own is not None:
            return {own: 1.0}
        callers = table.get(func, (0, 0, 0, 0, {}))[4]
        weights = {c: edge[3] for c, edge in callers.items() if c not in seen}
        total = sum(weights.values())
        if not total:
            return {"other": 1.0}
        result: dict[str, float] = {}
        for caller, weight in weights.items():
            for group, share in shares(caller, (*seen, func)).items():
                result[group] = result.get(group, 0.0) + share * weight / total
        if not seen:
            memo[func] = result
        return result

    totals: dict[str, float] = {}
    for func, (_, _, own_time, _, _) in table.items():
        for group, share in shares(func).items():
            totals[group] = totals.get(group, 0.0) + own_time * share
    return totals


def requests(n: int, source: Path):
    import datasets

    rows = list(read_jsonl(source))[:n]
    docs = data_sets.get("gsm8k").process_docs(datasets.Dataset.from_list(rows))
    judge = JUDGES["exact_match"]
    answers = [r["answer"].rpartition("####") for r in rows]
    return [judge.request(doc, f"{steps.strip()}\nSo the answer is \\boxed{{{gold.strip()}}}.")
            for doc, (steps, _, gold) in zip(docs, answers)]


def judge_pass(url: str, cache_dir: str, reqs, profile: cProfile.Profile | None) -> float:
    """CPU seconds for one judge_all over reqs (serial, main thread)."""
    settings = JudgeSettings(backend="openai", model=MODEL, base_url=url, concurrency=1, cache_dir=cache_dir)
    judge = JUDGES["exact_match"]
    client = JudgeClient(backends.build(settings, judge.name), judge.parse, settings,
                         prompts.load(judge.template).version, ReplyCache(cache_dir), progress=False)
    try:
        start = time.process_time()
        if profile is not None:
            profile.enable()
        outcomes = client.judge_all(reqs)
        if profile is not None:
            profile.disable()
        spent = time.process_time() - start
    finally:
        client.close()
    failed = [o for o in outcomes if o.failure]
    if failed:
        raise SystemExit(f"{len(failed)} samples failed: {failed[0].error}")
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "sample_cpu")
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    client_module.run_bounded = lambda items, fn, **_: [fn(item) for item in items]  # serial: profiler sees it all
    import openai  # noqa: F401 - a one-time cost (bench/warm_rerun.py shows it), not a per-sample one
    reqs = requests(args.n, args.data_dir / "gsm8k" / "test.jsonl")
    server = subprocess.Popen([sys.executable, "-c", SERVER.format(repo=str(REPO))], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    figures: dict[str, dict] = {}
    try:
        url = server.stdout.readline().strip()
        os.environ.setdefault("OPENAI_API_KEY", "dummy")
        for label in ("plain", "profiled"):
            with tempfile.TemporaryDirectory() as cache_dir:
                for phase in ("cold", "warm"):
                    profile = cProfile.Profile() if label == "profiled" else None
                    spent = judge_pass(url, cache_dir, reqs, profile)
                    entry = figures.setdefault(phase, {})
                    if profile is None:
                        entry["cpu_us_per_sample"] = spent / len(reqs) * 1e6
                    else:
                        split = split_by_package(pstats.Stats(profile))
                        total = sum(split.values())
                        entry["share"] = {k: v / total for k, v in split.items()}
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    print(f"\n| pass ({args.n} GSM8K samples, serial) | CPU per sample | plugin | SDK + HTTP | other |\n"
          "|---|---:|---:|---:|---:|")
    for phase, entry in figures.items():
        per, share = entry["cpu_us_per_sample"], entry["share"]
        entry["us_per_sample"] = {k: per * v for k, v in share.items()}
        cells = " | ".join(f"{per * share.get(k, 0) / 1000:.3f} ms" for k in ("plugin", "sdk", "other"))
        print(f"| {phase} | {per / 1000:.3f} ms | {cells} |")
    args.latency, args.concurrency = 0.0, 1
    return finish(args, [], [], {"model": MODEL}, sample_cpu=figures)


if __name__ == "__main__":
    sys.exit(main())
