"""The wrong reference of the counterfactual re-check (core/counterfactual.py), from the real golds.

Every gold of the five data sets (the shared copies) gets a wrong reference whose final answer differs
from the gold, stated consistently (every place the reference stated the gold, its last box, or an
answer line it ends with), or a counted refusal; a sample of them is checked by math-verify to differ
in VALUE, not only in form. Then a table of hand cases per kind of gold.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from lm_eval_mathjudge.core import counterfactual as cf
from lm_eval_mathjudge.core import data_sets
from tests.conftest import SHARED_DATA
from tests.e2e import boxed

# Refusals measured on the shared copies (data set -> golds refused of all): words, symbols, trigonometric,
# log, floor and mod golds. A change in the rule that refuses more must say so here.
MAX_REFUSED = {"gsm8k": 0, "math500": 6, "aime24": 0, "aime25": 0, "omnimath": 32}


def _golds(name: str) -> list[tuple[str, str]]:
    entry = data_sets.get(name)
    path = SHARED_DATA / entry.local_name / "test.jsonl"
    if not path.exists():
        pytest.skip(f"no {path} (set MJ_TEST_DATA to the shared data folder)")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [entry.fields(row)[1:] for row in rows]


@pytest.mark.parametrize("name", list(MAX_REFUSED))
def test_every_gold_gets_a_wrong_reference_or_a_counted_refusal(name):
    refused: Counter = Counter()
    golds = _golds(name)
    for reference, gold in golds:
        built = cf.wrong_reference(reference, gold)
        if built.refused is not None:
            assert built.answer is None and built.reference is None
            refused[built.refused] += 1
            continue
        assert built.answer != cf._unwrapped(gold) and built.reference != reference, gold
        assert built.answer in built.reference
        last = boxed(built.reference)
        if last is not None:
            assert last == built.answer, (gold, last)  # the box states the wrong answer
        final_line = built.reference.rstrip().splitlines()[-1]
        if final_line.startswith("Final answer:"):
            assert final_line == f"Final answer: {built.answer}"
        assert cf.wrong_reference(reference, gold) == built  # the same gold, the same request: cacheable
    assert sum(refused.values()) <= MAX_REFUSED[name], refused
    if MAX_REFUSED[name] == 0 and len(golds) >= 30:
        assert not refused


@pytest.mark.parametrize("name", list(MAX_REFUSED))
def test_wrong_answers_differ_in_value(name):
    """math-verify (which accepts equal values in other forms) says the wrong answer is not the gold; where
    its float tolerance calls two huge or tiny numbers equal, sympy's exact arithmetic decides."""
    math_verify = pytest.importorskip("math_verify")
    import sympy

    golds = _golds(name)[::7]  # every 7th gold: the whole table runs in seconds
    checked = 0
    for _, gold in golds:
        wrong, _why = cf.wrong_answer(gold)
        if wrong is None or re.search(r"(?<![\\A-Za-z])[A-Za-z]{4,}", gold):  # a sentence: parsed as one number
            continue
        g = math_verify.parse(f"${cf._unwrapped(gold)}$", parsing_timeout=None)
        w = math_verify.parse(f"${wrong}$", parsing_timeout=None)
        if not g or not w:
            continue
        checked += 1
        if math_verify.verify(g, w, timeout_seconds=None):
            a, b = g[0], w[0]
            assert isinstance(a, sympy.Expr) and isinstance(b, sympy.Expr), (gold, wrong)
            assert sympy.simplify(a - b) != 0, (gold, wrong)
    assert checked >= len(golds) // 2


GSM8K_REF = "Half of 1,000 is 500.\nShe earns 500 + 25 = 525 dollars.\nFinal answer: 525"
CASES = [
    # (gold, reference, what the wrong answer must look like, what the wrong reference must hold)
    ("525", GSM8K_REF, r"52\d", ["Final answer: {w}", "= {w} dollars"]),
    ("1000", "It costs 1,000 dollars.\nFinal answer: 1000", r"100\d", ["costs {w} dollars", "Final answer: {w}"]),
    ("25", "so $m+n=\\boxed{025}$.", r"2\d", ["\\boxed{{{w}}}"]),
    ("\\frac{14}{3}", "Thus $x = \\frac{14}{3}$, so the answer is $\\boxed{\\frac{14}{3}}$.", r"\\frac\{14\}\{\d\}",
     ["x = {w}", "\\boxed{{{w}}}"]),
    ("\\dfrac{17}{50}", "The probability is $\\boxed{\\frac{17}{50}}$.", r"\\dfrac\{17\}\{5\d\}", ["\\boxed{{{w}}}"]),
    ("(6,31,-1)", "So $(a,b,c) = \\boxed{(6,31,-1)}$.", r"\(6,31,-\d\)", ["\\boxed{{{w}}}"]),
    ("3\\sqrt{13}", "The distance is $\\boxed{3\\sqrt{13}}$.", r"3\\sqrt\{1\d\}", ["\\boxed{{{w}}}"]),
    ("90^\\circ", "The angle is $\\boxed{90^\\circ}$.", r"9\d\^\\circ", ["\\boxed{{{w}}}"]),
    (".35625", "which is $\\boxed{.35625}$", r"\.3562\d", ["\\boxed{{{w}}}"]),
    ("\\text{(C)}", "The answer is $\\boxed{\\text{(C)}}$.", r"\\text\{\(D\)\}", ["\\boxed{{{w}}}"]),
    ("E", "So the answer is $\\boxed{E}$.", r"A", ["\\boxed{{{w}}}"]),
    ("Yes", "Yes, it can be done.", r"No", ["{w}, it can be done."]),
    ("204", "It takes $180 + 24 = 204$ minutes.", r"20\d", ["= {w}$ minutes"]),  # no box: the number replaced
    ("3", "The disc can be covered by three hexagons.", r"\d", ["Final answer: {w}"]),  # stated nowhere: a line added
    ("The final answer is 70. (No worked solution is available.)".split()[4].rstrip("."),
     data_sets.answer_only("70"), r"7\d", ["The final answer is {w}."]),
    ("p - q", "So the answer is $\\boxed{p - q}$.", r"p \+ q", ["\\boxed{{{w}}}"]),
    ("\\pi", "The area is $\\boxed{\\pi}$.", r"2\\pi", ["\\boxed{{{w}}}"]),
    ("\\[\n\\binom{n}{2}\n\\]", "Hence $\\boxed{\\binom{n}{2}}$ pairs.", r"\\binom\{n\}\{\d\}", ["\\boxed{{{w}}}"]),
]


@pytest.mark.parametrize("gold, reference, looks, holds", CASES, ids=[c[0][:20] for c in CASES])
def test_wrong_reference_by_kind_of_gold(gold, reference, looks, holds):
    built = cf.wrong_reference(reference, gold)
    assert built.refused is None and re.fullmatch(looks, built.answer), built
    assert built.answer != cf._unwrapped(gold)
    for text in holds:
        assert text.format(w=built.answer) in built.reference, (text, built.reference)


def test_a_short_gold_changes_only_where_the_final_answer_is_stated():
    reference = "Let x = 2 and y = 3.\nThen 2x = 4.\nSo the answer is 4.\n$\\boxed{4}$"
    built = cf.wrong_reference(reference, "4")
    assert built.reference.startswith("Let x = 2 and y = 3.\nThen 2x = 4.\n")  # an earlier step stays
    assert f"So the answer is {built.answer}." in built.reference and boxed(built.reference) == built.answer


def test_a_long_gold_changes_everywhere_the_reference_states_it():
    built = cf.wrong_reference("We get 1,234 apples; 1234 apples in all.\nFinal answer: 1234", "1234")
    assert "1,234" not in built.reference and "1234" not in built.reference.replace(built.answer, "")


@pytest.mark.parametrize("gold", ["\\infty", "\\text{Evelyn}", "\\cot x", "\\sin 30^\\circ",
                                  "\\log_2 8", "1^{n}", "\\lfloor \\frac{n}{2} \\rfloor", "672 \\pmod{1000}", "",
                                  "\\mathbb{Z}"])
def test_golds_without_a_safe_change_are_refused(gold):
    built = cf.wrong_reference(f"So the answer is $\\boxed{{{gold}}}$.", gold)
    assert built.refused and built.answer is None and built.reference is None


@pytest.mark.parametrize("gold", ["\\frac{3}{9}", "\\frac{1}{1}", "10", "0", "9", "-9", "0.9"])
def test_no_literal_becomes_a_zero_it_was_not(gold):
    """A denominator stays one: the changed literal is never a new zero (nor the old value)."""
    for offset in range(1, 10):
        literal = re.findall(r"\d+(?:\.\d+)?", gold)[-1]
        new = cf._changed(literal, offset)
        assert new != literal and (float(new) != 0 or float(literal) == 0)


def test_wrong_doc_replaces_reference_and_answer_together():
    doc = {"mj_question": "q", "mj_reference": GSM8K_REF, "mj_answer": "525", "other": 1}
    wrong, built = cf.wrong_doc(doc)
    assert wrong["mj_answer"] == built.answer and wrong["mj_reference"] == built.reference and wrong["other"] == 1
    assert cf.wrong_doc({**doc, "mj_answer": "\\infty"})[0] is None
