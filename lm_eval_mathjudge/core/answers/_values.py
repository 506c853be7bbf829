"""Values: the mathematics a statement gives, without decoration, as an exact number when it is
one, and whether it has the shape of the gold answer (one value, not a hedge or a list)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from ._context import qualified
from ._text import AND_SIGN, BOUND_SIGNS, COMMAND, HEDGE_SIGNS, UNIT_TEXT, WORDY, short

_RUN = re.compile(
    r"\\(?:text|mathrm|textrm|textbf|mbox|operatorname)\s*\{[^{}]{0,80}\}|\\[A-Za-z]+\*?|\\[{}$%,;!: |]|[{}]|"
    r"\d+(?:[.,]\d+)*|[A-Za-z](?![A-Za-z])|[-+*/^_=()\[\]|<>!'.,;:%\u00b0\u00b7\u00d7\u00f7\u221a\u03c0\u221e"
    r"\u2248\u00b1~\u2013\u2014\u2264\u2265\u22c5]|[ \t]+")
LEAD_DECOR = " \t*_:\"'\u201c\u201d`"


def value_of(region: str) -> tuple[str, str]:
    """(the value at the start of ``region``, the rest): the leading run of mathematics.

    The run stops at a plain word outside braces ("18 dollars", "18 or 20"), at a closing ``$``,
    and after a number at a space before a letter (a unit: "18 m", not "x^2 + x")."""
    at = len(region) - len(region.lstrip(LEAD_DECOR))
    for opener in ("$$", "$", "\\(", "\\[", "\\$"):
        if region.startswith(opener, at):
            at += len(opener)
            break
    start, depth = at, 0
    while at < len(region):
        if region.startswith("$", at) and depth == 0:
            break
        piece = _RUN.match(region, at)
        if piece is None:
            if depth > 0 and region[at].isalpha():  # words inside braces: \frac{a}{b}, \text{...}
                at += 1
                continue
            break
        token = piece.group()
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
            if depth < 0:
                break
        elif (token.isspace() and depth == 0 and region[piece.end():piece.end() + 1].isalpha()
              and region[start:at].rstrip()[-1:].isdigit()):
            break  # a unit after a number ("18 m"), not a term of an expression ("x^2 + x")
        at = piece.end()
    at = _balanced_end(region, start, at)
    value = region[start:at].strip(" \t,;:*_")
    while value.endswith((".", "\\)", "\\]", "$")) and not value.endswith("\\$"):
        value = value[:-2] if value.endswith(("\\)", "\\]")) else value[:-1]
        value = value.rstrip(" \t,;:*_")
    return value, region[at:]


def _balanced_end(region: str, start: int, end: int) -> int:
    """``end``, or where the run's brackets stop balancing: before the first one it opens and never
    closes ("18 (or 20)" -> "18"), or at a closing one it never opened ("143)" -> "143")."""
    opened: list[int] = []
    for i in range(start, end):
        if region[i] in "([":
            opened.append(i)
        elif region[i] in ")]":
            if not opened:
                return i
            opened.pop()
    return opened[0] if opened else end


_SPACING = re.compile(r"(?<!\\)\\[,;:! ]|\\quad|\\qquad|\\left(?![a-z])|\\right(?![a-z])|\\displaystyle|"
                      r"(?<=\\)[dtc](?=frac)|\s*(?:\\text\s*)?\{\s*,\s*\}\s*|\\\$|\$|\\%|%|\^\s*\{?\\circ\}?|\u00b0|\\degree|(?<!\\)\\[][()]")
_COMPUTED = re.compile(r"[-+*/^!]|\\(?:cdot|times|div|frac|sqrt|binom)(?![A-Za-z])|\u00b7|\u00d7")
_PARENTHESISED = re.compile(r"\(\s*([^()]+?)\s*\)")
_PERCENT_WORD = re.compile(r"\s*(?:\\text\s*\{\s*)?(?:percent(?:age)?|pct)\s*\}?\s*$", re.I)
_SCIENTIFIC = re.compile(r"(-?\d+(?:\.\d+)?)\s*(?:\\times|\\cdot|\*|\u00d7)\s*10\s*\^\s*\{?\s*(-?\d{1,3})\s*\}?")
_SPACED_NUMBER = re.compile(r"-?\d{1,3}(?:(?:[ ~\u00a0\u202f]|\\[,;: !])+\d{3})+(?:\.\d+)?")
_SIGN_GAP = re.compile(r"\s*([-/])\s*")
_LETTER = re.compile(r"[A-Za-z]")
_THOUSANDS = re.compile(r"(?<![\d.])(\d{1,3})((?:,\d{3})+)(?![\d,])")
_ASSIGNED = re.compile(r"^[A-Za-z](?:_\{?\w{1,8}\}?)?\s*(?:=(?!=)|\\in(?![A-Za-z]))\s*")  # "x = 18", "x \in (2, 5)"
_PLAIN = re.compile(r"-?(?:\d+(?:\.\d+)?|\.\d+)")
_FRAC_DIGITS = re.compile(r"\\frac(?:(\d)|\{(\d+)\})(?:(\d)|\{(\d+)\})")  # \frac12, \frac{270}7
_THOUSANDS_SPACED = re.compile(r"(?<=\d),\\!\s*(?=\d{3})")  # 11,\! 111
_INNER_BOX = re.compile(r"^\\boxed\s*\{(.*)\}$", re.S)
_FRACTION = re.compile(r"(-?)\\frac\{(-?\d+)\}\{(-?\d+)\}|(-?\d+)\s*/\s*(-?\d+)")
_MIXED = re.compile(r"(-?)(\d+)\s*\\frac\{(\d+)\}\{(\d+)\}")  # 1\frac{1}{4} = 5/4


def normalise(value: str, numeric: bool) -> str:
    """A value without decoration: spacing, math delimiters, currency, %, degrees, thousands
    separators, a leading ``x =``; a numeric gold's candidate also loses unit text
    (``18 \\text{ dollars}``) and a computation before its result (``2 \\times 9 = 18``)."""
    return _normalised(value, numeric)[0]


def computation(value: str) -> tuple[str, ...]:
    """The sides of the computation a number is stated with, which ``normalise`` drops (``9 \\cdot 3``
    in ``9 \\cdot 3 = 18``) that are computations themselves; a bare number among them (the ``7`` of
    math-verify's own ``5+5+1 = 7 = 11``) is a slip of the chain, not a computation to check."""
    return tuple(side for side in _normalised(value, numeric=True)[1] if _COMPUTED.search(side))


def _normalised(value: str, numeric: bool) -> tuple[str, tuple[str, ...]]:
    sides: tuple[str, ...] = ()
    text = _THOUSANDS_SPACED.sub(",", value)
    if numeric and _SPACED_NUMBER.fullmatch(text.strip()):  # 1 000, 1\,000, 1~000
        text = re.sub(r"[^\d.-]", "", text)
    text = _FRAC_DIGITS.sub(lambda m: f"\\frac{{{m.group(1) or m.group(2)}}}{{{m.group(3) or m.group(4)}}}",
                            _SPACING.sub("", text))
    text = _THOUSANDS.sub(lambda m: m.group(1) + m.group(2).replace(",", ""), text)
    text = _INNER_BOX.sub(r"\1", _ASSIGNED.sub("", text.strip()).strip())  # "x = 18", a box in the box
    if numeric:
        text = _PERCENT_WORD.sub("", UNIT_TEXT.sub(lambda m: m.group(1) if any(c.isdigit() for c in m.group(1))
                                                   else "", text))
        if "=" in text:  # a computation of numbers and its result: "8 \cdot 6 \cdot 2 = 96" (not "20 = 18", "a+b = 0")
            done, _, result = text.rpartition("=")
            if _COMPUTED.search(done) and not _LETTER.search(COMMAND.sub("", done)):
                text, sides = result, tuple(side.strip() for side in done.split("="))
        bracketed = _PARENTHESISED.fullmatch(text.strip())  # "(113)"
        text = bracketed.group(1) if bracketed else text
    return " ".join(text.split()).rstrip(". "), sides


def as_number(value: str) -> Fraction | None:
    """The value as an exact number when it is a plain number or a fraction of two integers."""
    text = _SIGN_GAP.sub(r"\1", value).strip()
    if scientific := _SCIENTIFIC.fullmatch(text):  # 5.75 \times 10^{4}
        return Fraction(scientific.group(1)) * Fraction(10) ** int(scientific.group(2))
    if " " in text:  # "6 8" is two numbers, not 68
        return None
    if _PLAIN.fullmatch(text):
        return Fraction(text)
    mixed = _MIXED.fullmatch(text)
    if mixed is not None and int(mixed.group(4)) != 0:
        whole = int(mixed.group(2)) + Fraction(int(mixed.group(3)), int(mixed.group(4)))
        return -whole if mixed.group(1) else whole
    match = _FRACTION.fullmatch(text)
    if match is None:
        return None
    sign, top, bottom = (match.group(1), match.group(2), match.group(3)) if match.group(2) else (
        "", match.group(4), match.group(5))
    if int(bottom) == 0:
        return None
    return Fraction(int(top), int(bottom)) * (-1 if sign else 1)


@dataclass(frozen=True)
class Shape:
    """What the gold answer looks like: a response may use a form only when the gold does."""
    numeric: bool  # a plain number or a fraction of two integers
    commas: bool  # several values at the top level ("1, -2") or inside brackets (a tuple, an interval)
    hedges: bool  # \pm, \approx ... in the gold itself
    bounds: bool  # an inequality
    words: bool  # an answer in words ("\text{Evelyn}", "even")

    @classmethod
    def of(cls, gold: str) -> Shape:
        core = normalise(gold, numeric=True)
        several = "," in core or ";" in core or AND_SIGN.search(gold) is not None or _AND.search(gold) is not None \
            or _PLUS_MINUS.search(gold) is not None  # "1 \pm \sqrt{19}": two values, answered as a list too
        numeric = not several and as_number(core) is not None
        text = COMMAND.sub(" ", UNIT_TEXT.sub(r" \1 ", gold))
        return cls(numeric=numeric, commas=several,
                   hedges=HEDGE_SIGNS.search(gold) is not None, bounds=BOUND_SIGNS.search(gold) is not None,
                   words=not numeric and WORDY.search(text) is not None)


def _top_level(value: str, chars: str) -> bool:
    depth = 0
    for char in value:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char in chars and depth == 0:
            return True
    return False


_AND = re.compile(r"(?<![\\A-Za-z])and(?![A-Za-z])")
_PLUS_MINUS = re.compile(r"\\(?:pm|mp)(?![A-Za-z])|\u00b1|\u2213")
_RANGE = re.compile(r"\d[ \t]*[\u2013\u2014][ \t]*-?\d")


_APPROX = re.compile(r"\\approx(?![A-Za-z])|\u2248")
_NAME_ONLY = re.compile(r"\s*(?:[A-Za-z](?:_\{?\w{1,8}\}?)?\s*=?)?\s*")


def exact_part(value: str) -> str:
    """An exact value followed by its decimal approximation (``3\\sqrt{13} \\approx 10.8``,
    ``x = \\frac13 \\approx 0.33``) states the exact value (the approximation offers no second answer:
    it is compared with nothing); an approximation alone (``\\approx 11``, ``x \\approx 11``) stays a hedge."""
    found = _APPROX.search(value)
    if found is None or _NAME_ONLY.fullmatch(value[:found.start()]) or _top_level(value, ",;"):
        return value
    exact = value[:found.start()].strip()
    return value if _APPROX.search(value, found.end()) else exact


def value_problem(value: str, shape: Shape) -> str | None:
    """Why a stated value is not one answer of the gold's shape, or None."""
    if not value.strip():
        return "an empty answer"
    if not shape.words and (word := qualified(value)):  # "18 \text{ maybe}" is no unit
        return f"words in the answer the rule cannot read ({word!r} in {short(value)!r})"
    if not shape.hedges and (hedge := HEDGE_SIGNS.search(value) or (None if shape.commas else AND_SIGN.search(value))):
        return f"a hedged answer ({hedge.group().strip()} in {short(value)!r})"
    if not shape.bounds and BOUND_SIGNS.search(value):
        return f"a bound, not a value ({short(value)!r})"
    if not shape.commas and _top_level(normalise(value, shape.numeric), ",;"):
        return f"several values ({short(value)!r})"
    if _RANGE.search(value):
        return f"a range ({short(value)!r})"
    if shape.numeric and as_number(normalise(value, numeric=True)) is None:
        return f"not a single number ({short(value)!r})"
    return None
