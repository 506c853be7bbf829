"""A deliberately wrong reference, built from the gold: what the counterfactual re-check asks the judge with.

``judge_counterfactual`` asks a judge that said Correct once more, with a reference whose final
answer was changed (``judging/counterfactual.py``). An honest judge then says Incorrect; a judge
that credited the answer because the answer told it to says Correct again. The wrong reference must
therefore (1) state a final answer whose VALUE differs from the gold's, never just its form, and
(2) say so consistently: in the worked solution, its ``\\boxed{}`` and its answer line alike.

``wrong_answer(gold)`` changes one thing of the gold that certainly changes its value:

* a number literal (the last one that is not an exponent or a subscript): its last digit, by an
  offset of 1..9 taken from a hash of the gold (the same gold always gets the same wrong answer,
  so a rerun is answered from the judge cache). Integers, decimals, fractions, radicals, tuples,
  intervals, expressions with units or degrees all have one;
* a multiple-choice letter (``C``, ``(C)``, ``\\text{(C)}``): the next letter; yes/no: the other;
* without a number: the last binary sign flipped (``p - q``: ``p + q``), a lone constant doubled.

It refuses (a counted refusal, never a guess) where such a change might keep the value: nothing to
change (``\\infty``, words, sets of symbols), a periodic or logarithmic function whose argument could
absorb it, an exponent of 0 or 1. ``wrong_reference`` then writes the wrong answer wherever the
reference states the gold (every occurrence of a gold longer than two characters; for a short gold
only its final-answer places: boxes, lines naming the answer, the last lines) and in the last
``\\boxed{}``; a reference that states the gold nowhere (a solution that never says its final answer)
ends with a line stating the wrong one (``Final answer: ...``, as GSM8K's references end).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Mapping

_LITERAL = re.compile(r"(?<![\d.])(?:\d+(?:\.\d+)?|\.\d+)")
_EXPONENT_OR_INDEX = re.compile(r"[\^_]\s*\{?\s*-?\s*$")
# Functions whose value a changed literal in their argument may keep (periodic, or exponent/log identities).
_RISKY = re.compile(r"\\(?:a?(?:sin|cos|tan|cot|sec|csc)h?|arc(?:sin|cos|tan)|log|ln|lg|exp|bmod|pmod|mod|"
                    r"lfloor|lceil|floor|ceil|operatorname)(?![A-Za-z])|\b(?:mod|gcd|lcm)\b|\{\s*[01]\s*\}\s*\^|(?<![\d.])[01]\s*\^")
_CHOICE = re.compile(r"^\s*(?:\\(?:text|textbf|mathrm|mathbf)\s*)?\{?\s*\(?\s*([A-E])\s*\)?\s*\}?\s*\.?\s*$")
_YES_NO = re.compile(r"^(\s*(?:\\(?:text|textbf|mathrm)\s*\{)?\s*)(yes|no)(\s*\}?\s*\.?\s*)$", re.I)
_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_LINE = re.compile(r"answer", re.I)
_BINARY_SIGN = re.compile(r"(?<=[A-Za-z})\]])\s*([+-])\s*(?=[A-Za-z\\({])")
_CONSTANT = re.compile(r"\\(?:pi|phi|tau)|e|[a-z]")  # \infty is not a number a coefficient changes
SHORT = 2  # a gold this short (a digit or two) is replaced only where the reference states its final answer


@dataclass(frozen=True)
class WrongReference:
    """The wrong final answer and the reference that states it, or why none could be built (``refused``)."""
    answer: str | None = None
    reference: str | None = None
    refused: str | None = None


def wrong_answer(gold: str) -> tuple[str | None, str | None]:
    """(a final answer whose value differs from ``gold``, None), or (None, why none can be made safely)."""
    text = _unwrapped(gold)
    if not text:
        return None, "the gold answer is empty"
    choice = _CHOICE.match(text)
    if choice:
        letter = choice.group(1)
        start, end = choice.span(1)
        return text[:start] + "ABCDE"[("ABCDE".index(letter) + 1) % 5] + text[end:], None
    yes_no = _YES_NO.match(text)
    if yes_no:
        word = yes_no.group(2)
        other = {"yes": "no", "no": "yes"}[word.lower()]
        other = other.capitalize() if word[0].isupper() else other
        return yes_no.group(1) + other + yes_no.group(3), None
    if _RISKY.search(text):
        return None, "the gold has a function whose value a changed number may keep (trigonometric, log, mod, floor)"
    literal = _changeable(text)
    if literal is None:
        return _symbolic(text)
    return text[:literal.start()] + _changed(literal.group(), _offset(text)) + text[literal.end():], None


def _symbolic(text: str) -> tuple[str | None, str | None]:
    """A gold without a number: its last binary + or - turned into the other (``p - q``: ``p + q``), or a
    lone constant doubled (``\\pi``: ``2\\pi``); words and infinities are refused."""
    signs = list(_BINARY_SIGN.finditer(text))
    if signs:
        sign = signs[-1]
        return text[:sign.start(1)] + {"+": "-", "-": "+"}[sign.group(1)] + text[sign.end(1):], None
    if _CONSTANT.fullmatch(text):
        return "2" + text, None
    return None, "the gold has no number or sign to change (words, a set or an infinity)"


def _changed(literal: str, offset: int) -> str:
    """The literal with its last digit moved by ``offset`` (never to itself, never to a zero it was not:
    a denominator must stay one)."""
    digit = int(literal[-1])
    for step in range(offset, offset + 10):
        new = literal[:-1] + str((digit + step) % 10)
        if new != literal and (float(new) != 0 or float(literal) == 0):
            return new
    raise AssertionError("unreachable: some other digit always works")


def _changeable(text: str) -> re.Match | None:
    """The last number literal that is not an exponent or a subscript (else the last literal)."""
    found = list(_LITERAL.finditer(text))
    plain = [m for m in found if not _EXPONENT_OR_INDEX.search(text[:m.start()])]
    return (plain or found or [None])[-1]


def _offset(gold: str) -> int:
    """1..9, the same for the same gold (a rerun asks the identical request: answered from the cache)."""
    return 1 + hashlib.sha256(gold.encode()).digest()[0] % 9


def wrong_reference(reference: str, gold: str) -> WrongReference:
    """``reference`` with its final answer changed to ``wrong_answer(gold)`` everywhere it is stated."""
    wrong, why = wrong_answer(gold)
    if wrong is None:
        return WrongReference(refused=why)
    bare = _unwrapped(gold)
    pattern = _gold_pattern(bare)
    if len(bare) > SHORT:
        changed, found = pattern.subn(lambda _m: wrong, reference)
    else:
        changed, found = _replace_in_final_places(reference, pattern, wrong)
    changed, boxed = _rebox(changed, wrong)
    if not (found or boxed):  # the solution never states its final answer: it ends stating the wrong one
        changed = f"{reference.rstrip()}\nFinal answer: {wrong}"
    return WrongReference(answer=wrong, reference=changed)


def wrong_doc(doc: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, WrongReference]:
    """A doc whose reference and gold are the wrong ones (None when refused), and what was built."""
    built = wrong_reference(str(doc["mj_reference"]), str(doc["mj_answer"]))
    if built.refused is not None:
        return None, built
    return {**doc, "mj_reference": built.reference, "mj_answer": built.answer}, built


def _unwrapped(gold: str) -> str:
    """The gold without the wrapping some data sets keep (``\\[ ... \\]``, ``$...$``, ``\\( ... \\)``, a box)."""
    text = gold.strip()
    box = _last_box(text)
    if box is not None:  # a gold that boxes its answer (in a sentence, in display math): the box states it
        return text[box[0]:box[1]].strip()
    for begin, end in (("\\[", "\\]"), ("$$", "$$"), ("\\(", "\\)"), ("$", "$")):
        if len(text) > len(begin) + len(end) and text.startswith(begin) and text.endswith(end):
            text = text[len(begin):-len(end)].strip()
    return text


def _gold_pattern(gold: str) -> re.Pattern:
    """The gold as written anywhere in a reference: spaces free, numbers whole (not a piece of a longer one,
    leading zeros and thousands separators allowed), words whole."""
    pieces = []
    for token in re.findall(r"\d+|\s+|.", gold, re.S):
        if token.isspace():
            pieces.append(r"\s*")
        elif token.isdigit():
            pieces.append(_digits(token))
        else:
            pieces.append(re.escape(token) + (r"\s*" if token in "{}()[],=+-" else ""))
    body = "".join(pieces)
    before = r"(?<![\d.,])" if gold[0].isdigit() else (r"(?<![A-Za-z])" if gold[0].isalpha() else "")
    after = r"(?!\d|[.,]\d)" if gold[-1].isdigit() else (r"(?![A-Za-z])" if gold[-1].isalpha() else "")
    return re.compile(before + body + after)


def _digits(token: str) -> str:
    """An integer as a reference may write it: leading zeros (AIME's 025), thousands separators (1,000, 1{,}000)."""
    lead = "0*" if token == token.lstrip("0") else ""
    if len(token) <= 3:
        return lead + re.escape(token)
    groups, head = [], len(token) % 3 or 3
    groups.append(token[:head])
    groups += [token[i:i + 3] for i in range(head, len(token), 3)]
    separator = r"(?:,|\{,\}|,\\!|\\,|\s)?"
    return lead + separator.join(groups)


def _replace_in_final_places(reference: str, pattern: re.Pattern, wrong: str) -> tuple[str, int]:
    """A short gold is replaced only where the final answer is stated: lines naming the answer, the last two
    non-empty lines, and boxes (``_rebox``); elsewhere it is likely an unrelated step."""
    lines = reference.split("\n")
    filled = [i for i, line in enumerate(lines) if line.strip()]
    final = set(filled[-2:]) | {i for i, line in enumerate(lines) if _ANSWER_LINE.search(line)}
    found = 0
    for i in sorted(final):
        lines[i], n = pattern.subn(lambda _m: wrong, lines[i])
        found += n
    return "\n".join(lines), found


def _rebox(reference: str, wrong: str) -> tuple[str, bool]:
    """The last ``\\boxed{...}`` made to hold the wrong answer (it states the final answer, in whatever form)."""
    box = _last_box(reference)
    if box is None:
        return reference, False
    return reference[:box[0]] + wrong + reference[box[1]:], True


def _last_box(text: str) -> tuple[int, int] | None:
    """Where the content of the last ``\\boxed{...}`` (nested braces included) starts and ends, or None."""
    starts = list(_BOX.finditer(text))
    if not starts:
        return None
    start = starts[-1].end()
    depth = 1
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return start, i
    return None
