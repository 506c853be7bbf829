"""Two single values compared by math-verify, with a third answer: cannot tell (runs in the worker process).

The answer policy (``core.answers``) finds the response's one final answer; this module says
whether it equals the gold value: True (proved equal), False (proved different) or None (the
rule cannot tell, so it must not decide). Parsing and comparison are math-verify's own
(``parse`` with a ``LatexExtractionConfig`` target, ``verify``); the policy on top:

* **Parsed completely or not at all.** A value is parsed only when math-verify's extraction
  covers all of it (the text it extracted is the whole value after its own normalisation): a
  gold cut short (``1 - \\frac{1}{\\mathrm{e}}`` read as ``1``) is no gold. A value that is words
  (``\\text{Evelyn}``, ``odd``, a sentence) is never parsed: words match only word for word.
* **Equal only when proved.** ``verify`` at math-verify's precision (6 digits) AND at 12 digits,
  so two values that agree only after rounding (``3.1415927`` for ``\\pi``) are not credited.
  An equation stays an equation: a number never matches it unless it is an assignment
  (``k = 1`` and ``1``).
* **Different only when proved.** Closed numbers whose difference is clear at 30 digits, the
  same for the elements of tuples, sets, intervals and matrices, and expressions or equations
  in the same variables that differ at several whole-number points. Anything else is None.

Every step is bounded by the worker's time and memory limits (``local_worker``), not here.
"""

from __future__ import annotations

import random
import re
from functools import lru_cache
from typing import Any

from ..core.answers.gold import text_key, unwrap

_CONSTANTS = re.compile(r"\\(?:mathrm|text|textrm|mathit|operatorname)\s*\{\s*([ei])\s*\}")  # roman e, i: constants
_SPACED_THOUSANDS = re.compile(r"^-?\d{1,3}(?:(?:[ \u00a0\u202f~]|\\[,;: !]|\{,\}|,\\!|\\,)+\d{3})+(?:\.\d+)?$")
_THOUSANDS_GAP = re.compile(r"(?:[ \u00a0\u202f~]|\\[,;: !]|\{,\}|,\\!|\\,)+")
_ENVIRONMENT = re.compile(r"\\(?:begin|end)\s*\{[a-zA-Z*]+\}")
_TEXT_GROUP = re.compile(r"\\text\s*\{([^{}]*)\}")
_COMMAND = re.compile(r"\\[A-Za-z]+")
_INDEX = re.compile(r"[_^]\s*\{[^{}]*\}")  # S_{MBCN}: a name, not a word
_LONG_WORD = re.compile(r"[A-Za-z]{3,}")
_ONLY_LETTERS = re.compile(r"[A-Za-z][A-Za-z ]*[A-Za-z]")
_SAME_DIGITS = 12  # verify again at this precision: equal after rounding to 6 digits only is not proved
_CLOSE = 1e-9  # relative: closed numbers this close are equal (30-digit evaluation)
_NEAR = 1e-2  # relative: a decimal this close to an exact value is a rounding, not a clear difference
_POINTS = 3  # points at which two expressions are evaluated to prove them different


def _prepared(text: str) -> str:
    value = _CONSTANTS.sub(r"\1", unwrap(text))
    if _SPACED_THOUSANDS.match(value):  # 1 000, 1\,000, 1~000: one number (LaTeX reads a product)
        value = _THOUSANDS_GAP.sub("", value)
    return value.replace("$", "")


def is_words(normalised: str) -> bool:
    """Words, not mathematics: a \\text group with a word in it, a run of three letters outside a
    command or an environment name, or nothing but letters ("no", "odd")."""
    if any(re.search(r"[A-Za-z]{2}", group) for group in _TEXT_GROUP.findall(normalised)):
        return True
    if _ONLY_LETTERS.fullmatch(normalised.strip()):
        return True
    bare = _COMMAND.sub(" ", _ENVIRONMENT.sub(" ", _INDEX.sub(" ", _TEXT_GROUP.sub(" ", normalised))))
    return _LONG_WORD.search(bare) is not None


class Values:
    """math-verify's parse and verify, given as functions (the worker imports math-verify once)."""

    def __init__(self, parse, verify, latex_config, normalize, grader):
        self._parse, self._verify, self._config = parse, verify, latex_config
        self._normalize, self._grader = normalize, grader
        self.value = lru_cache(maxsize=256)(self._value)

    @classmethod
    def load(cls) -> Values:
        import math_verify.grader as grader
        from latex2sympy2_extended.latex2sympy2 import normalize_latex
        from math_verify import LatexExtractionConfig, parse, verify

        return cls(parse, verify, LatexExtractionConfig(boxed_match_priority=0), normalize_latex, grader)

    def _value(self, text: str) -> Any:
        """The value parsed completely (a sympy object), or None: not parsed, parsed in part, or words."""
        value = _prepared(text)
        if not value or "\n\n" in value:
            return None
        normalised = self._normalize(value, self._config.normalization_config)
        if is_words(normalised):
            return None
        found = self._parse(f"$${value}$$", [self._config], fallback_mode="first_match", parsing_timeout=None)
        if len(found) != 2 or not isinstance(found[1], str) or found[1] != normalised:
            return None  # nothing parsed, or the extraction covers only part of the value
        parsed = found[0]
        if getattr(parsed, "has", None) is not None and parsed.has(*self._undefined()):
            return None  # 12:00 is not 12/0
        return parsed

    @staticmethod
    @lru_cache(maxsize=1)
    def _undefined() -> tuple:
        import sympy

        return sympy.zoo, sympy.nan

    def compare(self, gold: str, answer: str) -> bool | None:
        """True: proved equal; False: proved different; None: the rule cannot tell."""
        if text_key(gold) == text_key(answer):
            return True
        g, p = self.value(gold), self.value(answer)
        if g is None or p is None:
            return None
        if self._reduces_an_equation(g, p):
            return None
        if self._verify(g, p, timeout_seconds=None):
            return True if self._verify(g, p, float_rounding=_SAME_DIGITS, timeout_seconds=None) else None
        return False if different(g, p, self._grader) else None

    def _reduces_an_equation(self, gold: Any, answer: Any) -> bool:
        """math-verify reads an answer equation against a gold that is not one by its right side
        (``a + b = 5`` against ``5``); only an assignment (``x = 5``) may be read that way."""
        grader = self._grader
        return grader.is_equation(answer) and not grader.is_equation(gold) and \
            not grader.is_assignment_relation(answer)


# ---------------------------------------------------------------------- proving a difference

def different(gold: Any, answer: Any, grader: Any) -> bool:
    """True only when the two parsed values are certainly different."""
    import sympy

    try:
        if isinstance(gold, sympy.MatrixBase) and isinstance(answer, sympy.MatrixBase):
            return gold.shape != answer.shape or _elements_differ(list(gold), list(answer))
        if isinstance(gold, sympy.Tuple) and isinstance(answer, sympy.Tuple):
            return len(gold) != len(answer) or _elements_differ(list(gold), list(answer))
        if isinstance(gold, sympy.FiniteSet) and isinstance(answer, sympy.FiniteSet):
            return _sets_differ(list(gold), list(answer))
        if isinstance(gold, sympy.Interval) and isinstance(answer, sympy.Interval):
            return (gold.left_open, gold.right_open) != (answer.left_open, answer.right_open) or \
                _elements_differ([gold.start, gold.end], [answer.start, answer.end])
        if grader.is_equation(gold) and grader.is_equation(answer) and \
                isinstance(gold, sympy.Eq) and isinstance(answer, sympy.Eq):
            return _equations_differ(gold, answer)
        if isinstance(gold, sympy.Expr) and isinstance(answer, sympy.Expr):
            return _numbers_differ(gold, answer) if gold.is_number and answer.is_number else \
                _functions_differ(gold, answer)
    except Exception:  # noqa: BLE001 - sympy fails in many ways; failing to prove is not proof
        return False
    return False


def _numbers_differ(a: Any, b: Any) -> bool:
    import sympy

    x, y = sympy.N(a, 30), sympy.N(b, 30)
    if not (x.is_real and y.is_real or x.is_complex and y.is_complex):
        return False
    gap, scale = abs(complex(x - y)), max(1.0, abs(complex(x)))
    limit = _NEAR if a.has(sympy.Float) != b.has(sympy.Float) else _CLOSE
    return gap > limit * scale


def _elements_differ(xs: list, ys: list) -> bool:
    if len(xs) != len(ys):
        return True
    return any(_numbers_differ(x, y) for x, y in zip(xs, ys) if x.is_number and y.is_number) and all(
        x.is_number and y.is_number for x, y in zip(xs, ys))


def _sets_differ(xs: list, ys: list) -> bool:
    if not all(getattr(v, "is_number", False) for v in xs + ys):
        return False
    unmatched = list(ys)
    for x in xs:
        match = next((y for y in unmatched if not _numbers_differ(x, y)), None)
        if match is None:
            return True
        unmatched.remove(match)
    return bool(unmatched)


def _points(symbols: list, seed: str) -> list[dict]:
    """Whole numbers: a variable is as often an integer (n, k) as real, and answers equal on the
    integers only (``\\lceil n/2 \\rceil`` and ``\\lfloor (n+1)/2 \\rfloor``, ``(-1)^n`` and
    ``\\cos(\\pi n)``) differ at fractions: a difference at whole numbers is one either way."""
    rng = random.Random(seed)  # the same points for the same pair: a verdict does not depend on luck
    return [{s: __import__("sympy").Integer(rng.randint(11, 97)) for s in symbols} for _ in range(_POINTS)]


def _functions_differ(a: Any, b: Any) -> bool:
    symbols = a.free_symbols | b.free_symbols
    if a.free_symbols != b.free_symbols or not symbols:
        return False
    ordered = sorted(symbols, key=str)
    return any(_numbers_differ(a.subs(point), b.subs(point))
               for point in _points(ordered, f"{a}|{b}") if a.subs(point).is_number and b.subs(point).is_number)


def _equations_differ(a: Any, b: Any) -> bool:
    """Two equations are the same when one side-difference is a constant multiple of the other."""
    f, g = a.lhs - a.rhs, b.lhs - b.rhs
    if f.free_symbols != g.free_symbols or not f.free_symbols:
        return False
    ratios = []
    for point in _points(sorted(f.free_symbols, key=str), f"{f}|{g}"):
        fv, gv = f.subs(point), g.subs(point)
        if not (fv.is_number and gv.is_number) or gv == 0:
            return False
        ratios.append(fv / gv)
    return any(_numbers_differ(ratios[0], r) for r in ratios[1:])
