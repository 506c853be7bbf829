"""``mathjudge leaderboard | diff | drift | agreement | calibrate | rejudge | audit``: argument parsing and dispatch.

Only argparse is imported here; each command imports its modules when it runs,
so ``mathjudge --help`` and the package import stay cheap.
"""

from __future__ import annotations

import json
import os
import sys

COMMANDS = ("leaderboard", "diff", "drift", "agreement", "calibrate", "rejudge", "audit")


RUN_HELP = "an lm_eval --output_path folder (searched for results_*.json) or one results_*.json file"


def add_commands(sub, example) -> None:
    """The report commands on ``sub``; ``example(*lines)`` makes the epilog that ends each help."""
    board = sub.add_parser("leaderboard", help="table and chart of several runs, with intervals and paired tests",
                           description="Rank the models of several lm_eval runs per task: Markdown, CSV, HTML, "
                                       "SVG and PNG, with 95% intervals and paired tests against the leader.",
                           epilog=example("mathjudge leaderboard results/ --out board",
                                          "mathjudge leaderboard results/model_a results/model_b --out board",
                                          "mathjudge leaderboard results/ --out board --calibration calibration.json"))
    board.add_argument("runs", nargs="+", metavar="RUN", help=RUN_HELP + "; several, or one folder holding many")
    board.add_argument("--out", required=True, metavar="DIR", help="folder for leaderboard.md/.csv/.html/.png/.svg")
    board.add_argument("--allow-mixed", action="store_true",
                       help="show runs judged differently (judge, judge snapshot, prompt version, doc set, "
                            "samples per problem) side by side")
    board.add_argument("--calibration", metavar="FILE",
                       help="the judge's error rates (mathjudge calibrate --json): add the bias-corrected score "
                            "and its interval")
    _stats_args(board)

    calibrate = sub.add_parser("calibrate", help="the judge's sensitivity and specificity against labelled samples",
                               description="Measure the judge's error against labelled samples (a person's or a "
                                           "trusted judge's 0/1 per doc, or per doc and sample index with k "
                                           "samples): sensitivity and specificity with 95% intervals, per task and "
                                           "metric. --json writes what leaderboard --calibration reads.",
                               epilog=example("mathjudge calibrate results/model_a --labels labels.jsonl",
                                              "mathjudge calibrate results/model_a --labels labels.jsonl --json "
                                              "> calibration.json"))
    calibrate.add_argument("a", metavar="RUN", help="a judged run: " + RUN_HELP + " (of one model)")
    calibrate.add_argument("--labels", metavar="FILE", required=True,
                           help="JSONL of doc_id or question (and sample index with k samples) + label")
    calibrate.add_argument("--label-field", default="label", metavar="NAME",
                           help="the labels file's label field (default: label)")
    calibrate.add_argument("--json", action="store_true", help="print JSON (what leaderboard --calibration reads)")

    diff = sub.add_parser("diff", help="paired test of two runs on the same docs",
                          description="Compare two runs doc by doc (their samples files): the difference with a "
                                      "bootstrap 95% interval and McNemar's test, per task and metric; with k "
                                      "samples per problem, per-problem scores and a paired permutation test.",
                          epilog=example("mathjudge diff results/model_a results/model_b",
                                         "mathjudge diff results/k16_model_a results/k4_model_b --allow-mixed"))
    diff.add_argument("a", metavar="A", help="the first run: " + RUN_HELP + " (of one model)")
    diff.add_argument("b", metavar="B", help="the second run, as A")
    diff.add_argument("--metric", action="append", metavar="NAME", help="only this metric (repeatable)")
    diff.add_argument("--json", action="store_true", help="print JSON instead of the table")
    diff.add_argument("--allow-mixed", action="store_true",
                      help="compare runs with different samples per problem (repeats) anyway")
    _stats_args(diff)

    drift = sub.add_parser("drift", help="did the judge change its verdicts on the same responses?",
                           description="Compare two judgings of the same responses (a rerun, a rejudge, another "
                                       "snapshot behind the same alias): per metric, the verdicts flipped each way, "
                                       "the flip rate with a 95% interval, McNemar's exact test and the snapshots "
                                       "each judge's API reported; two different judges are said to be a judge "
                                       "comparison. With k samples per problem the interval and the test count "
                                       "problems. --canary re-judges a seeded sample of one run with the judge it "
                                       "recorded and compares it with the stored verdicts.",
                           epilog=example("mathjudge drift results/march results/june",
                                          "mathjudge drift --canary results/march --n 20 --seed 0",
                                          "mathjudge drift --canary results/march --judge openai:gpt-4o"))
    drift.add_argument("a", metavar="RUN_A", help="a judged run: " + RUN_HELP + " (of one model)")
    drift.add_argument("b", metavar="RUN_B", nargs="?", help="the same responses judged again (not with --canary)")
    drift.add_argument("--canary", action="store_true",
                       help="re-judge a seeded sample of RUN_A's docs with the judge RUN_A recorded (backend, "
                            "model, decoding; --judge/--metadata override it)")
    drift.add_argument("--n", type=int, default=20, metavar="N", help="--canary: docs per task (default 20)")
    drift.add_argument("--seed", type=int, default=0, help="--canary: which docs are drawn (default 0)")
    drift.add_argument("--metadata", default="{}", metavar="JSON",
                       help="--canary: judge settings as lm_eval --metadata JSON (the judge cache is off unless "
                            "judge_cache is set)")
    drift.add_argument("--judge", metavar="BACKEND[:MODEL]", help="--canary: shorthand for judge_backend / judge_model")
    drift.add_argument("--metric", action="append", metavar="NAME", help="only this metric (repeatable)")
    drift.add_argument("--json", action="store_true", help="print JSON instead of the table")

    agree = sub.add_parser("agreement", help="agreement of two judged runs, or of a run with labels",
                           description="How often two judges agree on the same samples (agreement, Cohen's "
                                       "kappa, confusion), or one judge with human labels (--labels).",
                           epilog=example("mathjudge agreement results/judge_a results/judge_b",
                                          "mathjudge agreement results/judge_a --labels labels.jsonl"))
    agree.add_argument("a", metavar="A", help="a judged run: " + RUN_HELP + " (of one model)")
    agree.add_argument("b", metavar="B", nargs="?", help="a second judged run of the same samples (or use --labels)")
    agree.add_argument("--labels", metavar="FILE", help="JSONL of doc_id or question + label, instead of B")
    agree.add_argument("--label-field", default="label", metavar="NAME",
                       help="the labels file's label field (default: label)")
    agree.add_argument("--disagreements", metavar="FILE", help="write the disagreeing samples here (JSONL)")
    agree.add_argument("--json", action="store_true", help="print JSON instead of the table")

    rejudge = sub.add_parser("rejudge", help="judge the samples of an earlier --log_samples run again",
                             description="Judge the responses of an earlier lm_eval --log_samples run again, "
                                         "with another judge, without running the model. The output is lm-eval's "
                                         "own results and samples files; lm-eval's result table is printed. "
                                         "Offline, set MATHJUDGE_DATA_DIR to the local data (the samples are "
                                         "matched to its docs by question text).",
                             epilog=example("mathjudge rejudge results/m/samples_gsm8k_gpt4em_*.jsonl --judge local "
                                            "--output_path rejudged",
                                            "mathjudge rejudge results/m/samples_*.jsonl --judge openai:gpt-4o "
                                            "--metadata '{\"judge_dry_run\": true}' --output_path rejudged"))
    rejudge.add_argument("samples", nargs="+", metavar="SAMPLES",
                         help="samples_<task>_<time>.jsonl files written by lm_eval --log_samples")
    rejudge.add_argument("--output_path", "--output-path", required=True, metavar="DIR",
                         help="folder for the new results and samples files (<DIR>/<model>/results_*.json)")
    rejudge.add_argument("--metadata", default="{}", metavar="JSON",
                         help="judge settings as lm_eval --metadata JSON, e.g. '{\"judge_budget_usd\": 5}'")
    rejudge.add_argument("--judge", metavar="BACKEND[:MODEL]", help="shorthand for judge_backend / judge_model")
    rejudge.add_argument("--tasks", metavar="TASKS",
                         help="comma-separated plugin tasks to judge as (default: same data set, GPT4-EM)")
    rejudge.add_argument("--name", metavar="NAME",
                         help="the model name the new results record and reports show (default: the original "
                              "run's)")

    audit = sub.add_parser("audit", help="how often the configured judge credits answers written to game it",
                           description="Send the judge answers written to fool it (a fixed battery per attack "
                                       "family) and report how often it credits them (false-positive rates).",
                           epilog=example("mathjudge audit --judge local",
                                          "mathjudge audit --tasks gsm8k_gpt4em --judge openai:gpt-4o --limit 5"))
    audit.add_argument("--tasks", help="comma-separated plugin tasks, or a judge (gpt4em, vlmjudge) for all its "
                                       "data sets (default: gpt4em)")
    audit.add_argument("--metadata", default="{}", metavar="JSON", help="judge settings as lm_eval --metadata JSON")
    audit.add_argument("--judge", metavar="BACKEND[:MODEL]", help="shorthand for judge_backend / judge_model")
    audit.add_argument("--limit", type=int, metavar="N",
                       help="answers per attack family and task (default: judge_audit_limit, 10)")
    audit.add_argument("--max-false-positive", type=float, metavar="RATE",
                       help="exit with 1 when any family's (or the overall) false-positive rate is above RATE")
    audit.add_argument("--output", metavar="FILE", help="also write the full report (every answer) as JSON here")
    audit.add_argument("--json", action="store_true", help="print the JSON report instead of the tables")


def _stats_args(parser) -> None:
    parser.add_argument("--iters", type=int, default=10_000, metavar="N", help="bootstrap resamples (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")


def run(args) -> int:
    command = {"leaderboard": _leaderboard, "diff": _diff, "drift": _drift, "agreement": _agreement, "calibrate": _calibrate,
               "rejudge": _rejudge,
               "audit": _audit}[args.command]
    # audit keeps its own exit codes (reports/audit.py: 1 above the rate, 2 error, 3 incomplete), a CI gate's
    return guarded(args.command, lambda: command(args), code=2 if args.command == "audit" else None)


def guarded(name: str, command, code: int | None = None) -> int:
    """Run a command; an error of ours ends it with one block and its documented exit code (core/errors.py),
    or ``code`` for every error when the command documents its own."""
    from ..core.errors import DEBUG_ENV, MathJudgeError, clean_report, exit_code

    try:
        return command()
    except MathJudgeError as exc:
        if os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
            import traceback

            traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.write(clean_report(exc, command=f"mathjudge {name}", code=code))
        return exit_code(exc) if code is None else code


def _leaderboard(args) -> int:
    from . import chart, html, leaderboard
    from .runs import load_runs

    from . import calibration

    cal = calibration.load(args.calibration) if args.calibration else None
    board = leaderboard.build(load_runs(args.runs), allow_mixed=args.allow_mixed, iters=args.iters, seed=args.seed,
                              calibration=cal)
    os.makedirs(args.out, exist_ok=True)
    files = {"leaderboard.md": leaderboard.to_markdown(board), "leaderboard.csv": leaderboard.to_csv(board),
             "leaderboard.svg": chart.svg(board), "leaderboard.html": html.render(board)}
    for name, text in files.items():
        with open(os.path.join(args.out, name), "w", encoding="utf-8") as fh:
            fh.write(text)
    written = [os.path.join(args.out, name) for name in files]
    try:
        chart.png(board, os.path.join(args.out, "leaderboard.png"))
        written.append(os.path.join(args.out, "leaderboard.png"))
    except chart.MissingMatplotlib as exc:
        print(f"mathjudge leaderboard: {exc}; the other files are written", file=sys.stderr)
    sys.stdout.write(leaderboard.to_markdown(board))
    print("\nwritten:\n" + "\n".join(f"  {os.path.normpath(path)}" for path in written))
    return 0


def _diff(args) -> int:
    from .leaderboard import fmt, fmt_p, md_text
    from .paired import compare_runs
    from .runs import ReportError, load_one

    a, b = load_one(args.a), load_one(args.b)
    found = compare_runs(a, b, args.metric, iters=args.iters, seed=args.seed, allow_mixed=args.allow_mixed)
    if not found:
        raise ReportError(f"{a.model} and {b.model} share no task with samples files (run lm_eval with --log_samples)")
    if args.json:
        print(json.dumps({"a": a.model, "b": b.model, "iters": args.iters, "seed": args.seed,
                          "comparisons": [c.as_dict() for c in found]}, indent=2))
        return 0
    print(f"A = {md_text(a.model)}\nB = {md_text(b.model)}\n")
    print("| task | metric | n | A | B | A - B [95% CI] | A better | B better | p | test |")
    print("|---|---|---:|---:|---:|---|---:|---:|---:|---|")
    for c in found:
        d = c.as_dict()
        print(f"| {md_text(c.task)} | {md_text(d['metric'])} | {c.n} | {fmt(c.a)} | {fmt(c.b)} | {fmt(c.diff)} "
              f"[{fmt(c.ci_low)}, {fmt(c.ci_high)}] | {c.a_only} | {c.b_only} | {md_text(fmt_p(c.p_value))} | "
              f"{c.test} |")
    return 0


def _drift(args) -> int:
    from . import drift
    from .leaderboard import fmt, fmt_p, md_text
    from .runs import ReportError, load_one

    if args.canary == (args.b is not None):
        raise ReportError("give two runs (mathjudge drift RUN_A RUN_B), or one run with --canary")
    a = load_one(args.a)
    if args.canary:
        found = drift.canary(a, _judge_metadata(args), n=args.n, seed=args.seed, metrics=args.metric)
    else:
        found = drift.compare_runs(a, load_one(args.b), args.metric)
    if args.json:
        print(json.dumps({"canary": args.canary, **({"n": args.n, "seed": args.seed} if args.canary else {}),
                          "same_judge": all(t.same_judge for t in found), "tasks": [t.as_dict() for t in found]},
                         indent=2))
        return 0
    for t in found:
        for name, side in (("A", t.a), ("B", t.b)):
            print(f"{name} = {md_text(side.run)}: {md_text(side.judge)}; snapshots "
                  f"{md_text(', '.join(side.snapshots) or 'none reported')}{' (alias)' if side.alias else ''}")
        if not t.same_judge:
            print(f"\n**DIFFERENT JUDGES** ({md_text(t.a.judge)} / {md_text(t.b.judge)}): a judge comparison, not "
                  "drift of one judge; `mathjudge agreement A B` reports how the two agree")
        print(f"\n{md_text(t.task)}: {t.responses} responses judged by both"
              + (f" ({t.k} samples per problem: the interval and the test count problems)" if t.k > 1 else "")
              + "\n")
        print(f"| metric | n | flips | A credited, B not | B credited, A not | flip rate [95% CI] | "
              f"{'McNemar p' if t.k == 1 else 'p (problems)'} |")
        print("|---|---:|---:|---:|---:|---|---:|")
        for m in t.metrics:
            print(f"| {md_text(m.as_dict()['metric'])} | {m.n} | {m.flips} | {m.lost} | {m.gained} | "
                  f"{fmt(m.flip_rate)} [{fmt(m.ci_low)}, {fmt(m.ci_high)}] | {md_text(fmt_p(m.p_value))} |")
        print(f"\n{md_text(t.conclusion())}\n")
    return 0


def _agreement(args) -> int:
    from . import agreement
    from .leaderboard import fmt, md_text
    from .runs import ReportError, load_one

    if (args.b is None) == (args.labels is None):
        raise ReportError("give either a second run B or --labels FILE")
    a = load_one(args.a)
    if args.labels:
        found, b_name = agreement.with_labels(a, args.labels, args.label_field), args.labels
    else:
        b = load_one(args.b)
        found, b_name = agreement.between_runs(a, b), b.model
    if args.disagreements:
        with open(args.disagreements, "w", encoding="utf-8") as fh:
            for item in (d for r in found for d in r.disagreements):
                fh.write(json.dumps(item, ensure_ascii=False) + "\n")
    result = agreement.report(a.model, b_name, found)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"A = {md_text(a.model)}\nB = {md_text(b_name)}\n")
    print("| task | metric | n | agreement | Cohen's kappa | confusion (A\\B) |")
    print("|---|---|---:|---:|---:|---|")
    for task, metrics in result["tasks"].items():
        for metric, m in metrics.items():
            confusion = "; ".join(f"{x}\\{y}: {n}" for x, row in m["confusion"].items() for y, n in row.items())
            print(f"| {md_text(task)} | {md_text(metric)} | {m['n']} | {fmt(m['agreement'])} | {fmt(m['kappa'])} "
                  f"| {confusion} |")
    return 0


def _calibrate(args) -> int:
    from . import agreement
    from .leaderboard import fmt, md_text
    from .runs import load_one

    a = load_one(args.a)
    result = agreement.report(a.model, args.labels, agreement.with_labels(a, args.labels, args.label_field))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"run = {md_text(a.model)}\nlabels = {md_text(args.labels)}\n")
    print("| task | metric | judge | n | sensitivity [95% CI] | specificity [95% CI] | left out: response differs, "
          "not in the run, judge failed |")
    print("|---|---|---|---:|---|---|---|")
    for task, metrics in result["tasks"].items():
        for metric, m in metrics.items():
            def rate(name: str, m=m) -> str:
                iv = m.get(f"{name}_interval") or {}
                return f"{fmt(m.get(name))} [{fmt(iv.get('ci_low'))}, {fmt(iv.get('ci_high'))}]"
            print(f"| {md_text(task)} | {md_text(metric)} | {md_text(str(m.get('judge')))} | {m['n']} | "
                  f"{rate('sensitivity')} | {rate('specificity')} | {m['excluded_response_differs']}, "
                  f"{m['excluded_not_in_run']}, {m['excluded_judge_failed']} |")
    return 0


def _rejudge(args) -> int:
    from .. import compat
    from .rejudge import rejudge

    metadata = _judge_metadata(args)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None

    def show(model: str, results: dict) -> None:  # lm-eval's own table, as lm_eval prints it
        print(f"{model}:\n{compat.result_table(results)}", flush=True)

    for path in rejudge(args.samples, args.output_path, metadata, tasks, name=args.name, show=show):
        print(f"written {path}")
    return 0


def _audit(args) -> int:
    from . import audit

    return audit.run(args, _judge_metadata(args))


def _judge_metadata(args) -> dict:
    """--metadata JSON, with --judge BACKEND[:MODEL] on top."""
    from ..core import jsontext
    from .runs import ReportError

    try:
        metadata = jsontext.loads(args.metadata)
    except json.JSONDecodeError as exc:
        raise ReportError(f"--metadata is not JSON ({exc.msg}): pass an object like "
                          "'{\"judge_backend\": \"local\"}'") from None
    if not isinstance(metadata, dict):
        raise ReportError("--metadata must be a JSON object")
    if args.judge:
        backend, _, model = args.judge.partition(":")
        metadata["judge_backend"] = backend  # the explicit flag wins over --metadata
        if model:
            metadata["judge_model"] = model
    return metadata
