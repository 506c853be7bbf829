"""The answer policy: when a response commits to one final answer, and which.

The model under test writes the text a judge reads, so a response that gives
several answers, hedges, or revises its answer must never be credited for
the one that happens to be right. Every exact-match judge applies the same
policy: the local judge in code (this module, run inside its math-verify
worker), LLM judges through rule 1 of their prompt; so a cascade's rule stage
only credits what its LLM stage would credit too.

Final statements
    ``\\boxed{}`` (``\\fbox``, ``\\framebox``) contents; answer statements ("the
    answer is ...", "Final answer: ...", "Answer:", "#### ...", a line "A: ...");
    sentences that conclude ("in the end ...", "in conclusion ..."); and every
    sentence after the last of those that states a value, other than as a
    condition ("... is achieved when a = 1"). Numbers in the working before
    them are never answers. A response with none of them is a plain-text
    answer: its closing sentence that names a number is the final statement,
    with every conclusion or revision ("wait, actually ...") before it and
    every stated value after the first of those.

A response is credited only when
    * every final statement, and every value offered beside one ("18 (or 20)",
      "17 or \\boxed{18}", "18, otherwise 20"), gives the same value: values
      are grouped by equivalence (units, currency, ``%``, thousands separators
      and equivalent forms aside; two single values at a time, by math-verify);
    * none hedges: a list or a range of numbers (``18, 20``, ``between``,
      ``18-20``, ``to``), a bound (``at least``, ``\\geq``), ``\\pm``,
      ``\\approx``, "about", "maybe", a question mark - unless the gold answer
      itself has that shape (a tuple, an interval, a ``\\pm``): the gold is ONE
      answer; none is revoked or doubted ("just kidding", "I'm not sure");
    * a numeric gold answer gets a number (a fraction at most), not an
      unevaluated or decorated expression (``\\boxed{100·18\\%}``, ``2*9``);
    * it does not decline to answer ("I cannot solve this", "I don't know").

``read(response, gold, question)`` finds the statements and what is wrong with
them (pure text work); ``decide(reading, gold, same)`` groups the values by
equivalence, ``same(a, b)`` being math-verify's check, and compares the one
answer with the gold. Every scan is a single regex pass over the text or over
one bounded window, and the number of statements weighed is capped, so the
work is linear in the response (the worker's time limit still bounds it).
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Iterator

from .data import CALCULATOR
from .parsing import drop_reasoning

MAX_STATEMENTS = 64  # final statements weighed; a response with more is several answers anyway
MAX_DISTINCT = 8  # distinct values compared with math-verify before "several answers" is certain
_BOX_SCAN = 2000  # characters a \boxed{...} may span
_REGION = 240  # characters of a statement's sentence read after its anchor
_WINDOW = 60  # characters before a box read for hedges ("about \boxed{18}")
_SENTENCE_SCAN = 2000  # characters at the end of a sentence read for the value it states


@dataclass(frozen=True)
class Statement:
    kind: str  # "boxed", "answer", "result" (a later sentence stating a result) or "closing"
    start: int  # offset in the cleaned response
    end: int
    value: str  # the value as stated (inside the box, after the anchor); "" for a revision
    problem: str | None = None  # why this statement does not commit to one value
    others: tuple[str, ...] = ()  # values offered beside it ("18 (or 20)", "17 or \boxed{18}")


@dataclass(frozen=True)
class Reading:
    statements: tuple[Statement, ...]
    problem: str | None  # why the response as a whole is not credited (a refusal, ...), else None


@dataclass(frozen=True)
class Decision:
    correct: bool
    answer: str | None  # the response's one final answer, if it has one
    reason: str  # one sentence for the judge's Error Analysis


# ------------------------------------------------------------------ text pieces

_NUMBER = re.compile(r"(?<![\w.])[-\u2212]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?!\.?\d)|(?<![\w.])\.\d+")
_LABEL_BEFORE = re.compile(
    r"(?:problem|question|exercise|example|step|case|part|section|chapter|lemma|theorem|figure|table|"
    r"equation|eq\.|no\.|item|page|line|option|#)\s*\(?$", re.I)
_MATH_SPAN = re.compile(r"\$\$([^$]{1,400})\$\$|\$([^$\n]{1,200})\$|\\\((.{1,200}?)\\\)|\\\[(.{1,400}?)\\\]", re.S)
_SENTENCE_END = re.compile(  # "5!" is a factorial; "\boxed{18} She makes..." starts a new sentence
    r"\n|(?:\.|(?<=[A-Za-z])!|\?)(?=[\s\"')\]*_]|$)|(?<=[}$\d])(?=[ \t]+[A-Z][a-z])")
_BOX = re.compile(r"\\(?:boxed|fbox|framebox)(?![A-Za-z])\s{0,3}(?:\[[^\]\n]{0,20}\])?\s{0,3}(?=\{)|"
                  r"\\(?:boxed|fbox|framebox)(?![A-Za-z])[ \t]*")
_ASY = re.compile(r"\[asy\]|\\begin\{asy\}")
_ASY_END = {"[asy]": "[/asy]", "\\begin{asy}": "\\end{asy}"}

# Answer statements. A line anchor's value may sit on the next line ("**Final Answer**\n18").
_LINE_ANCHOR = re.compile(
    r"^[ \t>*_#\-\u2022]{0,8}(?:####|(?:the[ \t]+)?(?:final[ \t]+|correct[ \t]+)?answers?[ \t*_]{0,4}"
    r"(?:[:\uff1a=]|(?=[ \t*_]*$))|(?:a|ans)[ \t]*[:\uff1a])", re.I | re.M)
_INLINE_ANCHOR = re.compile(  # "the answer (to ...) is", "final answer:"; never "convert the answer to weeks: 28"
    r"####|\banswers?[ \t*_]{0,4}[:\uff1a=]|\b(?:(?:the|my|our|final|correct|required)[ \t]+){1,3}answers?\b(?:(?:[ \t]+(?:to|for|of)\b[^.!?\n$:]{0,80}?)?"
    r"[ \t*_]{0,4}(?:is|are|was|would[ \t]+be|will[ \t]+be|should[ \t]+be|must[ \t]+be|comes[ \t]+to|equals)\b|"
    r"[ \t*_]{0,4}[:\uff1a=])(?:[ \t]+(?:therefore|thus|then|hence|simply|just|exactly|clearly|indeed|now|still)\b)?",
    re.I)

# Words and signs that keep a statement from committing to one value.
_HEDGE_SIGNS = re.compile(r"\\(?:pm|mp|approx|sim|simeq|lor|vee)(?![A-Za-z])|\u00b1|\u2213|\u2248|\u223c|"
                          r"plus[ \t]+or[ \t]+minus|\+/-|"
                          r"\u2228|\\text\s*\{\s*(?:or|and|either|to)\b|\\(?:mathrm|textrm|mbox)\s*\{\s*or\b")
_BOUND_SIGNS = re.compile(r"\\(?:le|ge|leq|geq|lt|gt|neq|ne|leqslant|geqslant)(?![A-Za-z])|[<>\u2264\u2265\u2260]")
_HEDGE_WORDS = re.compile(
    r"\b(?:or|either|otherwise|unless|alternatively|else|depending|between|maybe|perhaps|probably|possibly|"
    r"roughly|approximately|approx|somewhere|not[ \t]+sure|unsure|uncertain|not[ \t]+certain|i[ \t]+think|"
    r"i[ \t]+guess|i[ \t]+believe|at[ \t]+(?:least|most)|(?:more|less|fewer)[ \t]+than|up[ \t]+to|"
    r"in[ \t]+the[ \t]+range|range[ \t]+of)\b|\b(?:about|around|nearly|almost|close[ \t]+to|over|under)"
    r"[ \t]*[$\\(]*[ \t]*[-\u2212]?\.?\d|~[ \t]*\$?\d|\u2248", re.I)
_ALTERNATIVE = re.compile(  # right after a value: another value joined to it
    r"^[ \t*_$)]*(?:[,;/|]|\(|\[|\band/or\b|\b(?:or|and|to|vs\.?|versus|nor|plus|minus|but)\b|[-\u2013\u2014])"
    r"[ \t]*(?:\(|\[|\\\(|\$|\\\$|or\b|and\b|maybe\b|possibly\b)*[ \t]*[-\u2212]?\.?\d|"
    r"^[ \t*_$]*=[ \t]*\$?[-\u2212]?\.?\d", re.I)
_NEGATED = re.compile(r"^[ \t*_]*(?:not|never|no[ \t]+longer)\b", re.I)
_REVOKED = re.compile(
    r"\b(?:just[ \t]+kidding|kidding|jk|j/k|scratch[ \t]+that|never[ \t]*mind|i[ \t]+was[ \t]+wrong|"
    r"(?:that|this|it)(?:'s|[ \t]+is|[ \t]+was)[ \t]+(?:wrong|incorrect|not[ \t]+right)|my[ \t]+mistake|oops|"
    r"on[ \t]+second[ \t]+thought|correction|not[ \t]+the[ \t]+(?:right|correct)[ \t]+answer|"
    r"(?:the[ \t]+)?answer[ \t]+is[ \t]+(?:not|n't)|isn't[ \t]+(?:right|correct|the[ \t]+answer))\b", re.I)
_REFUSAL = re.compile(
    r"\bi(?:[ \t]+|')(?:cannot|can[ \t]*not|can't|could[ \t]*not|couldn't|am[ \t]+(?:not[ \t]+able|unable)|"
    r"m[ \t]+(?:not[ \t]+able|unable)|won't|will[ \t]+not|refuse|do[ \t]*n[o']t[ \t]+know|don't[ \t]+know)"
    r"(?:[ \t]+to)?(?:[ \t]+(?:solve|answer|help|do|complete|work[ \t]+out|figure[ \t]+out|determine|compute|"
    r"calculate|find|give|provide)(?:[ \t]+(?:this|that|it|the[ \t]+(?:problem|question|answer)|your|an?[ \t]+"
    r"answer)\b|[ \t]*(?:[.!,]|$))|\b(?=[ \t]*[.!,]|$))|"
    r"\bi[ \t]+(?:do[ \t]*n[o']t|don't)[ \t]+know\b|\b(?:cannot|can't|could[ \t]+not)[ \t]+be[ \t]+"
    r"(?:solved|answered|determined)\b|\b(?:not[ \t]+enough|insufficient)[ \t]+information\b|"
    r"\bas[ \t]+an[ \t]+ai\b|\bi(?:'m|[ \t]+am)[ \t]+sorry\b|\bi[ \t]+apologi[sz]e\b|"
    r"\bunable[ \t]+to[ \t]+(?:solve|answer)\b|\bno[ \t]+(?:idea|clue)\b|\bi[ \t]+give[ \t]+up\b|\bunsolvable\b|"
    r"\b(?:impossible|no[ \t]+way)[ \t]+to[ \t]+(?:say|tell|know|determine)\b|\brefus(?:e|ing|al)\b", re.I | re.M)
# ------------------------------------------------------------------ cleaning

_MARKUP = re.compile(  # HTML tags (<b>, </span>, <br/>), never "a<b and c>d"
    r"</?(?:b|i|u|s|em|strong|span|div|p|br|sup|sub|font|mark|code|pre|small|big|strike|del|ins|h[1-6]|li|ul|"
    r"ol|table|tr|td|th|a|hr|center|blockquote)(?:[ \t]+[A-Za-z-]{1,20}=(?:\"[^\"<>\n]{0,60}\"|'[^'<>\n]{0,60}'|"
    r"[^\s<>]{1,60}))*[ \t]*/?>", re.I)
_INVISIBLE = re.compile("[\u200b-\u200f\u2060\ufeff\u00ad]")


def clean(text: str) -> str:
    """The response as the policy reads it: no reasoning block, no calculator notes, no markup tags,
    no invisible characters, no drawings."""
    text = CALCULATOR.sub("", drop_reasoning(text or ""))
    text = _INVISIBLE.sub("", _MARKUP.sub(" ", text))
    text = text.replace("\r\n", "\n").replace("\u00a0", " ").replace("\u2212", "-").replace("\u2019", "'")
    if "asy" not in text:
        return text
    pieces, at = [], 0
    while (opened := _ASY.search(text, at)) is not None:  # Asymptote code draws; it states nothing
        close = text.find(_ASY_END[opened.group()], opened.end())
        pieces.append(text[at:opened.start()])
        at = len(text) if close < 0 else close + len(_ASY_END[opened.group()])
    pieces.append(text[at:])
    return "".join(pieces)


def _sentence_bounds(text: str) -> list[tuple[int, int]]:
    """(start, end) of every sentence: ends at a newline, or at . ! ? before a space or the end."""
    bounds, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        if match.start() > start:
            bounds.append((start, match.end()))
        start = match.end()
    if start < len(text):
        bounds.append((start, len(text)))
    return bounds


def _sentence_end(text: str, at: int, limit: int = _REGION) -> int:
    match = _SENTENCE_END.search(text, at, min(len(text), at + limit))
    return match.start() if match else min(len(text), at + limit)


_BRACE = re.compile(r"(?<!\\)[{}]")


def _box_content(text: str, at: int) -> tuple[str, int] | None:
    """The content of the brace group opening at ``text[at]`` and the offset after it, or None."""
    depth = 0
    for brace in _BRACE.finditer(text, at, min(len(text), at + _BOX_SCAN)):
        depth += 1 if brace.group() == "{" else -1
        if depth == 0:
            return text[at + 1:brace.start()], brace.end()
    return None


_SMALL = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
          "seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10 ** 6, "billion": 10 ** 9}
_WORD_VALUE = {**{w: i for i, w in enumerate(_SMALL)}, **{w: 10 * (i + 2) for i, w in enumerate(_TENS)}}
_WORD = "(?:" + "|".join([*_SMALL, *_TENS, *_SCALES]) + ")"
_WORD_RUN = re.compile(rf"\b{_WORD}(?:(?:[ \t]+(?:and[ \t]+)?|[ \t]*-[ \t]*){_WORD})*\b", re.I)


def _word_numbers(text: str) -> list[tuple[str, int, int]]:
    """Numbers written in words ("twenty", "two hundred and five"), as digits with their offsets;
    a lone "one" is left out (a pronoun as often as a number)."""
    found = []
    for match in _WORD_RUN.finditer(text):
        words = re.findall(r"[a-z]+", match.group().lower())
        if words == ["one"]:
            continue
        total = current = 0
        for word in words:
            if word in _WORD_VALUE:
                current += _WORD_VALUE[word]
            elif word == "hundred":
                current = max(current, 1) * 100
            elif word in _SCALES:
                total, current = total + max(current, 1) * _SCALES[word], 0
        found.append((str(total + current), match.start(), match.end()))
    return found


_LIST_ITEM = re.compile(r"[.)][ \t]")
_LINE_LEAD = re.compile(r"(?:^|\n)[ \t>*_#\-]*$")


def _numbers(text: str) -> list[tuple[str, int, int]]:
    """Number tokens that state a quantity (not "Problem 3", "Step 2", a list item "6. ..."),
    with their offsets."""
    found = []
    for match in _NUMBER.finditer(text):
        if _LABEL_BEFORE.search(text, max(0, match.start() - 12), match.start()):
            continue
        if _LIST_ITEM.match(text, match.end()) and _LINE_LEAD.search(text, max(0, match.start() - 8),
                                                                     match.start()):
            continue
        found.append((match.group(), match.start(), match.end()))
    return found


# ------------------------------------------------------------------ values

_RUN = re.compile(
    r"\\(?:text|mathrm|textrm|textbf|mbox|operatorname)\s*\{[^{}]{0,80}\}|\\[A-Za-z]+\*?|\\[{}$%,;!: |]|[{}]|"
    r"\d+(?:[.,]\d+)*|[A-Za-z](?![A-Za-z])|[-+*/^_=()\[\]|<>!'.,;:%\u00b0\u00b7\u00d7\u00f7\u221a\u03c0\u221e"
    r"\u2248\u00b1~\u2013\u2014\u2264\u2265\u22c5]|[ \t]+")
_LEAD_DECOR = " \t*_:\"'\u201c\u201d`"


def value_of(region: str) -> tuple[str, str]:
    """(the value at the start of ``region``, the rest): the leading run of mathematics.

    The run stops at a plain word outside braces ("18 dollars", "18 or 20"), at a closing ``$``,
    and after a number at a space before a letter (a unit: "18 m", not "x^2 + x")."""
    at = len(region) - len(region.lstrip(_LEAD_DECOR))
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


_SPACING = re.compile(r"(?<!\\)\\[,;:! ]|\\quad|\\qquad|\\left(?![a-z])|\\right(?![a-z])|\\displaystyle|(?<=\\)[dt](?=frac)|"
                      r"\{,\}|\\\$|\$|\\%|%|\^\s*\{?\\circ\}?|\u00b0|\\degree|(?<!\\)\\[][()]")
_UNIT_TEXT = re.compile(r"\\(?:text|mathrm|textrm|textbf|mathbf|mbox|operatorname)\s*\{([^{}]{0,80})\}")
_COMPUTED = re.compile(r"[-+*/^!]|\\(?:cdot|times|div|frac|sqrt|binom)(?![A-Za-z])|\u00b7|\u00d7")
_PARENTHESISED = re.compile(r"\(\s*(-?[\d.]+)\s*\)")
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
    text = _THOUSANDS_SPACED.sub(",", value)
    text = _FRAC_DIGITS.sub(lambda m: f"\\frac{{{m.group(1) or m.group(2)}}}{{{m.group(3) or m.group(4)}}}",
                            _SPACING.sub("", text))
    text = _THOUSANDS.sub(lambda m: m.group(1) + m.group(2).replace(",", ""), text)
    text = _INNER_BOX.sub(r"\1", _ASSIGNED.sub("", text.strip()).strip())  # "x = 18", a box in the box
    if numeric:
        text = _UNIT_TEXT.sub(lambda m: m.group(1) if any(c.isdigit() for c in m.group(1)) else "", text)
        if "=" in text:  # a computation and its result: "8 \cdot 6 \cdot 2 = 96" (not "20 = 18")
            done, _, result = text.rpartition("=")
            if _COMPUTED.search(done):
                text = result
        text = _PARENTHESISED.fullmatch(text.strip()) and _PARENTHESISED.fullmatch(text.strip()).group(1) or text
    return " ".join(text.split()).rstrip(". ")


def as_number(value: str) -> Fraction | None:
    """The value as an exact number when it is a plain number or a fraction of two integers."""
    text = value.replace(" ", "")
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


_WORDY = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
_COMMAND = re.compile(r"\\[A-Za-z]+")


@dataclass(frozen=True)
class Shape:
    """What the gold answer looks like: a response may use a form only when the gold does."""
    numeric: bool  # a plain number or a fraction of two integers
    commas: bool  # several values at the top level ("1, -2") or inside brackets (a tuple, an interval)
    hedges: bool  # \pm, \approx ... in the gold itself
    bounds: bool  # an inequality
    words: bool  # an answer in words ("\text{Evelyn}", "even")

    @classmethod
    def of(cls, gold: str) -> "Shape":
        core = normalise(gold, numeric=True)
        numeric = as_number(core) is not None
        text = _COMMAND.sub(" ", _UNIT_TEXT.sub(r" \1 ", gold))
        return cls(numeric=numeric, commas="," in core or ";" in core,
                   hedges=_HEDGE_SIGNS.search(gold) is not None, bounds=_BOUND_SIGNS.search(gold) is not None,
                   words=not numeric and _WORDY.search(text) is not None)


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


_RANGE = re.compile(r"\d[ \t]*[\u2013\u2014][ \t]*-?\d")


def value_problem(value: str, shape: Shape) -> str | None:
    """Why a stated value is not one answer of the gold's shape, or None."""
    if not value.strip():
        return "an empty answer"
    if not shape.hedges and (hedge := _HEDGE_SIGNS.search(value)):
        return f"a hedged answer ({hedge.group().strip()} in {_short(value)!r})"
    if not shape.bounds and _BOUND_SIGNS.search(value):
        return f"a bound, not a value ({_short(value)!r})"
    if not shape.commas and _top_level(normalise(value, shape.numeric), ",;"):
        return f"several values ({_short(value)!r})"
    if _RANGE.search(value):
        return f"a range ({_short(value)!r})"
    if shape.numeric and as_number(normalise(value, numeric=True)) is None:
        return f"not a single number ({_short(value)!r})"
    return None


# ------------------------------------------------------------------ reading

_BARE_BOX = re.compile(r"[^\s$.,;]{1,40}")
_VISIBLE = re.compile(r"\S")
_CLAUSE = re.compile(r"[.!?;:]\s")
_HEDGE_FIRST = re.compile(r"[ \t*_$]*(?:(?:is|be)[ \t]+)?(?:" + _HEDGE_WORDS.pattern + ")", re.I)
_TEXT_ANSWER = re.compile(r"[ \t*_\"'(]*([A-Za-z][\w' ()-]{0,40}?)[ \t*_\"')]*$")
_DOUBT = re.compile(r"\b(?:maybe|perhaps|probably|possibly|not[ \t]+(?:sure|certain|confident)|unsure|uncertain|"
                    r"i[ \t]+think|i[ \t]+guess|(?:could|might|may)[ \t]+be[ \t]+wrong|not[ \t]+100%)", re.I)
_TAKEN_BACK = re.compile(r"\b(?:actually|instead|rather|i[ \t]+mean|no,|nope|correction)(?![A-Za-z])", re.I)
_REVISING = re.compile(r"\b(?:wait|actually|no,|correction|i[ \t]+mean|rather|instead|kidding|oops|"
                       r"on[ \t]+second[ \t]+thought)\b", re.I)
_BARE = re.compile(r"[A-Za-z]{2,}")
_GAP = re.compile(r"[ \t$*_]*(?:[,;/|]|\bor\b|\band\b|\bto\b|[\u2013\u2014])?[ \t$*_]*", re.I)


def _boxes(text: str, shape: Shape) -> Iterator[Statement]:
    for match in _BOX.finditer(text):
        at = match.end()
        if at < len(text) and text[at] == "{":
            found = _box_content(text, at)
            if found is None:  # all that follows is inside it
                yield Statement("boxed", match.start(), len(text), "", "a box that is never closed")
                return
            content, end = found
        else:  # "\boxed 18"
            token = _BARE_BOX.match(text, at)
            if token is None:
                continue
            content, end = token.group(), token.end()
        line_start = text.rfind("\n", max(0, match.start() - _WINDOW), match.start()) + 1
        before = text[max(line_start, match.start() - _WINDOW):match.start()]
        stop = _sentence_end(text, end)
        after = text[end:stop]
        problem, others = _around(before, after, content, shape)
        if text.startswith("?", stop):
            problem = problem or f"a question, not an answer ({_short(content)!r}?)"
        yield Statement("boxed", match.start(), end, content.strip(), value_problem(content, shape) or problem,
                        others)


_HEDGE_BEFORE = re.compile(
    r"(?:\b(?:about|around|approximately|approx|roughly|nearly|almost|maybe|perhaps|probably|possibly|"
    r"at[ \t]+least|at[ \t]+most|more[ \t]+than|less[ \t]+than|fewer[ \t]+than|up[ \t]+to|between|"
    r"somewhere[ \t]+near|close[ \t]+to|estimated?|(?:no|not)[ \t]+(?:more|less|fewer)[ \t]+than|upwards[ \t]+of|"
    r"in[ \t]+excess[ \t]+of|under|over|circa|ca\.)|~|\u2248|\\approx|\\sim)[ \t]*(?:is[ \t]+|be[ \t]+)?"
    r"[$(\[\\ \t*_]*$", re.I)
_OR_BEFORE = re.compile(r"(?:\b(?:or|either|and/or|nor)|/)[ \t*_]*(?:is[ \t]+)?[$(\[\\ \t*_]*$", re.I)
_HEDGE_AFTER = re.compile(
    r"^[ \t$*_),;:(]*(?:or\b(?![ \t$]*\\boxed)|approx|roughly|about\b|around\b|maybe|perhaps|probably|possibly|give[ \t]+or[ \t]+take|"
    r"more[ \t]+or[ \t]+less|at[ \t]+(?:least|most)|or[ \t]+so|-?ish\b|\?|\+/-|\+(?![ \t]*\d)|plus[ \t]+or[ \t]+minus|"
    r"circa)", re.I)


_OTHERWISE = re.compile(r"\b(?:otherwise|unless|else|alternatively|or|either|in[ \t]+which[ \t]+case|if[ \t]+not|"
                        r"depending|(?:could|might|may)[ \t]+(?:also[ \t]+)?be|wait|actually|instead|rather|"
                        r"i[ \t]+mean|so[ \t]+in[ \t]+the[ \t]+end|in[ \t]+the[ \t]+end|no,)(?![A-Za-z])", re.I)


_RUN_ON = re.compile(r"(?<=[a-z0-9$}.,;:])[ \t]+(?=(?!I\b)[A-Z][a-z])")


def _around(before: str, after: str, value: str, shape: Shape) -> tuple[str | None, tuple[str, ...]]:
    """What a value's sentence says around it: (a hedge, or None; the values offered beside it).
    Only the text near the value is read (``_WINDOW`` before it, ``_REGION`` after it)."""
    before, after = before[-_WINDOW:], after[:_REGION]
    clause = _CLAUSE.split(before)[-1] if before else ""
    if hedge := (_HEDGE_BEFORE.search(clause) or _DOUBT.search(clause)):
        return f"a hedge ({hedge.group().strip(' $([')!r} before {_short(value)!r})", ()
    others: list[str] = []
    if _OR_BEFORE.search(clause):
        earlier = _sentence_values(clause[:_OR_BEFORE.search(clause).start()])
        if not earlier:
            return f"alternatives ({_short(clause.strip() + ' ' + value, 60)!r})", ()
        others.append(earlier[-1])
    joined = _ALTERNATIVE.search(after) and not (shape.commas and after.lstrip(" \t*_$").startswith((",", ";")))
    if joined:
        others.extend(_sentence_values(after) or ["?"])
    elif hedge := _HEDGE_AFTER.search(after):
        return f"a hedge ({hedge.group().strip(' $*_),;:(')!r} after {_short(value)!r})", ()
    elif other := _OTHERWISE.search(after):  # "18 if she sells them all, otherwise 25"
        later = _stated(after[other.end():])
        if not later and other.group().lower() in ("or", "either"):
            return None, tuple(others)
        if not later:
            return f"a condition or a revision ({other.group()!r} after {_short(value)!r})", ()
        others.extend(later)
    if found := (_REVOKED.search(after) or _DOUBT.search(after)):
        return f"a hedge ({found.group().strip()!r} after {_short(value)!r})", ()
    run_on = _RUN_ON.search(after)  # "Final answer: 18 dollars She makes $19 a day": a new sentence
    if run_on is not None:
        others.extend(_stated(after[run_on.end():]))
    return None, tuple(others)


def _answer_statements(text: str, shape: Shape, boxes: list[Statement]) -> Iterator[Statement]:
    box_starts = [b.start for b in boxes]
    for pattern in (_LINE_ANCHOR, _INLINE_ANCHOR):
        for match in pattern.finditer(text):
            at = match.end()
            end = _sentence_end(text, at)
            if not text[at:end].strip(" \t*_") and pattern is _LINE_ANCHOR:  # a heading: value below
                following = _VISIBLE.search(text, end, end + 200)
                if following is None:
                    continue
                at = following.start()
                end = _sentence_end(text, at)
            boxed = next((b for b in box_starts if at <= b < end), None)
            if boxed is not None:  # "The answer is \boxed{18}", "the answer is 7!/4 = \boxed{1260}": the box is it
                end = boxed  # ... unless a value of its own comes first ("Final answer: 19 \boxed{18}")
                if text[at:end].rstrip(" \t$([\\").endswith("=") or not _VISIBLE.search(text[at:end].strip("$\\([ ")):
                    continue
            region = text[at:end]
            if _NEGATED.match(region):
                continue  # "the answer is not 20" commits to no value
            if _HEDGE_FIRST.match(region):
                yield Statement("answer", match.start(), end, region.strip(),
                                f"a hedged answer ({_short(region.strip(), 60)!r})")
                continue
            value, rest = value_of(region)
            if "\\boxed" in value:
                continue  # the box in it is its own statement
            spelled = _word_numbers(region[:40].lstrip(_LEAD_DECOR))
            if not value and spelled and spelled[0][1] == 0:  # "The answer is twenty."
                value, rest = spelled[0][0], region.lstrip(_LEAD_DECOR)[spelled[0][2]:]
            if not value:
                word = _TEXT_ANSWER.match(region.rstrip(". !")) if shape.words else None
                if word:  # an answer in words: "The answer is Evelyn."
                    yield Statement("answer", match.start(), end, word.group(1).strip())
                continue
            problem, others = _around("", rest, value, shape)
            if text.startswith("?", end):
                problem = problem or f"a question, not an answer ({_short(value)!r}?)"
            yield Statement("answer", match.start(), at + len(region) - len(rest), value,
                            value_problem(value, shape) or problem, others)


def _is_math(inner: str) -> bool:
    """A $...$ span holds mathematics, not two dollar amounts ("$18 a day and $")."""
    return _WORDY.search(_UNIT_TEXT.sub("", inner)) is None or "\\" in inner


def _sentence_values(sentence: str, positions: bool = False, words: bool = False) -> list:
    """The values a sentence names, in order: its math spans (the side after the last "=") and the
    numbers outside them (with ``words``, numbers in words too); with ``positions``, as (value,
    start, end)."""
    found: list[tuple[str, int, int]] = []
    spans: list[tuple[int, int]] = []
    for match in _MATH_SPAN.finditer(sentence):
        inner = next(g for g in match.groups() if g is not None)
        if not _is_math(inner):
            continue
        spans.append((match.start(), match.end()))
        if any(c.isdigit() for c in inner) or "\\" in inner:
            found.append((inner.rsplit("=", 1)[-1].strip(), match.start(), match.end()))
    starts = [a for a, _ in spans]
    for number, start, end in (_numbers(sentence) + _word_numbers(sentence) if words else _numbers(sentence)):
        inside = bisect.bisect_right(starts, start) - 1  # the spans do not overlap: one lookup
        if inside < 0 or start >= spans[inside][1]:
            found.append((number, start, end))
    found.sort(key=lambda item: item[1])
    return found if positions else [value for value, _, _ in found]


def _sentence_statement(kind: str, sentence: str, offset: int, shape: Shape, previous: str = "",
                        words: bool = False) -> Statement | None:
    """A sentence read as a final statement at its last stated value, the way an answer statement is
    read at its value: hedges and alternatives around the value, a list, doubt, a revision. Only
    its last ``_SENTENCE_SCAN`` characters are searched for values (bounded work per sentence)."""
    if len(sentence) > _SENTENCE_SCAN:
        offset, sentence = offset + len(sentence) - _SENTENCE_SCAN, sentence[-_SENTENCE_SCAN:]
    values = [v for v in _sentence_values(sentence, positions=True, words=words) if not _conditioned(sentence, v[1])]
    if not values:
        return None
    value, at, stop = values[-1]
    problem, others = _around(sentence[:at], sentence[stop:], value, shape)
    if len(values) > 1 and _GAP.fullmatch(sentence, values[-2][2], at) is not None and not shape.commas or (
            _is_bare_values(sentence) and _is_bare_values(previous)):
        problem = f"a list of numbers ({_short(sentence.strip(), 60)!r})"
    elif doubt := (_DOUBT.search(sentence) or _REVISING.search(sentence) or _REVOKED.search(sentence)):
        if kind == "closing" or not _REVISING.fullmatch(doubt.group()):  # a later "actually 18" restates
            problem = f"doubt or a revision ({doubt.group().strip()!r} in {_short(sentence.strip(), 60)!r})"
    return Statement(kind, offset + at, offset + stop, value, value_problem(value, shape) or problem, others)


def _closing(text: str, question: str, shape: Shape) -> Statement | None:
    """The final statement of a response with no box and no answer statement: its closing sentence
    that names a number (not a question, not a sentence copied from the problem)."""
    asked = " ".join(question.split()).lower()
    bounds = _sentence_bounds(text)
    for index in range(len(bounds) - 1, -1, -1):
        start, end = bounds[index]
        sentence = text[start:end].rstrip()
        if sentence.endswith("?"):
            continue
        if len(sentence.strip()) > 12 and " ".join(sentence.split()).lower().rstrip(".") in asked:
            continue
        previous = text[bounds[index - 1][0]:bounds[index - 1][1]] if index else ""
        found = _sentence_statement("closing", sentence, start, shape, previous)
        if found is not None:
            return found
    return None


def _is_bare_values(sentence: str) -> bool:
    return bool(_NUMBER.search(sentence)) and _BARE.search(sentence) is None


def read(response: str, gold: str, question: str = "") -> Reading:
    """Find the final statements of ``response`` and what keeps it from one answer."""
    text = clean(response)
    shape = Shape.of(gold)
    refusal = None  # the last one: a refusal after the final statements takes them back
    for found in _REFUSAL.finditer(text):
        if found.group().lower() not in gold.lower():
            refusal = found
    boxes = list(itertools.islice(_boxes(text, shape), 2 * MAX_STATEMENTS))  # more are refused anyway
    answers = itertools.islice(_answer_statements(text, shape, boxes), 2 * MAX_STATEMENTS)
    marked = _merge(sorted([*boxes, *answers], key=lambda s: s.start))
    if len(marked) > MAX_STATEMENTS:
        return Reading((), f"the response makes {len(marked)} final statements")
    if refusal is not None and (not marked or refusal.start() > marked[-1].start):
        return Reading((), f"the response declines to answer ({_short(refusal.group())!r})")
    if not marked:  # a plain-text answer: its closing sentence, and every conclusion or revision before it
        closing = _closing(text, question, shape)
        if closing is None:
            return Reading((), None)
        concluded = _conclusions(text, closing.start, shape, _CONCLUSION, _REVISING)
        if not concluded:
            return Reading((closing,), None)
        return _capped((concluded[0], *_later(text, concluded[:1], shape), closing))
    concluded = [c for c in _conclusions(text, len(text), shape, _CONCLUSION)
                 if not any(s.start <= c.start < s.end or c.start <= s.start < c.end for s in marked)]
    statements = sorted(marked + concluded, key=lambda s: s.start)
    return _capped(tuple(statements) + tuple(_later(text, statements, shape)))


def _capped(statements: tuple[Statement, ...]) -> Reading:
    if len(statements) > MAX_STATEMENTS:
        return Reading((), f"the response makes {len(statements)} final statements")
    return Reading(statements, None)


def _merge(statements: list[Statement]) -> list[Statement]:
    """One statement per place: an answer statement whose span holds a box is that box."""
    kept: list[Statement] = []
    for statement in statements:
        if kept and statement.start < kept[-1].end:
            if statement.kind == "boxed" and kept[-1].kind != "boxed":
                kept[-1] = statement
            elif statement.kind == kept[-1].kind == "answer" and statement.end > kept[-1].end:
                kept[-1] = statement  # "Final Answer: The final answer is 18": the inner anchor
            continue
        kept.append(statement)
    return kept


_CONCLUSION = re.compile(r"\b(?:in[ \t]+the[ \t]+end|in[ \t]+conclusion|to[ \t]+conclude|in[ \t]+summary|"
                         r"to[ \t]+summari[sz]e|all[ \t]+in[ \t]+all|ultimately|final[ \t]+result)\b", re.I)


def _conclusions(text: str, before: int, shape: Shape, *markers: re.Pattern) -> list[Statement]:
    """Sentences that start before offset ``before`` with one of ``markers`` ("So in the end she makes $20."):
    final statements wherever they stand. (Working never says "in the end": 0 of 2,001 correct GPT-3
    GSM8K solutions conclude an intermediate value that way.)"""
    found = []
    for start, end in _sentence_bounds(text):
        if start >= before:
            break
        sentence = text[start:end]
        if any(m.search(sentence) for m in markers) and (
                statement := _sentence_statement("result", sentence, start, shape, words=True)):
            found.append(statement)
    return found


_CONDITION = re.compile(r"\b(?:when|whenever|where|wherein|if|iff|such[ \t]+that|achieved|attained|occurs?|"
                        r"holds?|equality|minimi[sz]ed|maximi[sz]ed)\b", re.I)


_CLAUSE_BREAK = re.compile(r"[,;]|\bthen\b", re.I)


def _conditioned(sentence: str, at: int) -> bool:
    """The value at ``at`` is a condition in its clause ("achieved when a = b = 1"), not a result
    ("if only 14 remained, then 40 - 14 = 26")."""
    condition = None
    for condition in _CONDITION.finditer(sentence, max(0, at - 40), at):
        pass
    return condition is not None and _CLAUSE_BREAK.search(sentence, condition.end(), at) is None


def _stated(sentence: str) -> list[str]:
    """The values a sentence states, leaving out those it gives as a condition ("this minimum is
    achieved when a = b = 1", "equality holds if x = 2")."""
    return [value for value, at, _ in _sentence_values(sentence, positions=True) if not _conditioned(sentence, at)]


def _later(text: str, statements: list[Statement], shape: Shape) -> list[Statement]:
    """What follows the last final statement: every sentence there that states a value (not as a
    condition) is a final statement too; one that revokes the answer or doubts it is a problem."""
    last = statements[-1].end
    found: list[Statement] = []
    for start, end in _sentence_bounds(text):
        if start < last:  # before it, or the rest of its own sentence (which _around has read)
            continue
        sentence = text[start:end]
        if revoked := _REVOKED.search(sentence):
            found.append(Statement("result", start, end, "", f"a revision ({revoked.group().strip()!r})"))
        elif doubt := _DOUBT.search(sentence):
            found.append(Statement("result", start, end, "", f"doubt ({doubt.group().strip()!r})"))
        elif statement := _sentence_statement("result", sentence, start, shape, words=True):
            found.append(statement)
        elif revised := _TAKEN_BACK.search(sentence):  # "Actually, no." takes the answer back
            found.append(Statement("result", start, end, "", f"a revision ({revised.group().strip()!r})"))
        if len(found) > MAX_STATEMENTS:
            break  # refused as too many in any case
    return found


# ------------------------------------------------------------------ deciding

def decide(reading: Reading, gold: str, same: Callable[[str, str], bool]) -> Decision:
    """Credit the response only for its one final answer, and only if it equals ``gold``."""
    if reading.problem:
        return Decision(False, None, reading.problem[0].upper() + reading.problem[1:] + ".")
    if not reading.statements:
        return Decision(False, None, "The response gives no final answer.")
    flagged = next((s for s in reading.statements if s.problem), None)
    if flagged is not None:
        return Decision(False, None, f"The response does not commit to one final answer: {flagged.problem}.")
    shape = Shape.of(gold)
    groups = _groups([v for s in reading.statements for v in (s.value, *s.others) if v], shape, same)
    if len(groups) > 1:
        shown = ", then ".join(_short(g) for g in groups[:4])
        return Decision(False, None, f"The response gives several different final answers ({shown}).")
    answer = groups[0]
    if _equal(gold, answer, shape, same):
        return Decision(True, answer, f"The response's one final answer {_short(answer)} matches the reference "
                                      f"answer {_short(gold)}.")
    return Decision(False, answer, f"The response's final answer {_short(answer)} does not match the reference "
                                   f"answer {_short(gold)}.")


def _groups(values: list[str], shape: Shape, same: Callable[[str, str], bool]) -> list[str]:
    """One representative per equivalence class, in order of first appearance."""
    distinct = list(dict.fromkeys(normalise(value, shape.numeric) for value in values))
    groups: list[str] = []
    for value in distinct:
        if not any(_equal(value, g, shape, same) for g in groups):
            groups.append(value)
            if len(groups) > MAX_DISTINCT:
                break
    return groups


_NOT_WORD = re.compile(r"[^a-z0-9]+")


def _equal(a: str, b: str, shape: Shape, same: Callable[[str, str], bool]) -> bool:
    """Equivalence of two values: exact numbers compare exactly; a numeric gold admits nothing else;
    words compare as words; anything else is math-verify's call."""
    left, right = normalise(a, shape.numeric), normalise(b, shape.numeric)
    if left == right:
        return True
    x, y = as_number(left), as_number(right)
    if x is not None and y is not None:
        return x == y
    if shape.numeric:
        return False
    if shape.words:
        words = [_NOT_WORD.sub(" ", _COMMAND.sub(" ", _UNIT_TEXT.sub(r" \1 ", v)).lower()).split() for v in (a, b)]
        if words[0] == words[1]:
            return True
    return same(left, right)


def _short(value: str, limit: int = 40) -> str:
    value = " ".join(value.split())
    return value if len(value) <= limit else value[:limit - 3] + "..."
