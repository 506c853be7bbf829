"""Memory of the judge stage at N samples: every request built up front vs requests built as a stream.

In-process, with tracemalloc, on real GSM8K docs and real recorded responses (cycled to N, each made
unique), the real exact-match template and parser, and a JudgeClient over an in-process backend that
answers at once (no network: this measures what the plugin holds, not the SDK).

- ``before``: what the harness did before run.py: build every JudgeRequest, then ``judge_all``
  through the old ``run_bounded``, which submitted every item at once (a Future each; kept here);
- ``upfront``: every JudgeRequest built first, through today's windowed ``pool.run_bounded``;
- ``stream``: the run pool's path (judging/schedule.py): ``Job.build`` keys each request and drops
  it, ``schedule.judge`` renders each one again right before its call; the pool keeps at most 4 x workers items submitted.

All keep one Outcome per unique request (the verdicts the samples file needs). Reported: the peak
traced memory above the docs and responses, in KiB per sample, and the wall time.

    python bench/run_memory.py --n 10000
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPLAY_FILE, REPO, read_jsonl  # noqa: E402

from lm_eval_mathjudge.judging import client as client_module  # noqa: E402
from lm_eval_mathjudge.judging import schedule  # noqa: E402
from lm_eval_mathjudge.judging.cache import Reply  # noqa: E402
from lm_eval_mathjudge.judging.client import JudgeClient  # noqa: E402
from lm_eval_mathjudge.settings.schema import JudgeSettings  # noqa: E402
from lm_eval_mathjudge.core.data_sets import gsm8k_answer  # noqa: E402
from lm_eval_mathjudge.core.judges import EXACT_MATCH  # noqa: E402
from lm_eval_mathjudge.core import prompts  # noqa: E402

VERDICT = "Error Analysis: the final answers agree.\nFinal Verdict: Correct"


class Instant:
    def identity(self):
        return {"backend": "bench", "model": "instant"}

    def complete(self, request):
        return Reply(text=VERDICT, usage={"prompt_tokens": len(request.prompt) // 4, "completion_tokens": 12})

    def close(self):
        pass


def samples(data_dir: Path, n: int) -> list[tuple[dict, str]]:
    rows = list(read_jsonl(data_dir / "gsm8k" / "test.jsonl"))
    responses = [r.get("response") or r.get("output") or "" for r in read_jsonl(data_dir / REPLAY_FILE)]
    out = []
    for i in range(n):
        row = rows[i % len(rows)]
        doc = {"mj_question": row["question"], "mj_reference": row["answer"], "mj_answer": gsm8k_answer(row["answer"])}
        out.append((doc, f"{responses[i % len(responses)]}\n(sample {i})"))
    return out


def client(concurrency: int) -> JudgeClient:
    settings = JudgeSettings(backend="openai", model="instant", concurrency=concurrency, cache=False)
    return JudgeClient(Instant(), EXACT_MATCH.parse, settings, prompts.load(EXACT_MATCH.template).version, None,
                       progress=False)


def upfront(pairs, concurrency):
    requests = [EXACT_MATCH.request(doc, response) for doc, response in pairs]
    return client(concurrency).judge_all(requests)


def stream(pairs, concurrency):
    job = schedule.Job.build("gsm8k_gpt4em", client(concurrency), len(pairs),
                        lambda i: EXACT_MATCH.request(*pairs[i]))
    schedule.judge([job], "judging", progress=False)
    return [job.outcome(i) for i in range(len(pairs))]


def submit_all_run_bounded(items, fn, *, concurrency, desc, progress=True, unit="req", thread_name="mathjudge",
                          on_bar=None):
    """The run_bounded of before issue 8: every item submitted at once (one Future each)."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    results = [None] * len(items)
    workers = max(1, min(concurrency, len(items)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=thread_name) as pool:
        futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
    return results


def before(pairs, concurrency):
    real = client_module.run_bounded
    client_module.run_bounded = submit_all_run_bounded
    try:
        return upfront(pairs, concurrency)
    finally:
        client_module.run_bounded = real


def measure(name, fn, pairs, concurrency) -> dict:
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    outcomes = fn(pairs, concurrency)
    wall = time.perf_counter() - started
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(outcomes) == len(pairs) and all(o.verdict is not None for o in outcomes)
    n = len(pairs)
    return {"path": name, "n": n, "peak_kib_per_sample": round((peak - base) / 1024 / n, 2),
            "kept_kib_per_sample": round((current - base) / 1024 / n, 2), "wall_s": round(wall, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    args = parser.parse_args()
    pairs = samples(args.data_dir.resolve(), args.n)
    paths = (("before", before), ("upfront", upfront), ("stream", stream))
    rows = [measure(name, fn, pairs, args.concurrency) for name, fn in paths]
    print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
