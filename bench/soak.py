"""Soak: thousands of judge calls through faults, two processes sharing one cache.

Builds one exact-match judge request per (GSM8K test doc, response) with two
responses per doc: the gold answer boxed (truth: Correct) and gold + 1 boxed
(truth: Incorrect), through the real prompt template. A loopback
OpenAI-protocol judge grades like a careful judge and answers ``--fault-rate``
of all calls with a fault instead (429 with Retry-After, 500, 503, or a dropped
connection, drawn from a seeded RNG). Two processes then judge the whole set at
the same time through the real ``openai`` SDK, sharing one cache folder.

Reported (stdout and ``--out``/soak.json):
- each process's verdicts against the truth (identical scores: every sample
  matches; lost samples: any that ended without a verdict);
- calls the server received, faults injected, replies served, and the
  duplicate count: successful replies beyond one per unique request, i.e. work
  paid twice because the processes did not share it.

    python bench/soak.py                        # 1,319 docs x 2 = 2,638 requests per process
    python bench/soak.py --docs 200 --fault-rate 0.3
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.e2e import exact_match_judge  # noqa: E402  (the loopback judge's grading rule)
from tests.loopback import ChatCompletionsServer  # noqa: E402
from tests.loopback._base import GARBAGE_BODY, Reply  # noqa: E402


class FaultyJudge(ChatCompletionsServer):
    """Answers a seeded share of chat calls with a fault; counts what it served per prompt."""

    def __init__(self, rate: float, seed: int, latency: float):
        super().__init__(exact_match_judge, latency=latency)
        self._rng = random.Random(seed)
        self._rate = rate
        self._lock2 = threading.Lock()
        self.faults: Counter = Counter()
        self.served: Counter = Counter()  # prompt -> successful replies

    def _fault_reply(self):
        with self._lock2:
            roll, kind = self._rng.random(), self._rng.randrange(4)
        if roll >= self._rate:
            return None
        name = ("429", "500", "503", "drop")[kind]
        with self._lock2:
            self.faults[name] += 1
        if name == "drop":
            return Reply(drop=True)
        status = int(name)
        headers = {"Retry-After": "0.05"} if status == 429 else {}
        return Reply(status, self.error_body(status, None, headers), headers)

    def _chat(self, raw):
        reply = super()._chat(raw)
        if getattr(reply, "status", 200) == 200:
            try:
                prompt = json.loads(raw)["messages"][-1]["content"]
            except (ValueError, KeyError, IndexError, TypeError):
                prompt = GARBAGE_BODY
            with self._lock2:
                self.served[prompt] += 1
        return reply


def build_prompts(data_dir: Path, docs: int) -> tuple[list[str], list[bool]]:
    import datasets

    from lm_eval_mathjudge.core import data_sets
    from lm_eval_mathjudge.core.judges import JUDGES

    rows = [json.loads(line) for line in (data_dir / "gsm8k" / "test.jsonl").read_text().splitlines() if line][:docs]
    prompts, truth = [], []
    for doc in data_sets.get("gsm8k").process_docs(datasets.Dataset.from_list(rows)):
        gold = doc["mj_answer"]
        for answer, correct in ((gold, True), (str(int(float(gold)) + 1), False)):
            response = f"Working through the problem step by step gives {answer}.\n\\boxed{{{answer}}}"
            prompts.append(JUDGES["exact_match"].request(doc, response).prompt)
            truth.append(correct)
    return prompts, truth


def judge_in_process(cache_dir: str, base_url: str, prompts: list[str], concurrency: int, start, results) -> None:
    try:
        import os

        os.environ.setdefault("OPENAI_API_KEY", "soak-dummy-key")  # the loopback judge checks none
        from lm_eval_mathjudge import backends
        from lm_eval_mathjudge.judging.cache import ReplyCache
        from lm_eval_mathjudge.judging.client import JudgeClient
        from lm_eval_mathjudge.settings.layers import resolve_settings
        from lm_eval_mathjudge.core.judges import JUDGES
        from lm_eval_mathjudge.core.types import JudgeRequest

        settings = resolve_settings("exact_match", None, {
            "judge_base_url": base_url, "judge_concurrency": concurrency, "judge_max_retries": 12,
            "judge_timeout": 30}, environ={})
        client = JudgeClient(backends.build(settings, "exact_match"), JUDGES["exact_match"].parse, settings,
                             "soak-template", ReplyCache(cache_dir), progress=False)
        start.wait(timeout=300)
        t0 = time.monotonic()
        outcomes = client.judge_all([JudgeRequest(prompt=p) for p in prompts])
        elapsed = time.monotonic() - t0
        client.close()
        results.put({"verdicts": [o.verdict.correct if o.verdict else None for o in outcomes],
                     "failures": dict(Counter(o.failure for o in outcomes if o.failure)),
                     "stats": client.stats.as_dict(), "seconds": round(elapsed, 2)})
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        results.put({"error": f"{type(exc).__name__}: {exc}"})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1319, help="GSM8K test docs (two requests each)")
    parser.add_argument("--fault-rate", type=float, default=0.2)
    parser.add_argument("--latency", type=float, default=0.0, help="judge latency per call, seconds")
    parser.add_argument("--concurrency", type=int, default=16, help="per process")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    args = parser.parse_args()
    prompts, truth = build_prompts(args.data_dir, args.docs)
    ctx = mp.get_context("spawn")
    with FaultyJudge(args.fault_rate, args.seed, args.latency) as server, \
            tempfile.TemporaryDirectory(prefix="mj-soak-") as cache_dir:
        start, results = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=judge_in_process, args=(cache_dir, server.url, prompts, args.concurrency,
                                                             start, results)) for _ in range(2)]
        t0 = time.monotonic()
        for proc in procs:
            proc.start()
        reports = [results.get(timeout=3600) for _ in procs]
        for proc in procs:
            proc.join(timeout=60)
        wall = time.monotonic() - t0
        calls = sum(1 for r in server.requests if r.method == "POST")
        served = server.served
        faults = dict(server.faults)
    errors = [r["error"] for r in reports if "error" in r]
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    summary = {
        "requests_per_process": len(prompts), "unique_requests": len(set(prompts)), "fault_rate": args.fault_rate,
        "server_calls": calls, "faults_injected": faults, "replies_served": sum(served.values()),
        "duplicate_replies": sum(n - 1 for n in served.values() if n > 1),
        "wall_seconds": round(wall, 1),
        "processes": [{
            "matches_truth": sum(v == t for v, t in zip(r["verdicts"], truth)),
            "lost_samples": sum(v is None for v in r["verdicts"]), "failures": r["failures"],
            "judge_calls": r["stats"]["judge_calls"], "retries": r["stats"]["retries"],
            "shared_with_other_processes": r["stats"].get("shared_with_other_processes"),
            "seconds": r["seconds"]} for r in reports],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "soak.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    ok = all(p["matches_truth"] == len(truth) and p["lost_samples"] == 0 for p in summary["processes"])
    print("identical scores, zero lost samples" if ok else "MISMATCH: see above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
