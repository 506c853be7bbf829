"""The words and shapes of text the answer policy reads: cleaning, sentences, numbers (also in
words), values named in a sentence, and the vocabularies of hedges, revisions and refusals."""

from __future__ import annotations

import bisect
import re

from ..docs import CALCULATOR
from ..parsing import drop_reasoning

_BOX_SCAN = 2000  # characters a \boxed{...} may span
REGION = 240  # characters of a statement's sentence read after its anchor

NUMBER = re.compile(r"(?<![\w./])[-\u2212]?\d+/\d+(?![\d/]|\.\d)|"  # 2/3: one value, not a list
                    r"(?<![\w.])[-\u2212]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?!\.?\d)|(?<![\w.])\.\d+")
_LABEL_BEFORE = re.compile(
    r"(?:problem|question|exercise|example|step|case|part|section|chapter|lemma|theorem|figure|table|"
    r"equation|eq\.|no\.|item|page|line|option|#)\s*\(?$", re.I)
_MATH_SPAN = re.compile(r"(?<!\\)\$\$([^$]{1,400})(?<!\\)\$\$|(?<!\\)\$((?:[^$\n]|(?<=\\)\$){1,200})(?<!\\)\$|"
                        r"\\\((.{1,200}?)\\\)|\\\[(.{1,400}?)\\\]", re.S)
_SENTENCE_END = re.compile(  # "5!" is a factorial; "\boxed{18} She makes..." starts a new sentence
    r"\n|(?:\.|(?<=[A-Za-z])!|\?)(?=[\s\"')\]*_]|$)|(?<=[}$\d])(?=[ \t]+[A-Z][a-z])")
BOX = re.compile(r"\\(?:boxed|fbox|framebox)(?![A-Za-z])\s{0,3}(?:\[[^\]\n]{0,20}\])?\s{0,3}(?=\{)|"
                 r"\\(?:boxed|fbox|framebox)(?![A-Za-z])[ \t]*")
_ASY = re.compile(r"\[asy\]|\\begin\{asy\}")
_ASY_END = {"[asy]": "[/asy]", "\\begin{asy}": "\\end{asy}"}

# Answer statements. A line anchor's value may sit on the next line ("**Final Answer**\n18").
LINE_ANCHOR = re.compile(
    r"^[ \t>*_#\-\u2022]{0,8}(?:####|(?:the[ \t]+)?(?:final[ \t]+|correct[ \t]+)?answers?[ \t*_]{0,4}"
    r"(?:[:\uff1a=]|(?=[ \t*_]*$))|(?:a|ans)[ \t]*[:\uff1a])", re.I | re.M)
INLINE_ANCHOR = re.compile(  # "the answer (to ...) is", "final answer:"; never "convert the answer to weeks: 28"
    r"####|\banswers?[ \t*_]{0,4}[:\uff1a=]|\b(?:(?:the|my|our|final|correct|required)[ \t]+){1,3}answers?\b"
    r"(?:(?:[ \t]+(?:to|for|of)\b[^.!?\n$:]{0,80}?)?"
    r"[ \t*_]{0,4}(?:is|are|was|would[ \t]+be|will[ \t]+be|should[ \t]+be|must[ \t]+be|comes[ \t]+to|equals)\b|"
    r"[ \t*_]{0,4}[:\uff1a=])(?:[ \t]+(?:therefore|thus|then|hence|simply|just|exactly|clearly|indeed|now|still)\b)?",
    re.I)

# Words and signs that keep a statement from committing to one value.
HEDGE_SIGNS = re.compile(r"\\(?:pm|mp|approx|sim|simeq|lor|vee)(?![A-Za-z])|\u00b1|\u2213|\u2248|\u223c|"
                         r"plus[ \t]+or[ \t]+minus|\+/-|"
                         r"\u2228|\\text\s*\{\s*(?:or|either|to)\b|\\(?:mathrm|textrm|mbox)\s*\{\s*or\b")
AND_SIGN = re.compile(r"\\(?:text|mathrm|textrm|mbox)\s*\{\s*and\b")  # a hedge beside ONE value, a list beside several
BOUND_SIGNS = re.compile(r"\\(?:le|ge|leq|geq|lt|gt|neq|ne|leqslant|geqslant)(?![A-Za-z])|[<>\u2264\u2265\u2260]|!=")
HEDGE_WORDS = re.compile(
    r"\b(?:or|either|otherwise|unless|alternatively|else|depending|between|maybe|perhaps|probably|possibly|"
    r"roughly|approximately|approx|somewhere|not[ \t]+sure|unsure|uncertain|not[ \t]+certain|i[ \t]+think|"
    r"i[ \t]+guess|i[ \t]+believe|at[ \t]+(?:least|most)|(?:more|less|fewer)[ \t]+than|up[ \t]+to|"
    r"in[ \t]+the[ \t]+range|range[ \t]+of)\b|\b(?:about|around|nearly|almost|close[ \t]+to|over|under)"
    r"[ \t]*[$\\(]*[ \t]*[-\u2212]?\.?\d|~[ \t]*\$?\d|\u2248", re.I)
ALTERNATIVE = re.compile(  # right after a value: another value joined to it
    r"^[ \t*_$)]*(?:[,;/|]|\(|\[|\band/or\b|\b(?:or|and|to|vs\.?|versus|nor|plus|minus|but)\b|[-\u2013\u2014])"
    r"[ \t]*(?:\(|\[|\\\(|\$|\\\$|or\b|and\b|maybe\b|possibly\b)*[ \t]*[-\u2212]?\.?\d|"
    r"^[ \t*_$]*=[ \t]*\$?[-\u2212]?\.?\d", re.I)
NEGATED = re.compile(r"^[ \t*_]*(?:not|never|no[ \t]+longer)\b", re.I)
REVOKED = re.compile(
    r"\b(?:just[ \t]+kidding|kidding|jk|j/k|scratch[ \t]+that|never[ \t]*mind|i[ \t]+was[ \t]+wrong|"
    r"(?:that|this|it)(?:'s|[ \t]+is|[ \t]+was)[ \t]+(?:wrong|incorrect|not[ \t]+right)|my[ \t]+mistake|oops|"
    r"on[ \t]+second[ \t]+thought|correction|not[ \t]+the[ \t]+(?:right|correct)[ \t]+answer|"
    r"(?:the[ \t]+)?answer[ \t]+is[ \t]+(?:not|n't)|isn't[ \t]+(?:right|correct|the[ \t]+answer))\b", re.I)
REFUSAL = re.compile(
    r"\bi(?:[ \t]+|')(?:cannot|can[ \t]*not|can't|could[ \t]*not|couldn't|am[ \t]+(?:not[ \t]+able|unable)|"
    r"m[ \t]+(?:not[ \t]+able|unable)|won't|will[ \t]+not|refuse|do[ \t]*n[o']t[ \t]+know|don't[ \t]+know)"
    r"(?:[ \t]+to)?(?:[ \t]+(?:solve|answer|help|do|complete|work[ \t]+out|figure[ \t]+out|determine|compute|"
    r"calculate|find|give|provide)(?:[ \t]+with)?(?:[ \t]+(?:this|that|it|the[ \t]+(?:problem|question|answer)|your|an?[ \t]+"
    r"answer)\b|[ \t]*(?:[.!,]|$))|\b(?=[ \t]*[.!,]|$))|"
    r"\bi[ \t]+(?:do[ \t]*n[o']t|don't)[ \t]+know\b|\b(?:cannot|can't|could[ \t]+not)[ \t]+be[ \t]+"
    r"(?:solved|answered|determined)\b|\b(?:not[ \t]+enough|insufficient)[ \t]+information\b|"
    r"\bas[ \t]+an[ \t]+ai\b|"
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
    text = text.replace("\r\n", "\n").replace('\\"', '"').replace("\u00a0", " ").replace("\u2212", "-").replace("\u2019", "'")
    if "asy" not in text:
        return text
    pieces, at = [], 0
    while (opened := _ASY.search(text, at)) is not None:  # Asymptote code draws; it states nothing
        close = text.find(_ASY_END[opened.group()], opened.end())
        pieces.append(text[at:opened.start()])
        at = len(text) if close < 0 else close + len(_ASY_END[opened.group()])
    pieces.append(text[at:])
    return "".join(pieces)


def sentence_bounds(text: str) -> list[tuple[int, int]]:
    """(start, end) of every sentence: ends at a newline, or at . ! ? before a space or the end."""
    bounds, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        if match.start() > start:
            bounds.append((start, match.end()))
        start = match.end()
    if start < len(text):
        bounds.append((start, len(text)))
    return bounds


def sentence_end(text: str, at: int, limit: int = REGION) -> int:
    match = _SENTENCE_END.search(text, at, min(len(text), at + limit))
    return match.start() if match else min(len(text), at + limit)


_BRACE = re.compile(r"(?<!\\)[{}]")


def box_content(text: str, at: int) -> tuple[str, int] | None:
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


def word_numbers(text: str) -> list[tuple[str, int, int]]:
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
    for match in NUMBER.finditer(text):
        if _LABEL_BEFORE.search(text, max(0, match.start() - 12), match.start()):
            continue
        if _LIST_ITEM.match(text, match.end()) and _LINE_LEAD.search(text, max(0, match.start() - 8),
                                                                     match.start()):
            continue
        found.append((match.group(), match.start(), match.end()))
    return found


# ------------------------------------------------------------------ values named in a sentence

WORDY = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")  # a word of two letters or more, outside a command
COMMAND = re.compile(r"\\[A-Za-z]+")
UNIT_TEXT = re.compile(r"\\(?:text|textnormal|textup|textit|textsf|mathrm|textrm|textbf|mathbf|mbox|operatorname)"
                       r"\s*\{([^{}]{0,80})\}")


def _is_math(inner: str) -> bool:
    """A $...$ span holds mathematics, not two dollar amounts ("$18 a day and $")."""
    return WORDY.search(UNIT_TEXT.sub("", inner)) is None or "\\" in inner


_EQUALS = re.compile(r"(?<![<>!=\\:])=(?!=)")
_NAME = re.compile(r"\s*(?:[A-Za-z](?:_\{?\w{1,8}\}?)?(?:\s*\([^()=]{0,20}\))?|\|[A-Z]{1,4}\||\\angle\s*[A-Z]{1,3})\s*")


def _result(inner: str) -> str:
    """The value a math span states: the result of a computation or of an assignment ("9 \\cdot 2 = 18",
    "x = 5 + 1 = 6": the last side); an equation or a relation is stated whole ("5x - 7y + 4 = 0")."""
    sides = _EQUALS.split(inner)
    if len(sides) == 1:
        return inner.strip()
    before = "".join(sides[:-1])
    if _NAME.fullmatch(sides[0]) or not re.search(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", "", before)):
        return sides[-1].strip()
    return inner.strip()


def span_value(region: str) -> tuple[str, int] | None:
    """When ``region`` opens with a math span (``$2p+2=256$``): the value it states and where it ends."""
    start = len(region) - len(region.lstrip(" \t*_:\"'"))
    match = _MATH_SPAN.match(region, start)
    if match is None:
        return None
    return _result(next(g for g in match.groups() if g is not None)), match.end()


def sentence_values(sentence: str, positions: bool = False, words: bool = False) -> list:
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
            found.append((_result(inner), match.start(), match.end()))
    starts = [a for a, _ in spans]
    for number, start, end in (_numbers(sentence) + word_numbers(sentence) if words else _numbers(sentence)):
        inside = bisect.bisect_right(starts, start) - 1  # the spans do not overlap: one lookup
        if inside < 0 or start >= spans[inside][1]:
            found.append((number, start, end))
    found.sort(key=lambda item: item[1])
    return found if positions else [value for value, _, _ in found]


CONCLUSION = re.compile(r"\b(?:in[ \t]+the[ \t]+end|in[ \t]+conclusion|to[ \t]+conclude|in[ \t]+summary|"
                        r"to[ \t]+summari[sz]e|all[ \t]+in[ \t]+all|ultimately|final[ \t]+result)\b", re.I)
_CONDITION = re.compile(r"\b(?:when|whenever|where|wherein|if|iff|such[ \t]+that|achieved|attained|occurs?|"
                        r"holds?|equality|minimi[sz]ed|maximi[sz]ed)\b", re.I)
_CLAUSE_BREAK = re.compile(r"[,;:]|\bthen\b", re.I)


def conditioned(sentence: str, at: int) -> bool:
    """The value at ``at`` is a condition in its clause ("achieved when a = b = 1"), not a result
    ("if only 14 remained, then 40 - 14 = 26")."""
    condition = None
    for condition in _CONDITION.finditer(sentence, max(0, at - 40), at):  # noqa: B007 (the last one is kept)
        pass
    return condition is not None and _CLAUSE_BREAK.search(sentence, condition.end(), at) is None


def stated(sentence: str) -> list[str]:
    """The values a sentence states, leaving out those it gives as a condition ("this minimum is
    achieved when a = b = 1", "equality holds if x = 2")."""
    return [value for value, at, _ in sentence_values(sentence, positions=True) if not conditioned(sentence, at)]


def short(value: str, limit: int = 40) -> str:
    """``value`` on one line, cut to ``limit`` characters (for messages)."""
    value = " ".join(value.split())
    return value if len(value) <= limit else value[:limit - 3] + "..."
