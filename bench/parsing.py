"""Reply-parser time on adversarial replies of a given size (default 1 MB).

Each case is one judge reply built to hurt a line scanner: one huge line of a
markdown character that a label's optional prefix accepts (the shapes that made
the old parser quadratic), many short label-like lines, unclosed reasoning
tags, lone surrogates. Every case is parsed by both parsers; the figure is the
best of ``--repeat`` runs (a parse normally ends in ``UnparseableReply``).

    python bench/parsing.py [--size 1000000] [--repeat 3]
    python bench/parsing.py --size 16000 --ref ad924ed   # the parser of a git revision, for comparison

``--ref`` loads ``lm_eval_mathjudge/core/parsing.py`` from that revision (each case
in a subprocess, killed after ``--timeout`` seconds: a quadratic parser on
1 MB takes minutes).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def cases(size: int) -> dict[str, str]:
    def line(unit: str) -> str:
        return (unit * (size // len(unit) + 1))[:size]

    wrap = "Error Analysis: the answer 18 matches.\n{}\nFinal Verdict: Correct"
    return {
        "spaces": line(" "),
        "stars": line("*"),
        "underscores": line("_"),
        "backticks": line("`"),
        "tabs": line("\t"),
        "quote marks": line(">"),
        "hashes": line("#"),
        "digits": line("7"),
        "mixed emphasis": line("* _ `"),
        "label + spaces": "Final Verdict:" + line(" "),
        "label + spaces (vlm)": "FINAL_CORRECT:" + line(" "),
        "'final ' repeated": line("final "),
        "'final verdict' repeated": line("final verdict "),
        "'FINAL_CORRECT: 1' repeated": line("FINAL_CORRECT: 1 "),
        "unclosed <think> repeated": line("<think>"),
        "orphan </think> repeated": line("</think>"),
        "newlines": line("\n"),
        "quoted lines": line("> Final Verdict: Correct\n"),
        "agreeing verdict lines": line("Final Verdict: Correct\n"),
        "fence lines": line("```\n"),
        "lone surrogates": line("\ud800"),
        "spaces inside a reply": wrap.format(line(" ")),
        "stars inside a reply": wrap.format(line("*")),
    }


def load_parsing(path: Path):
    spec = importlib.util.spec_from_file_location("_bench_parsing", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def time_case(parsing, text: str, repeat: int) -> dict[str, float]:
    figures = {}
    for name in ("parse_exact_match", "parse_vlm"):
        parser = getattr(parsing, name)
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            try:
                parser(text)
            except parsing.UnparseableReply:
                pass
            best = min(best, time.perf_counter() - start)
        figures[name] = best * 1000
    return figures


def run_ref(ref: str, name: str, size: int, repeat: int, timeout: float) -> dict[str, float] | None:
    source = subprocess.run(["git", "show", f"{ref}:lm_eval_mathjudge/core/parsing.py"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    old = REPO / "bench" / f".parsing_{ref}.py"
    old.write_text(source)
    try:
        done = subprocess.run([sys.executable, __file__, "--one", name, "--size", str(size), "--repeat",
                               str(repeat), "--module", str(old)], capture_output=True, text=True,
                              timeout=timeout, cwd=REPO)
        return json.loads(done.stdout)
    except subprocess.TimeoutExpired:
        return None
    finally:
        old.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1_000_000, help="characters per reply")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ref", help="also time the parser of this git revision")
    parser.add_argument("--timeout", type=float, default=60.0, help="per case of --ref, seconds")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--module", type=Path, default=REPO / "lm_eval_mathjudge" / "parsing.py",
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    parsing = load_parsing(args.module)
    if args.one:
        print(json.dumps(time_case(parsing, cases(args.size)[args.one], args.repeat)))
        return
    print(f"reply size: {args.size:,} characters; best of {args.repeat}; times in ms")
    header = "| case | exact match | VLM |" + (f" {args.ref} exact match | {args.ref} VLM |" if args.ref else "")
    print(header)
    print("|---|---:|---:|" + ("---:|---:|" if args.ref else ""))
    worst = 0.0
    for name, text in cases(args.size).items():
        now = time_case(parsing, text, args.repeat)
        worst = max(worst, *now.values())
        row = f"| {name} | {now['parse_exact_match']:.1f} | {now['parse_vlm']:.1f} |"
        if args.ref:
            old = run_ref(args.ref, name, args.size, 1, args.timeout)
            row += (f" {old['parse_exact_match']:.0f} | {old['parse_vlm']:.0f} |" if old
                    else f" > {args.timeout:g} s | (killed) |")
        print(row, flush=True)
    print(f"slowest: {worst:.1f} ms")


if __name__ == "__main__":
    main()
