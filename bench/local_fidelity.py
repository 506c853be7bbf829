"""Agreement of the local (math-verify) judge with independent human/auto labels.

Input: ``example_model_solutions.jsonl`` of GitHub ``openai/grade-school-math``
(``grade_school_math/data/``): every GSM8K test question with the solutions
of four GPT-3 models (6B/175B, fine-tuned/verifier), each with an
``is_correct`` label. Every solution is judged by the local judge exactly as a
run does (``LocalBackend.complete`` and the exact-match parser) and the verdict
is compared with the label.

    python bench/local_fidelity.py PATH/example_model_solutions.jsonl [--workers 2] [--show 10] [--forms]
    python bench/local_fidelity.py --references DATA_DIR    # DATA_DIR/<set>/test.jsonl, full sets

``--references`` judges the reference solutions of GSM8K, MATH-500, Omni-MATH and AIME 2024
(written by people: working, the answer, sometimes remarks or a second method after it) against
their own gold answers, as written and with a model-style final line added ("Therefore, the
final answer is $\\boxed{...}$."), and counts how many are credited.

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
from lm_eval_mathjudge.core.errors import JudgeCallError  # noqa: E402
from lm_eval_mathjudge.core.parsing import parse_exact_match  # noqa: E402
from lm_eval_mathjudge.core.types import JudgeRequest  # noqa: E402


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


def references(data_dir: Path) -> list[tuple[str, str, str, str, bool]]:
    """(set / form, gold, solution, question, True) for every reference solution found (the data sets
    with worked solutions, each solution as the data set gives it)."""
    from lm_eval_mathjudge.core import data_sets

    items = []
    for entry in (e for e in data_sets.BUILT_IN if e.has_solution):
        name, path = entry.name, data_dir / entry.local_name / "test.jsonl"
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            question, _, gold = entry.fields(row)
            solution = row[entry.solution]
            for form, text in (("as written", solution),
                               ("final line added", f"{solution}\n\nTherefore, the final answer is $\\boxed{{{gold}}}$.")):
                items.append((f"{name} / {form}", gold, text, question, True))
    return items


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
    parser.add_argument("path", type=Path, nargs="?", help="example_model_solutions.jsonl")
    parser.add_argument("--references", type=Path, metavar="DATA_DIR",
                        help="judge the data sets' reference solutions instead (DATA_DIR/<set>/test.jsonl)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--show", type=int, default=10, help="disagreements to print")
    parser.add_argument("--forms", action="store_true", help="also judge each solution in other final forms")
    args = parser.parse_args()
    if args.references is not None:
        items = references(args.references)
        if not items:
            parser.error(f"no <set>/test.jsonl under {args.references}")
    elif args.path is None or not args.path.is_file():
        parser.error(f"{args.path} is not a file (give example_model_solutions.jsonl, or --references DIR)")
    else:
        items = [(model, gold, solution, "", label) for model, gold, solution, label in labelled(args.path)]
    if args.forms:
        items = [(f"{model} / {form}", gold, rewrite(solution, form), question, label)
                 for form in FORMS for model, gold, solution, question, label in items]
    backend = LocalBackend(workers=args.workers)
    started = time.perf_counter()

    def verdict(item):
        """The verdict, or None when the judge failed on the item (a timeout: a counted failure in a run)."""
        _, gold, solution, question, _ = item
        try:
            reply = backend.complete(JudgeRequest(prompt="", fields={"answer": gold, "response": solution,
                                                                      "question": question}))
        except JudgeCallError:
            return None
        return parse_exact_match(reply.text)

    try:
        with ThreadPoolExecutor(args.workers) as pool:
            verdicts = list(pool.map(verdict, items))
    finally:
        backend.close()
    per_model: dict[str, list[int]] = {}
    wrong = []
    failed = 0
    for item, found in zip(items, verdicts):
        model, gold, solution, _, label = item
        counts = per_model.setdefault(model, [0, 0])
        correct = found is not None and found.correct
        counts[0] += correct == label
        counts[1] += 1
        failed += found is None
        if correct != label:
            wrong.append((model, gold, label, found.analysis if found else "(judge failure)", solution))
    what = "credited" if args.references is not None else "agree"
    print(f"local judge version {LOCAL_JUDGE_VERSION}, {len(items)} solutions, "
          f"{time.perf_counter() - started:.0f} s, {failed} judge failures (timeouts)")
    for model, (agree, total) in per_model.items():
        print(f"  {model:36s} {agree}/{total} {what} ({agree / total:.2%})")
    agree = sum(a for a, _ in per_model.values())
    print(f"  {'all':36s} {agree}/{len(items)} {what} ({agree / len(items):.2%})")
    for model, gold, label, analysis, solution in wrong[:args.show]:
        print(f"\n--- {model}: label {label}, gold {gold}\n{analysis}\n{solution[-400:]}")


if __name__ == "__main__":
    main()
