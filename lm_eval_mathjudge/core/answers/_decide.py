"""Deciding: the response's one final answer against the gold, in three outcomes.

* **correct**: one committed final answer, proved equal to the gold (``compare`` says True);
* **incorrect**: the rule is sure: that answer is proved different from the gold, or the response
  commits to several final answers proved different from each other (a box and a later "Final
  answer: ..."), or gives so many final statements that it is a list;
* **undecided**: anything else: no final answer the rule can read, a refusal, a hedge, words around
  the answer it cannot read, a later sentence with another value, a final answer revised after an
  explicit correction to the gold's value (an LLM judge decides that one), values it cannot compare.

``compare(a, b)`` is True (proved equal), False (proved different) or None (cannot tell): the
local judge's worker gives math-verify's (``backends.local_math``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from ._context import EXAMPLE
from ._read import MAX_DISTINCT, Reading, Statement, gold_answer
from ._text import short
from ._values import Shape, as_number, computation, normalise

Compare = Callable[[str, str], "bool | None"]
CORRECT, INCORRECT, UNDECIDED = "correct", "incorrect", "undecided"
COMMITTED = ("boxed", "answer", "closing", "conclusion")  # kinds that state a final answer; "result": a later sentence
MARKED = ("boxed", "answer", "conclusion")  # a final answer marked as one; "closing": a plain text's last value, a guess


@dataclass(frozen=True)
class Decision:
    outcome: str  # CORRECT, INCORRECT or UNDECIDED
    answer: str | None  # the response's one final answer, if it has one
    reason: str  # one sentence for the judge's Error Analysis

    @property
    def correct(self) -> bool:
        return self.outcome == CORRECT


def decide(reading: Reading, gold: str, compare: Compare) -> Decision:
    """Credit the response only for its one final answer, and only if it is proved equal to ``gold``."""
    if reading.problem:
        outcome = INCORRECT if reading.several else UNDECIDED
        return Decision(outcome, None, reading.problem[0].upper() + reading.problem[1:] + ".")
    reading = _without_examples(reading)
    if not reading.statements:
        return Decision(UNDECIDED, None, "The response gives no final answer the rule can read.")
    flagged = next((s for s in reading.statements if s.problem), None)
    if flagged is not None:
        return Decision(UNDECIDED, None, f"The response does not commit to one final answer: {flagged.problem}.")
    value = gold_answer(gold)
    if value is None:
        return Decision(UNDECIDED, None, f"The reference answer {short(gold)} is not one value the rule can read.")
    gold, shape = value, Shape.of(value)
    committed = [s for s in reading.statements if s.kind in COMMITTED] or list(reading.statements[-1:])
    groups, unsure = _groups([v for s in committed for v in _values(s, shape) if v], shape, compare)
    marked = all(s.kind in MARKED for s in committed)
    if len(groups) > 1:
        return _several(groups, unsure or not marked, committed[-1], gold, shape, compare)
    answer = groups[0]
    for statement in reading.statements:
        if statement.kind in COMMITTED:
            continue
        other = next((v for v in (statement.value, *statement.others) if v and _equal(answer, v, shape, compare)
                      is not True), None)
        if other is not None:
            return Decision(UNDECIDED, None, f"After its final answer {short(answer)} the response states "
                                               f"{short(other)}; the rule cannot tell which one it commits to.")
    return _against_gold(answer, gold, shape, compare, marked)


def _without_examples(reading: Reading) -> Reading:
    """Values shown as examples ("Format example: \\boxed{18}") are no final answers: set aside when the
    response commits to another one elsewhere, else they leave it undecided."""
    kept = tuple(s for s in reading.statements if not (s.problem or "").startswith(EXAMPLE))
    if len(kept) == len(reading.statements) or not any(s.kind in COMMITTED for s in kept):
        return reading
    return dataclasses.replace(reading, statements=kept)


def _values(statement: Statement, shape: Shape) -> tuple[str, ...]:
    """The values a statement offers: alternatives beside one value ("18 (or 20)"); against a gold of several
    values, the parts of one list ("x = 1 or x = -2", "12 and 13")."""
    if shape.commas and statement.others:
        return (", ".join((statement.value, *statement.others)),)
    return (statement.value, *statement.others)


def _unsupported(sides: tuple[str, ...], gold: str, shape: Shape, compare: Compare) -> bool:
    """A computation stated before the result that is proved not to give it (``9 \\cdot 3 = 18``,
    ``3 \\cdot 6 = 9 \\cdot 3 = 18``); sides the rule cannot compare never count against it."""
    return any(_equal(gold, side, shape, compare) is False for side in sides)


def _against_gold(answer: str, gold: str, shape: Shape, compare: Compare, marked: bool) -> Decision:
    same = _equal(gold, answer, shape, compare)
    if same is False and not marked:  # no box, no answer line: its closing value may not be the answer
        return Decision(UNDECIDED, answer, f"The response's closing value {short(answer)} is not the reference answer "
                                           f"{short(gold)}, and it marks no final answer the rule could hold it to.")
    if same is True and shape.numeric and _unsupported(computation(answer), gold, shape, compare):
        return Decision(UNDECIDED, answer, f"The response's final answer {short(answer)} states a computation "
                                           "that does not give its result.")
    if same is True:
        return Decision(CORRECT, answer, f"The response's one final answer {short(answer)} matches the reference "
                                         f"answer {short(gold)}.")
    if same is False:
        return Decision(INCORRECT, answer, f"The response's final answer {short(answer)} does not match the "
                                           f"reference answer {short(gold)}.")
    return Decision(UNDECIDED, answer, f"The rule cannot compare the response's final answer {short(answer)} with "
                                       f"the reference answer {short(gold)}.")


def _several(groups: list[str], unsure: bool, last: Statement, gold: str, shape: Shape,
             compare: Compare) -> Decision:
    shown = ", then ".join(short(g) for g in groups[:4])
    if unsure or shape.commas:  # boxes of a gold with several values may be its parts ("(a) ... (b) ...")
        return Decision(UNDECIDED, None, f"The response gives several final answers ({shown}) that the rule cannot "
                                         "tell apart.")
    if last.revises:  # "The answer is 46. Wait, I made an error ... \boxed{36}": an LLM judge reads the revision
        revised = _equal(gold, last.value, shape, compare)
        if revised is not False:
            return Decision(UNDECIDED, None, f"The response revises its final answer ({shown}); the rule leaves a "
                                             "revision to the reference answer to the LLM judge.")
    return Decision(INCORRECT, None, f"The response gives several different final answers ({shown}).")


def _groups(values: list[str], shape: Shape, compare: Compare) -> tuple[list[str], bool]:
    """One representative per class of values proved equal, in order of first appearance, and whether
    some value could not be told apart from an earlier class."""
    first: dict[str, str] = {}
    for value in values:  # the first of the values that read alike, as written
        first.setdefault(normalise(value, shape.numeric), value)
    groups: list[str] = []
    unsure = False
    for value in first.values():
        found = [_equal(value, g, shape, compare) for g in groups]
        if True in found:
            continue
        unsure = unsure or None in found
        groups.append(value)
        if len(groups) > MAX_DISTINCT:
            break
    return groups, unsure


def _equal(a: str, b: str, shape: Shape, compare: Compare) -> bool | None:
    """Equal (True), different (False) or cannot tell (None): exact numbers compare exactly, anything
    else is ``compare``'s call on the values as written."""
    left, right = normalise(a, shape.numeric), normalise(b, shape.numeric)
    if left == right:
        return True
    x, y = as_number(left), as_number(right)
    if x is not None and y is not None and (x == y or ("." in left) == ("." in right)):
        return x == y  # a decimal against a fraction that is not it: math-verify's call (1/12, 0.0833333333333333)
    return compare(a, b)


def answer_classes(answers: list[str | None], gold: str, compare: Compare) -> list[int | None]:
    """For each final answer, the index of its class of answers proved equal (first appearance first:
    ``1/2``, ``0.5`` and ``\\frac12`` are one class); None for a response without one final answer. The
    majority vote of k samples counts these classes."""
    shape = Shape.of(gold_answer(gold) or gold)
    classes: list[str] = []
    out: list[int | None] = []
    for answer in answers:
        if answer is None:
            out.append(None)
            continue
        found = next((i for i, c in enumerate(classes) if _equal(answer, c, shape, compare) is True), None)
        if found is None:
            classes.append(answer)
            found = len(classes) - 1
        out.append(found)
    return out
