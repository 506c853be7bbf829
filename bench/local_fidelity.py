"""Agreement of the local (math-verify) judge with independent human/auto labels.

Input: ``example_model_solutions.jsonl`` of GitHub ``openai/grade-school-math``
(``grade_school_math/data/``): every GSM8K test question with the solutions
of four GPT-3 models (6B/175B, fine-tuned/verifier), each with an
``is_correct`` label. Every solution is judged by the local judge exactly as a
run does (``LocalBackend.complete`` and the exact-match parser) and the verdict
is compared with the label.

    python bench/local_fidelity.py PATH/example_model_solutions.jsonl [--workers 2] [--show 10]

Prints agreement per model and overall, and the first ``--show`` disagreements. ``--forms``
also judges every solution with its final ``A: N`` line rewritten the way other models end
their answers (a box, a box after a restating sentence, "The answer is N.", ``#### N``, the
Minerva sentence): the label still holds, so agreement should not move.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from lm_eval_mathjudge.backends.local import LOCAL_JUDGE_VERSION, LocalBackend  # noqa: E402
from lm_eval_mathjudge.parsing import parse_exact_match  # noqa: E402
from lm_eval_mathjudge.types import JudgeRequest  # noqa: E402


FORMS = {
    "as-written": "{work}\nA: {final}",
    "box": "{work}\n\\boxed{{{final}}}",
    "sentence-and-box": "{work}\nSo the answer is ${final}.\n\n\\boxed{{{final}}}",
    "the-answer-is": "{work}\nThe answer is {final}.",
    "hashes": "{work}\n#### {final}",
    "minerva": "{work}\nFinal Answer: The final answer is ${final}$. I hope it is correct.",
}


def rewrite(solution: str, form: str) -> str:
    """The solution with its final "A: N" line in another form (unchanged if it has none)."""
    work, _, final = solution.rstrip().rpartition("\nA: ")
    return FORMS[form].format(work=work, final=final.strip()) if work else solution


def labelled(path: Path) -> list[tuple[str, str, str, bool]]:
    """(model, gold, solution, is_correct) for every labelled solution in the file."""
    items = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            row = json.loads(line)
            gold = row["ground_truth"].rsplit("A:", 1)[-1].strip().replace(",", "")
            for model, value in row.items():
                if isinstance(value, dict) and "solution" in value and "is_correct" in value:
                    items.append((model, gold, value["solution"], bool(value["is_correct"])))
    return items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", type=Path, help="example_model_solutions.jsonl")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--show", type=int, default=10, help="disagreements to print")
    parser.add_argument("--forms", action="store_true", help="also judge each solution in other final forms")
    args = parser.parse_args()
    if not args.path.is_file():
        parser.error(f"{args.path} is not a file")
    items = labelled(args.path)
    if args.forms:
        items = [(f"{model} / {form}", gold, rewrite(solution, form), label)
                 for form in FORMS for model, gold, solution, label in items]
    backend = LocalBackend(workers=args.workers)
    started = time.perf_counter()

    def verdict(item):
        _, gold, solution, _ = item
        reply = backend.complete(JudgeRequest(prompt="", fields={"answer": gold, "response": solution}))
        return parse_exact_match(reply.text)

    try:
        with ThreadPoolExecutor(args.workers) as pool:
            verdicts = list(pool.map(verdict, items))
    finally:
        backend.close()
    per_model: dict[str, list[int]] = {}
    wrong = []
    for item, found in zip(items, verdicts):
        model, gold, solution, label = item
        counts = per_model.setdefault(model, [0, 0])
        counts[0] += found.correct == label
        counts[1] += 1
        if found.correct != label:
            wrong.append((model, gold, label, found.analysis, solution))
    print(f"local judge version {LOCAL_JUDGE_VERSION}, {len(items)} solutions, "
          f"{time.perf_counter() - started:.0f} s")
    for model, (agree, total) in per_model.items():
        print(f"  {model:36s} {agree}/{total} agree ({agree / total:.2%})")
    agree = sum(a for a, _ in per_model.values())
    print(f"  {'all':36s} {agree}/{len(items)} agree ({agree / len(items):.2%})")
    for model, gold, label, analysis, solution in wrong[:args.show]:
        print(f"\n--- {model}: label {label}, gold {gold}\n{analysis}\n{solution[-400:]}")


if __name__ == "__main__":
    main()
