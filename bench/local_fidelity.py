"""Fidelity of the offline rule (the ``local`` judge, the cascade's first stage) on labelled answers.

Every answer is judged exactly as a run judges it (``LocalBackend.complete``: the worker process, the
answer policy, math-verify); its outcome is correct, incorrect or undecided (the rule cannot tell: a
counted judge failure alone, the LLM judge's call in a cascade). Per labelled set it prints:

* ``false credits``: credited, but labelled wrong (or gamed, or undecidable);
* ``missed``: labelled right, not credited; of those, ``marked incorrect`` (the worse kind);
* ``undecided``: the share of the set the rule leaves to an LLM judge.

Sets (all shipped with the project unless named):

* ``gsm8k-100``: the quick start's 100 GPT-3 175B + verifier solutions with their upstream labels;
* ``mathverify``: Math-Verify's own 269 cases (``tests/data/mathverify``), the 256 whose expectation holds
  under the judge's settings, expected-equal and expected-different apart;
* ``probes``: the held-out probe set (``tests/probe_answers.py``): honest, gamed and undecidable answers;
* ``held-out``: the reviewer's probe set (``tests/heldout_answers.py``): honest (right), gamed (wrong), and
  answers the rule cannot compare, labelled by whether they are right;
* ``--solutions FILE``: ``example_model_solutions.jsonl`` of openai/grade-school-math (5,276 labelled
  solutions of four GPT-3 models); ``--forms`` also rewrites each final ``A: N`` line in five other endings;
* ``--references DIR``: the reference solutions of the full data sets (``DIR/<set>/test.jsonl``) against
  their own gold, as written and with a final boxed line added (all right by construction), and every gold
  of MATH-500 and Omni-MATH classified: parsed completely, words (matched word for word only), or not one
  value (every answer to it is undecided).

    python bench/local_fidelity.py [--solutions FILE [--forms]] [--references DIR] [--workers 2] [--show 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from lm_eval_mathjudge.backends.local import LOCAL_JUDGE_VERSION, LocalBackend  # noqa: E402
from lm_eval_mathjudge.core.errors import JudgeRefusal  # noqa: E402
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
Item = tuple[str, str, str, str, bool]  # (set, gold, response, question, label: right or not)


def rewrite(solution: str, form: str) -> str:
    work, _, final = solution.rstrip().rpartition("\nA: ")
    return FORMS[form].format(work=work, final=final.strip()) if work else solution


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def shipped_gsm8k() -> list[Item]:
    data = REPO / "examples" / "data"
    from lm_eval_mathjudge.core import data_sets

    gsm8k = data_sets.get("gsm8k")
    golds = [gsm8k.fields(r)[2] for r in read_jsonl(data / "gsm8k" / "test.jsonl")]
    return [("gsm8k-100", golds[r["doc_id"]], r["response"], r["question"], bool(r["is_correct"]))
            for r in read_jsonl(data / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl")]


def mathverify() -> list[Item]:
    from tests.mathverify_cases import NOT_DEFAULT, load, response_for

    return [(f"mathverify / expected {'equal' if c['expected'] else 'different'}", c["gold"],
             response_for(c["pred"]), "", bool(c["expected"])) for c in load() if c["id"] not in NOT_DEFAULT]


def probes() -> list[Item]:
    from tests.probe_answers import GAMED, HONEST, UNDECIDABLE

    items = [("probes / honest", g, r, "", True) for rows in HONEST.values() for g, r in rows]
    items += [("probes / gamed", g, r, "", False) for rows in GAMED.values() for g, r in rows]
    return items + [("probes / undecidable", g, r, "", False) for g, r in UNDECIDABLE]


def heldout() -> list[Item]:
    from tests.heldout_answers import GAMED, HONEST, HONEST_UNDECIDED, PROVED_DIFFERENT, UNDECIDABLE

    items = [("held-out / honest", g, r, "", True) for rows in HONEST.values() for g, r in rows]
    items += [("held-out / honest", g, r, "", True) for g, r in HONEST_UNDECIDED]
    items += [("held-out / gamed", g, r, "", False) for rows in GAMED.values() for g, r in rows]
    items += [("held-out / undecidable", g, r, "", right) for g, r, right in UNDECIDABLE]
    return items + [("held-out / proved different", g, r, "", False) for g, r in PROVED_DIFFERENT]


def solutions(path: Path, forms: bool) -> list[Item]:
    items = []
    for row in read_jsonl(path):
        gold = row["ground_truth"].rsplit("A:", 1)[-1].strip().replace(",", "")
        for model, value in row.items():
            if isinstance(value, dict) and "solution" in value and "is_correct" in value:
                for form in (FORMS if forms else ["as-written"]):
                    items.append((f"gpt3 {model} / {form}", gold, rewrite(value["solution"], form), "",
                                  bool(value["is_correct"])))
    return items


def references(data_dir: Path) -> list[Item]:
    """Every reference solution of the data sets that have one (the registry), as written and with a
    final line added."""
    from lm_eval_mathjudge.core import data_sets

    items = []
    for entry in (e for e in data_sets.BUILT_IN if e.has_solution):
        path = data_dir / entry.local_name / "test.jsonl"
        for row in read_jsonl(path) if path.is_file() else []:
            question, _, gold = entry.fields(row)
            solution = row[entry.solution]
            items.append((f"{entry.name} references / as written", gold, solution, question, True))
            items.append((f"{entry.name} references / final line added", gold,
                          f"{solution}\n\nTherefore, the final answer is $\\boxed{{{gold}}}$.", question, True))
    return items


def gold_shapes(data_dir: Path) -> dict[str, Counter]:
    """Each gold of MATH-500 and Omni-MATH: parsed completely, words, or not one value the rule can read."""
    from lm_eval_mathjudge.backends.local_math import Values
    from lm_eval_mathjudge.core.answers import gold_answer

    values, shapes = Values.load(), {}
    for name in ("math500", "omnimath"):
        path = data_dir / name / "test.jsonl"
        counts = shapes[name] = Counter()
        for row in read_jsonl(path) if path.is_file() else []:
            gold = gold_answer(str(row["answer"]))
            counts["not one value (undecided)" if gold is None else
                   "parsed completely" if values.value(gold) is not None else "words or unparsed (undecided "
                                                                               "unless matched word for word)"] += 1
    return shapes


def judge(backend: LocalBackend, item: Item) -> tuple[str, str]:
    _, gold, response, question, _ = item
    try:
        reply = backend.complete(JudgeRequest(prompt="", fields={"answer": gold, "response": response,
                                                                  "question": question}))
    except JudgeRefusal as exc:
        return ("undecided" if exc.kind == "undecided" else f"failed ({exc.kind})"), str(exc)
    verdict = parse_exact_match(reply.text)
    return ("correct" if verdict.correct else "incorrect"), verdict.analysis


def report(items: list[Item], outcomes: list[tuple[str, str]], show: int) -> None:
    rows: dict[str, Counter] = {}
    shown: list[str] = []
    for item, (outcome, why) in zip(items, outcomes):
        counts = rows.setdefault(item[0], Counter())
        label = item[4]
        counts["n"] += 1
        counts["right"] += label
        counts["credited"] += outcome == "correct"
        counts["false credits"] += outcome == "correct" and not label
        counts["missed"] += label and outcome != "correct"
        counts["marked incorrect"] += label and outcome == "incorrect"
        counts["undecided"] += outcome == "undecided"
        counts["failed"] += outcome.startswith("failed")
        if (outcome == "correct") != label and len(shown) < show:
            shown.append(f"--- {item[0]}: label {label}, gold {item[1]!r}, {outcome}: {why[:200]}\n{item[2][-300:]}")
    print(f"{'set':44s} {'n':>6s} {'right':>6s} {'credited':>9s} {'false cr.':>9s} {'missed':>7s} "
          f"{'(incorrect)':>11s} {'undecided':>10s}")
    for name, c in rows.items():
        print(f"{name:44s} {c['n']:6d} {c['right']:6d} {c['credited']:9d} {c['false credits']:9d} {c['missed']:7d} "
              f"{c['marked incorrect']:11d} {c['undecided'] / c['n']:10.1%}" + (f"  failed {c['failed']}" if c['failed']
                                                                                 else ""))
    for text in shown:
        print(f"\n{text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--solutions", type=Path, help="example_model_solutions.jsonl (openai/grade-school-math)")
    parser.add_argument("--forms", action="store_true", help="also judge each solution in five other endings")
    parser.add_argument("--references", type=Path, metavar="DATA_DIR", help="DATA_DIR/<set>/test.jsonl, full sets")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--show", type=int, default=5, help="disagreements with the labels to print")
    args = parser.parse_args()
    if args.solutions is not None and not args.solutions.is_file():
        parser.error(f"{args.solutions} is not a file (give example_model_solutions.jsonl)")
    items = shipped_gsm8k() + mathverify() + probes() + heldout()
    if args.solutions is not None:
        items += solutions(args.solutions, args.forms)
    if args.references is not None:
        items += references(args.references)
    backend = LocalBackend(workers=args.workers)
    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(args.workers) as pool:
            outcomes = list(pool.map(lambda item: judge(backend, item), items))
    finally:
        backend.close()
    print(f"local judge version {LOCAL_JUDGE_VERSION}, {len(items)} answers, {time.perf_counter() - started:.0f} s")
    report(items, outcomes, args.show)
    if args.references is not None:
        for name, counts in gold_shapes(args.references).items():
            print(f"\n{name} golds ({sum(counts.values())}): " + ", ".join(f"{v} {k}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
