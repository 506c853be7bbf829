"""Math-Verify's own test cases (``tests/data/mathverify``) as the offline judge sees them.

Each case becomes one answer: the prediction is the response, put in a box when it is a bare value
(``7,425,000``, ``$\\frac13 $``, ``28 pct``); a prediction that is a sentence or a worked solution is
judged as written (boxing a paragraph would make it no answer at all).

``NOT_DEFAULT``: the 13 cases whose expectation rests on a math-verify setting other than the ones the
judge uses, or on a math-verify parser quirk; they are left out of the measure. ``POLICY``: expected-equal
cases the judge does not credit on purpose, with the rule of the answer policy that decides them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

CASES = Path(__file__).parent / "data" / "mathverify" / "cases.jsonl"
_WORD = re.compile(r"(?<![A-Za-z\\])[A-Za-z]{3,}")
_COMMAND = re.compile(r"\\[A-Za-z]+(?:\s*\{[^{}]*\})?")

NOT_DEFAULT = {
    "test_all.py::test_number_extraction[5]": "a decimal comma (1000,99), read so only by expression-only matching",
    "test_all.py::test_number_extraction[6]": "a decimal comma (1,22), read so only by expression-only matching",
    "test_all.py::test_number_extraction[7]": "a decimal comma (2,74) in a French sentence, expression-only matching",
    "test_all.py::test_number_extraction[17]": "a decimal comma (0,111), read so only by expression-only matching",
    "test_all.py::test_complex_math_expressions[7]": "precision 2: 0.33 for 1/3",
    "test_all.py::test_complex_math_expressions[13]": "precision 2: 2.6667 for 8/3",
    "test_all.py::test_set_rel_assymetry[0]": "allow_set_relation_comp=True",
    "test_all.py::test_set_rel_assymetry[2]": "allow_set_relation_comp=True",
    "test_all.py::test_float_precision[0]": "precision 5: sqrt(17) for 4.123105625617661",
    "test_strict.py::test_strict_variable_comparison[1]": "strict=False: f(x) and f(y) equal",
    "test_yujianll.py::test_string_extraction[9]": "parser quirk: 1 - 1/e and 1 + 1/e equal ("
                                                   "\\mathrm{e} dropped as a unit)",
    "test_all.py::test_latex_notation[5]": "parser quirk: an answer on its own line inside $...$ is not read",
    "test_all.py::test_latex_notation[6]": "parser quirk: an answer on its own line inside \\(...\\) is not read",
}

POLICY = {
    "test_all.py::test_latex_notation[4]": "a numeric gold gets a number: (9+1) is an unevaluated expression",
    "test_all.py::test_relations_math[15]": "an approximation alone is a hedge: x \\approx 11",
    "test_all.py::test_latex_notation_math[3]": "no box; notes after the working state other numbers",
    "test_all.py::test_math_extraction_edge_cases[5]": "after the boxed answer a second solution starts",
    "test_all.py::test_math_extraction_additional_cases[9]": "the boxed answer is hedged ('approximately')",
    "test_all.py::test_math_extraction_additional_cases[17]": "two boxes and a final line with three values",
    "test_boxed.py::test_boxed[0]": "a gold of two boxes joined by '++++++': not one value",
    "test_numina_cases.py::test_numina_cases[24]": "a gold whose box is never closed: not one value",
}


def load() -> list[dict]:
    return [json.loads(line) for line in CASES.read_text(encoding="utf-8").splitlines() if line.strip()]


def response_for(pred: str) -> str:
    """The prediction as a model's answer: boxed when it is a bare value, as written otherwise."""
    from lm_eval_mathjudge.core.answers.gold import unwrap

    value = unwrap(pred)
    if "\\boxed" in pred or any(d in value for d in ("$", "\\(", "\\[")):
        return pred
    delimited = value != pred.strip()
    if not delimited and _WORD.search(_COMMAND.sub(" ", value)):
        return pred  # a sentence
    return f"$\\boxed{{{value}}}$"
