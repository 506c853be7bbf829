"""A warm rerun of ``gsm8k_gpt4em`` against lm-eval's built-in ``gsm8k`` on the same generations.

A warm rerun is the same command again with every verdict already in the judge
cache: it should cost what lm-eval itself costs. Every run is the real ``lm_eval``
CLI replaying the recorded generations (``--model mathjudge-replay``, ``--limit N``,
``--log_samples``) on ``<data-dir>/gsm8k/test.jsonl``:

  builtin   lm-eval's own gsm8k.yaml (5-shot, regex filters, exact_match), included from
            a temp folder with the docs read from the same local file (the hub is offline;
            the few-shot pool is the test split, as no train split is local)
  after     gsm8k_gpt4em from this tree, warm (its cache filled by one cold run first)
  before    gsm8k_gpt4em from ``--before REV`` (``git archive`` into a temp folder, put first
            on PYTHONPATH), warm likewise; left out without ``--before``

The judge is a loopback OpenAI-compatible server living in this process. Each of
``--reps`` rounds runs every variant once (order rotated), so load on a shared
machine hits them alike. Figures: the median CPU time of the lm_eval process (user +
system, ``os.wait4``; what the load of other processes does not change) and the
median wall time, each with its ratio to ``builtin``. A last warm run of each plugin variant under ``python -X importtime`` says
whether the ``openai`` SDK was imported; the server's request log says what a warm
run sent (nothing, when the preflight is remembered). Exit status 1 if an ``after``
warm run sends anything or imports the SDK.

    python bench/warm_rerun.py [--n 100] [--reps 5] [--before REV] [--out bench/out/warm_rerun]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from _common import (REPO, add_common_arguments, base_env, check_common_arguments, finish, gold_of, last_line_has,
                     lm_eval_exe, metric_of, read_results)
from _rusage import replay_measured
from tests.loopback import ChatCompletionsServer

PLUGIN_TASK = "gsm8k_gpt4em"
BUILTIN_TASK = "gsm8k_builtin_local"
ENV_STRIP = ("MATHJUDGE_", "OPENAI_", "AZURE_OPENAI_")


def verdict(body: dict) -> str:
    """Correct iff the gold answer is in the last line of the response (as bench/judge_stage.py grades)."""
    prompt = body["messages"][-1]["content"]
    reference = prompt.split("### Reference solution", 1)[1].split("### Student's solution", 1)[0]
    response = prompt.split("### Student's solution", 1)[1].split("### How to grade", 1)[0]
    same, last = last_line_has(gold_of(reference), response)
    return f"Error Analysis: the last line says {last}.\nFinal Verdict: {'Correct' if same else 'Incorrect'}"


def builtin_task_dir(folder: Path, data_dir: Path) -> Path:
    """A task that is lm-eval's gsm8k.yaml with the docs from the local file."""
    import lm_eval

    builtin = Path(lm_eval.__file__).parent / "tasks" / "gsm8k" / "gsm8k.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    config = {"include": str(builtin), "task": BUILTIN_TASK, "tag": [], "dataset_path": "json",
              "dataset_name": None, "dataset_kwargs": {"data_files": {"test": str(data_dir / "gsm8k" / "test.jsonl")}},
              "training_split": None, "fewshot_split": "test"}
    (folder / f"{BUILTIN_TASK}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return folder


def old_tree(rev: str, folder: Path) -> Path:
    """The plugin as of ``rev``, unpacked with ``git archive`` (the repository is not touched)."""
    folder.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "lm_eval_mathjudge", "task_configs"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def imports_sdk(env: dict[str, str], args: list[str], log: Path) -> bool:
    """Whether an lm_eval run under ``-X importtime`` imported the openai SDK."""
    proc = subprocess.run([sys.executable, "-X", "importtime", lm_eval_exe(), *args], env=env, cwd=str(REPO),
                          capture_output=True, text=True, timeout=900)
    log.write_text(proc.stderr)
    return any(line.rstrip().endswith("| openai") for line in proc.stderr.splitlines())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser, n=100, latency=0.0, out=REPO / "bench" / "out" / "warm_rerun")
    parser.add_argument("--reps", type=int, default=5, help="rounds of warm runs (every variant once per round)")
    parser.add_argument("--before", help="a git revision of the plugin to compare with (e.g. the merge base)")
    args = parser.parse_args()
    replay = check_common_arguments(parser, args)
    tmp = Path(tempfile.mkdtemp(prefix="mj-warm-"))
    problems: list[str] = []
    try:
        with ChatCompletionsServer(verdict, latency=args.latency) as judge:
            variants = plugin_variants(args, tmp)
            include = builtin_task_dir(tmp / "builtin", args.data_dir)
            common = base_env(args.data_dir, tmp / "unused-cache", {"OPENAI_API_KEY": "dummy"}, ENV_STRIP)
            metadata = ["--metadata", f'{{"judge_base_url": "{judge.url}", "judge_concurrency": {args.concurrency}}}']
            runs = {"builtin": (BUILTIN_TASK, common, ["--include_path", str(include)])}
            for name, pythonpath in variants.items():
                env = {**common, "MATHJUDGE_CACHE_DIR": str(tmp / f"cache-{name}")}
                if pythonpath:
                    env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
                runs[name] = (PLUGIN_TASK, env, metadata)
            scores, sent, walls, cpus = first_runs(args, replay, runs, problems)
            for rep in range(args.reps):
                order = list(runs)[rep % len(runs):] + list(runs)[:rep % len(runs)]
                for name in order:
                    task, env, extra = runs[name]
                    before = len(judge.requests)
                    done = replay_measured(f"{name}-warm", task, replay, args.n, args.out, env, extra, args.timeout)
                    if done.exit_code != 0:
                        problems.append(f"{name} warm run exited {done.exit_code} (see {done.log})")
                    walls[name].append(done.wall_s)
                    cpus[name].append(done.cpu_s)
                    sent[name].append(len(judge.requests) - before)
            sdk = {name: imports_sdk(runs[name][1], ["--model", "mathjudge-replay", "--model_args", f"path={replay}",
                                                     "--tasks", PLUGIN_TASK, "--limit", str(args.n),
                                                     "--output_path", str(tmp / f"importtime-{name}"), *runs[name][2]],
                                     args.out / f"{name}-importtime.log")
                   for name in variants}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if "after" in sdk and sdk["after"]:
        problems.append("the warm 'after' run imported the openai SDK")
    if any(sent["after"]):
        problems.append(f"warm 'after' runs sent requests to the judge: {sent['after']}")
    return report(args, walls, cpus, sent, sdk, scores, problems)


def plugin_variants(args: argparse.Namespace, tmp: Path) -> dict[str, Path | None]:
    variants: dict[str, Path | None] = {"after": None}
    if args.before:
        variants["before"] = old_tree(args.before, tmp / "before")
    return variants


def first_runs(args, replay, runs, problems):
    """One run of every variant: fills the judge caches (and the datasets cache of the built-in task)."""
    scores, sent, walls, cpus = {}, *({name: [] for name in runs} for _ in range(3))
    for name, (task, env, extra) in runs.items():
        done = replay_measured(f"{name}-first", task, replay, args.n, args.out, env, extra, args.timeout)
        if done.exit_code != 0:
            problems.append(f"{name} first run exited {done.exit_code} (see {done.log})")
        metric = "exact_match" if name == "builtin" else "gpt4_exact_match"
        results = read_results(done.run_dir)
        scores[name] = metric_of(results, task, metric) if name != "builtin" else \
            results.get("results", {}).get(task, {}).get("exact_match,flexible-extract")
    return scores, sent, walls, cpus


def report(args, walls, cpus, sent, sdk, scores, problems) -> int:
    base_cpu = statistics.median(cpus["builtin"]) if cpus["builtin"] else None
    base_wall = statistics.median(walls["builtin"]) if walls["builtin"] else None
    print(f"\n| warm run, --limit {args.n}, median of {args.reps} | CPU s | vs built-in | wall s | vs built-in "
          "| judge requests | openai imported |\n|---|---:|---:|---:|---:|---:|---|")
    figures = {}
    for name in walls:
        if not walls[name]:
            continue
        cpu, wall = statistics.median(cpus[name]), statistics.median(walls[name])
        figures[name] = {"cpu_s": cpus[name], "wall_s": walls[name], "median_cpu_s": cpu, "median_wall_s": wall,
                         "cpu_ratio": cpu / base_cpu if base_cpu else None,
                         "wall_ratio": wall / base_wall if base_wall else None,
                         "judge_requests": sent[name], "imports_openai": sdk.get(name), "score": scores.get(name)}
        print(f"| {name} | {cpu:.2f} | {_ratio(figures[name]['cpu_ratio'])} | {wall:.2f} | "
              f"{_ratio(figures[name]['wall_ratio'])} | {max(sent[name])} | "
              f"{'-' if name == 'builtin' else ('yes' if sdk.get(name) else 'no')} |")
    return finish(args, [], problems, {"reps": args.reps, "before": args.before}, warm_rerun=figures)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x"


if __name__ == "__main__":
    sys.exit(main())
