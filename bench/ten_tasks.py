"""A ten-task run (``mathjudge_gpt4em,mathjudge_vlmjudge``) judged in one pool vs task by task.

Both runs go through the real ``lm_eval`` CLI on the same replayed generations (the first
``--limit`` docs of each data set in ``--data-dir``; answers are a boxed number, every third one
wrong). The GPT4-EM judge is a loopback OpenAI server, the VLM judge a loopback Gemini server,
both in this process; each call takes ``--latency`` seconds, and every call of one task
(``--slow-task``) takes ``--slow-latency`` seconds. The servers record when each call starts and ends.

- ``whole``: the default (run.py judges every task through one pool);
- ``by-task``: ``LM_EVAL_MATHJUDGE_TASK_BY_TASK=1``, lm-eval's task-by-task order (the before).

The judge stage is the first call's start to the last call's end. The limit of one pool for all
tasks is ``max(sum of call latencies / concurrency, slowest call)``: no schedule of these calls on
``concurrency`` workers can finish sooner. The task-by-task limit is the sum of that bound per task.

    python bench/ten_tasks.py --limit 40 --latency 1 --slow-latency 5 --concurrency 32
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, base_env, lm_eval_exe, machine, now, read_jsonl  # noqa: E402

import subprocess  # noqa: E402

from lm_eval_mathjudge.core import data_sets  # noqa: E402
from tests.loopback import ChatCompletionsServer, GeminiServer  # noqa: E402

DATASETS = tuple(entry.name for entry in data_sets.BUILT_IN)  # the two groups' data sets
WRONG = "999999"


class Judge:
    """Answers after a per-task latency; records (task, start, end) of every call."""

    def __init__(self, kind: str, questions: dict[str, str], latency: float, slow_task: str, slow_latency: float):
        self.kind, self.questions = kind, questions
        self.latency, self.slow_task, self.slow_latency = latency, slow_task, slow_latency
        self.lock = threading.Lock()
        self.calls: list[tuple[str, float, float]] = []

    def task_of(self, text: str) -> str:
        dataset = next(ds for ds in DATASETS if f"[{ds} doc " in text)  # the response names its data set
        return f"{dataset}_{self.kind}"

    def __call__(self, body: dict) -> str:
        start = time.monotonic()
        if self.kind == "gpt4em":
            text = body["messages"][-1]["content"]
        else:
            text = "\n".join(p.get("text", "") for c in body["contents"] for p in c["parts"])
        task = self.task_of(text)
        time.sleep(self.slow_latency if task == self.slow_task else self.latency)
        right = WRONG not in text.rsplit("\\boxed", 1)[-1]
        with self.lock:
            self.calls.append((task, start, time.monotonic()))
        if self.kind == "gpt4em":
            return f"Error Analysis: compared the final answers.\nFinal Verdict: {'Correct' if right else 'Incorrect'}"
        flag = int(right)
        return (f"INTERMEDIATE_CORRECT: {flag}\nFINAL_CORRECT: {flag}\nACTION_REFLECTION: 0\n"
                f"EXPLANATION: the final answer {'matches' if right else 'does not match'} the official one.")


def generations(data_dir: Path, limit: int, path: Path) -> dict[str, str]:
    questions = {}
    with open(path, "w", encoding="utf-8") as fh:
        for ds in DATASETS:
            for i, row in enumerate(read_jsonl(data_dir / data_sets.get(ds).local_name / "test.jsonl")):
                if i >= limit:
                    break
                question = row[data_sets.get(ds).question]
                questions[question] = ds
                answer = WRONG if i % 3 == 0 else "42"
                response = f"[{ds} doc {i}] So the answer is {answer}.\n\\boxed{{{answer}}}"
                fh.write(json.dumps({"question": question, "response": response}) + "\n")
    return questions


def bound(calls: list[tuple[str, float, float]], concurrency: int) -> float:
    """No schedule of these calls on ``concurrency`` workers finishes sooner."""
    if not calls:
        return 0.0
    spans = [end - start for _, start, end in calls]
    return max(sum(spans) / concurrency, max(spans))


def stage(calls: list[tuple[str, float, float]]) -> float:
    return max(e for _, _, e in calls) - min(s for _, s, _ in calls) if calls else 0.0


def run_once(name: str, args, replay: Path, judges: tuple[Judge, Judge], urls: tuple[str, str],
             extra_env: dict[str, str]) -> dict:
    for judge in judges:
        with judge.lock:
            judge.calls.clear()
    run_dir, cache = args.out / name, args.out / f"{name}-cache"
    for folder in (run_dir, cache):
        shutil.rmtree(folder, ignore_errors=True)
    env = base_env(args.data_dir, cache, {"OPENAI_API_KEY": "dummy", "GEMINI_API_KEY": "dummy"},
                   ("MATHJUDGE_", "OPENAI_", "AZURE_OPENAI_", "GOOGLE_", "GEMINI_", "LM_EVAL_MATHJUDGE_"))
    env.update(extra_env)
    metadata = {"gpt4em_judge_base_url": urls[0], "vlm_judge_base_url": urls[1],
                "judge_concurrency": args.concurrency}
    cmd = [lm_eval_exe(), "--model", "mathjudge-replay", "--model_args", f"path={replay}",
           "--tasks", "mathjudge_gpt4em,mathjudge_vlmjudge", "--limit", str(args.limit),
           "--metadata", json.dumps(metadata), "--output_path", str(run_dir)]
    print(f"[{name}] {' '.join(cmd)}", flush=True)
    started = time.perf_counter()
    with open(args.out / f"{name}.log", "w", encoding="utf-8") as log:
        proc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO), timeout=args.timeout)
    wall = time.perf_counter() - started
    calls = [c for judge in judges for c in judge.calls]
    results = {}
    for path in run_dir.rglob("results_*.json"):
        results = json.loads(path.read_text())["results"]
    tasks = sorted({t for t, _, _ in calls})
    per_task_limit = sum(bound([c for c in calls if c[0] == t], args.concurrency) for t in tasks)
    return {"name": name, "exit_code": proc.returncode, "lm_eval_wall_s": round(wall, 2), "calls": len(calls),
            "judge_stage_s": round(stage(calls), 2), "one_pool_limit_s": round(bound(calls, args.concurrency), 2),
            "task_by_task_limit_s": round(per_task_limit, 2),
            "scores": {t: {k: v for k, v in r.items() if k.endswith(",none") and "stderr" not in k}
                       for t, r in results.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=40, help="docs per data set (aime24/25 have 30)")
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per judge call")
    parser.add_argument("--slow-task", default="omnimath_gpt4em", help="the task whose calls are slow")
    parser.add_argument("--slow-latency", type=float, default=5.0, help="seconds per call of --slow-task")
    parser.add_argument("--concurrency", type=int, default=32, help="judge_concurrency (both judges)")
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=Path("/tmp/mathjudge-bench-ten-tasks"))
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    args.data_dir, args.out = args.data_dir.resolve(), args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    replay = args.out / "generations.jsonl"
    questions = generations(args.data_dir, args.limit, replay)
    judges = (Judge("gpt4em", questions, args.latency, args.slow_task, args.slow_latency),
              Judge("vlmjudge", questions, args.latency, args.slow_task, args.slow_latency))
    with ChatCompletionsServer(judges[0]) as em, GeminiServer(judges[1]) as vlm:
        urls = (em.url, vlm.url)
        runs = [run_once("whole", args, replay, judges, urls, {}),
                run_once("by-task", args, replay, judges, urls, {"LM_EVAL_MATHJUDGE_TASK_BY_TASK": "1"})]
    whole, by_task = runs
    problems = [f"{r['name']}: lm_eval exited {r['exit_code']} (see {args.out / (r['name'] + '.log')})"
                for r in runs if r["exit_code"]]
    if whole["scores"] != by_task["scores"]:
        problems.append("the two runs' scores differ")
    if whole["calls"] != by_task["calls"]:
        problems.append(f"judge calls differ: {whole['calls']} vs {by_task['calls']}")
    print(f"{'run':<8} {'calls':>6} {'judge stage':>12} {'one-pool limit':>15} {'ratio':>6} {'lm_eval wall':>13}")
    for r in runs:
        ratio = r["judge_stage_s"] / r["one_pool_limit_s"] if r["one_pool_limit_s"] else float("nan")
        r["ratio_to_one_pool_limit"] = round(ratio, 3)
        print(f"{r['name']:<8} {r['calls']:>6} {r['judge_stage_s']:>11.2f}s {r['one_pool_limit_s']:>14.2f}s "
              f"{ratio:>5.2f}x {r['lm_eval_wall_s']:>12.2f}s")
    print(f"task-by-task limit (sum of per-task bounds): {by_task['task_by_task_limit_s']:.2f}s; "
          f"by-task / whole judge stage: {by_task['judge_stage_s'] / max(whole['judge_stage_s'], 1e-9):.2f}x")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    summary = {"date": now(), "machine": machine(),
               "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
               "runs": runs, "problems": problems}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"summary: {args.out / 'summary.json'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
