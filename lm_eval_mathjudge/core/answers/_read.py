"""Reading a response: its final statements and what keeps it from one answer (pure text work)."""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import re
from dataclasses import dataclass
from typing import Iterator

from ._context import CROSSED_OUT, REMARK, REVISION, SENTENCE_BREAK, STRUCK, unreadable
from ._text import (ALTERNATIVE, BOX, CONCLUSION, HEDGE_WORDS, INLINE_ANCHOR, LINE_ANCHOR, NEGATED, NUMBER, REFUSAL,
                    REGION, REVOKED, box_content, clean, conditioned, sentence_bounds, sentence_end, sentence_values,
                    short, span_value, stated, word_numbers)
from ._values import LEAD_DECOR, Shape, exact_part, value_of, value_problem
from .gold import is_prose, unwrap

MAX_STATEMENTS = 64  # final statements weighed; a response with more is several answers anyway
MAX_DISTINCT = 8  # distinct values compared with math-verify before "several answers" is certain
_WINDOW = 60  # characters before a final value read for hedges, examples, conditions ("about \boxed{18}")
_SENTENCE_SCAN = 2000  # characters at the end of a sentence read for the value it states


@dataclass(frozen=True)
class Statement:
    kind: str  # "boxed", "answer", "conclusion" ("in the end ..."), "closing" (a plain text's last value), or
    # "result" (a sentence after the final statements that states a value)
    start: int  # offset in the cleaned response
    end: int
    value: str  # the value as stated (inside the box, after the anchor); "" for a revision
    problem: str | None = None  # why this statement does not commit to one value
    others: tuple[str, ...] = ()  # values offered beside it ("18 (or 20)", "17 or \boxed{18}")
    revises: bool = False  # an explicit correction ("wait", "I made an error") stands between it and the one before


@dataclass(frozen=True)
class Reading:
    statements: tuple[Statement, ...]
    problem: str | None  # why the response as a whole is not credited (a refusal, ...), else None
    several: bool = False  # the problem is a list of final statements (several answers, certainly)


# ------------------------------------------------------------------ reading

_BARE_BOX = re.compile(r"[^\s$.,;]{1,40}")
_VISIBLE = re.compile(r"\S")
_CLAUSE = re.compile(r"[.!?;:]\s")
_HEDGE_FIRST = re.compile(r"[ \t*_$]*(?:(?:is|be)[ \t]+)?(?:" + HEDGE_WORDS.pattern + ")", re.I)
_TEXT_ANSWER = re.compile(r"[ \t*_\"'(]*([A-Za-z][\w' ()-]{0,40}?)[ \t*_\"')]*$")
_DOUBT = re.compile(r"\b(?:maybe|perhaps|probably|possibly|not[ \t]+(?:sure|certain|confident)|unsure|uncertain|"
                    r"i[ \t]+think|i[ \t]+guess|i'd[ \t]+(?:guess|say)|i[ \t]+would[ \t]+guess|"
                    r"my[ \t]+(?:best[ \t]+)?guess|(?:could|might|may)[ \t]+be[ \t]+wrong|not[ \t]+100%|"
                    r"likely|presumably|i[ \t]+suspect|"  # "it could be 18": a guess, not a committed answer
                    r"(?:could|might|may)[ \t]+(?:well[ \t]+)?(?:be|equal)[ \t]+(?:about[ \t]+|around[ \t]+)?"
                    r"[$\\(]*[-\u2212]?\.?\d)",
                    re.I)
_TAKEN_BACK = re.compile(r"\b(?:actually|instead|rather|i[ \t]+mean|no,|nope|correction)(?![A-Za-z])", re.I)
_REVISING = re.compile(r"\b(?:wait|actually|no,|correction|i[ \t]+mean|rather|instead|kidding|oops|"
                       r"on[ \t]+second[ \t]+thought)\b", re.I)
_BARE = re.compile(r"[A-Za-z]{2,}")
_STUB = re.compile(r"[\s$*_:]*(?:[A-Za-z](?:_\{?\w{1,8}\}?)?\s*\\in|(?:is|are|the|a)?[\s:]*)", re.I)  # "is $x \in"
_GAP = re.compile(r"[ \t$*_]*(?:[,;/|]|\bor\b|\band\b|\bto\b|[\u2013\u2014])?[ \t$*_]*", re.I)
_LIST_GAP = re.compile(r"[ \t$*_]*(?:,?[ \t]*\b(?:or|and)\b|[,;/|]|\bto\b|[\u2013\u2014])?[ \t$*_]*", re.I)  # "3, 5, and 7"


def _boxes(text: str, shape: Shape) -> Iterator[Statement]:
    for match in BOX.finditer(text):
        at = match.end()
        if at < len(text) and text[at] == "{":
            found = box_content(text, at)
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
        stop = sentence_end(text, end)
        after = text[end:stop]
        problem, others = _around(before, after, content, shape, marked=True)
        if text.startswith("?", stop):
            problem = problem or f"a question, not an answer ({short(content)!r}?)"
        if CROSSED_OUT.search(content):
            problem = f"a crossed-out value ({short(content)!r})"
        content = exact_part(content.strip())
        yield Statement("boxed", match.start(), end, content, value_problem(content, shape) or problem, others)


_HEDGE_BEFORE = re.compile(
    r"(?:\b(?:about|around|approximately|approx|roughly|nearly|almost|maybe|perhaps|probably|possibly|"
    r"at[ \t]+least|at[ \t]+most|more[ \t]+than|less[ \t]+than|fewer[ \t]+than|up[ \t]+to|between|"
    r"somewhere[ \t]+near|close[ \t]+to|estimated?|(?:no|not)[ \t]+(?:more|less|fewer)[ \t]+than|upwards[ \t]+of|"
    r"in[ \t]+excess[ \t]+of|under|over|circa|ca\.)|~|\u2248|\\approx|\\sim)[ \t]*(?:is[ \t]+|be[ \t]+)?"
    r"[$(\[\\ \t*_]*$", re.I)
_OR_BEFORE = re.compile(r"(?:\b(?:or|either|and/or|nor)|/)[ \t*_]*(?:is[ \t]+)?[$(\[\\ \t*_]*$", re.I)
_HEDGE_AFTER = re.compile(
    r"^[ \t$*_),;:(]*(?:or\b(?![ \t$]*\\boxed)|approx|roughly|about\b|around\b|maybe|perhaps|probably|possibly|"
    r"give[ \t]+or[ \t]+take|more[ \t]+or[ \t]+less|at[ \t]+(?:least|most)|or[ \t]+so|-?ish\b|\?|\+/-|\+(?![ \t]*\d)|"
    r"plus[ \t]+or[ \t]+minus|circa)", re.I)
_EXACT_FORM = re.compile(r"\\(?:frac|dfrac|tfrac|sqrt|pi)(?![A-Za-z])|/")  # a value a decimal only approximates
_DECIMAL_AFTER = re.compile(r"[ \t$*_),;:(]*(?:about|approximately|approx\.?|roughly|\\approx|\u2248)[ \t$]*-?\d*\.\d+"
                            r"[ \t$]*(?:[.,;)]|$)", re.I)  # "\frac{3}{56}, about 0.054": its decimal, no second answer
_OTHERWISE = re.compile(r"\b(?:otherwise|unless|else|alternatively|or|either|though|although|in[ \t]+which[ \t]+case|if[ \t]+not|"
                        r"depending|(?:could|might|may)[ \t]+(?:also[ \t]+)?be|wait|actually|instead|rather|"
                        r"i[ \t]+mean|so[ \t]+in[ \t]+the[ \t]+end|in[ \t]+the[ \t]+end|no,)(?![A-Za-z])", re.I)


_RUN_ON = re.compile(r"(?<=[a-z0-9$}.,;:])[ \t]+(?=(?!I\b)[A-Z][a-z])")


def _around(before: str, after: str, value: str, shape: Shape,
            marked: bool = False) -> tuple[str | None, tuple[str, ...]]:
    """What a value's sentence says around it: (a hedge, or None; the values offered beside it).
    Only the text near the value is read (``_WINDOW`` before it, ``REGION`` after it); ``marked``:
    a box or an answer statement; ``before`` starts at its line's start, or is cut short."""
    whole = len(before) < _WINDOW  # the window reaches back to the line's start
    before, after = before[-_WINDOW:], after[:REGION]
    clause = _CLAUSE.split(before)[-1] if before else ""
    sentences = SENTENCE_BREAK.split(before)
    if problem := unreadable(clause, after[:sentence_end(after, 0)], sentences[-1],
                             marked and (whole or len(sentences) > 1)):
        return problem, ()
    hedge = _HEDGE_BEFORE.search(clause) or _DOUBT.search(clause)
    if hedge and not (shape.commas and hedge.group().lower().startswith("between")):  # "between 12 and 13": two values
        return f"a hedge ({hedge.group().strip(' $([')!r} before {short(value)!r})", ()
    others: list[str] = []
    if _OR_BEFORE.search(clause):
        earlier = sentence_values(clause[:_OR_BEFORE.search(clause).start()])
        if not earlier:
            return f"alternatives ({short(clause.strip() + ' ' + value, 60)!r})", ()
        others.append(earlier[-1])
    joined = ALTERNATIVE.search(after) and not (shape.commas and after.lstrip(" \t*_$").startswith((",", ";")))
    if joined:
        others.extend(sentence_values(after) or ["?"])
    elif (hedge := _HEDGE_AFTER.search(after)) and not (_EXACT_FORM.search(value) and _DECIMAL_AFTER.match(after)):
        return f"a hedge ({hedge.group().strip(' $*_),;:(')!r} after {short(value)!r})", ()
    elif other := _OTHERWISE.search(after):  # "18 if she sells them all, otherwise 25"
        later = stated(after[other.end():])
        if not later and other.group().lower() in ("or", "either"):
            return None, tuple(others)
        if not later:
            return f"a condition or a revision ({other.group()!r} after {short(value)!r})", ()
        others.extend(later)
    if found := (REVOKED.search(after) or _DOUBT.search(after)):
        return f"a hedge ({found.group().strip()!r} after {short(value)!r})", ()
    run_on = _RUN_ON.search(after)  # "Final answer: 18 dollars She makes $19 a day": a new sentence
    if run_on is not None:
        others.extend(stated(after[run_on.end():]))
    return None, tuple(others)


def _answer_statements(text: str, shape: Shape, boxes: list[Statement]) -> Iterator[Statement]:
    box_starts = [b.start for b in boxes]
    anchors = sorted({m.start() for pattern in (LINE_ANCHOR, INLINE_ANCHOR) for m in pattern.finditer(text)})
    for pattern in (LINE_ANCHOR, INLINE_ANCHOR):
        for match in pattern.finditer(text):
            at = match.end()
            end = sentence_end(text, at)
            if not text[at:end].strip(" \t*_") and pattern is LINE_ANCHOR:  # a heading: value below
                following = _VISIBLE.search(text, end, end + 200)
                if following is None:
                    continue
                at = following.start()
                end = sentence_end(text, at)
            end = _before_next_anchor(text, at, end, anchors)
            boxed = next((b for b in box_starts if at <= b < end), None)
            if boxed is not None:  # "The answer is \boxed{18}", "the answer is 7!/4 = \boxed{1260}": the box is it
                end = boxed  # ... unless a value of its own comes first ("Final answer: 19 \boxed{18}")
                lead = text[at:end].rstrip(" \t$([\\")
                if lead.endswith("=") or not _VISIBLE.search(text[at:end].strip("$\\([ ")) or _STUB.fullmatch(lead):
                    continue
            region = text[at:end]
            if NEGATED.match(region):
                continue  # "the answer is not 20" commits to no value
            if _HEDGE_FIRST.match(region):
                yield Statement("answer", match.start(), end, region.strip(),
                                f"a hedged answer ({short(region.strip(), 60)!r})")
                continue
            value, rest = value_of(region)
            spanned = span_value(region)
            if spanned is not None and len(region) - len(rest) < spanned[1] - 1:  # the run stopped inside the span
                value, rest = spanned[0], region[spanned[1]:]
            value = exact_part(value)
            if "\\boxed" in value:
                continue  # the box in it is its own statement
            spelled = word_numbers(region[:40].lstrip(LEAD_DECOR))
            if not value and spelled and spelled[0][1] == 0:  # "The answer is twenty."
                value, rest = spelled[0][0], region.lstrip(LEAD_DECOR)[spelled[0][2]:]
            if not value:
                word = _TEXT_ANSWER.match(region.rstrip(". !")) if shape.words else None
                if word:  # an answer in words: "The answer is Evelyn."
                    yield Statement("answer", match.start(), end, word.group(1).strip())
                continue
            line_start = text.rfind("\n", max(0, match.start() - _WINDOW), match.start()) + 1
            line = text[max(line_start, match.start() - _WINDOW):match.start()]
            problem, others = _around(line, rest, value, shape, marked=True)
            if text.startswith("?", end):
                problem = problem or f"a question, not an answer ({short(value)!r}?)"
            yield Statement("answer", match.start(), at + len(region) - len(rest), value,
                            value_problem(value, shape) or problem, others)


def _before_next_anchor(text: str, at: int, end: int, anchors: list[int]) -> int:
    """A statement's value ends where another answer statement begins, once it has a value of its own:
    in "Final answer: $19 #### $18" the first is 19 (not a dollar span running into the second), while
    "Final Answer: The final answer is 18" is one statement, read at its inner anchor."""
    i = bisect.bisect_right(anchors, at)
    if i < len(anchors) and anchors[i] < end and _VISIBLE.search(text[at:anchors[i]].strip(" \t*_$\\([")):
        return anchors[i]
    return end


def _sentence_statement(kind: str, sentence: str, offset: int, shape: Shape, previous: str = "",
                        words: bool = False) -> Statement | None:
    """A sentence read as a final statement at its last stated value, the way an answer statement is
    read at its value: hedges and alternatives around the value, a list, doubt, a revision. Only
    its last ``_SENTENCE_SCAN`` characters are searched for values (bounded work per sentence)."""
    if len(sentence) > _SENTENCE_SCAN:
        offset, sentence = offset + len(sentence) - _SENTENCE_SCAN, sentence[-_SENTENCE_SCAN:]
    values = [v for v in sentence_values(sentence, positions=True, words=words) if not conditioned(sentence, v[1])]
    if not values:
        return None
    value, at, stop = values[-1]
    first = len(values) - 1
    while shape.commas and first and _LIST_GAP.fullmatch(sentence, values[first - 1][2], values[first][1]):
        first -= 1  # "The solutions are $x=-2$ and $x=1$": one answer of several values
    if first < len(values) - 1:
        value, at = ", ".join(v for v, _, _ in values[first:]), values[first][1]
    value = exact_part(value)
    problem, others = _around(sentence[:at], sentence[stop:], value, shape)
    if len(values) > 1 and _GAP.fullmatch(sentence, values[-2][2], at) is not None and not shape.commas or (
            _is_bare_values(sentence) and _is_bare_values(previous)):
        problem = f"a list of numbers ({short(sentence.strip(), 60)!r})"
    elif doubt := (_DOUBT.search(sentence) or _REVISING.search(sentence) or REVOKED.search(sentence)):
        if kind == "closing" or not _REVISING.fullmatch(doubt.group()):  # a later "actually 18" restates
            problem = f"doubt or a revision ({doubt.group().strip()!r} in {short(sentence.strip(), 60)!r})"
    return Statement(kind, offset + at, offset + stop, value, value_problem(value, shape) or problem, others)


def _closing(text: str, question: str, shape: Shape) -> Statement | None:
    """The final statement of a response with no box and no answer statement: its closing sentence
    that names a number (not a question, not a sentence copied from the problem)."""
    asked = " ".join(question.split()).lower()
    bounds = sentence_bounds(text)
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
    return bool(NUMBER.search(sentence)) and _BARE.search(sentence) is None


def gold_answer(gold: str) -> str | None:
    """The gold's one value: the gold itself when it is a value; the final answer of a worked
    solution (its boxes, or its answer statement) otherwise; None when it has no one final answer."""
    text = unwrap(gold)
    if "\\boxed" not in text and "\\fbox" not in text and not is_prose(text):
        return text
    reading = _read(clean(text), "", Shape(numeric=False, commas=True, hedges=True, bounds=True, words=True), "",
                    units=True)
    if not reading.statements and not reading.problem:
        return text  # words, not a solution ("All odd positive integers"): matched word for word
    if reading.problem or any(s.problem for s in reading.statements):
        return None
    committed = [s for s in reading.statements if s.kind != "result"] or list(reading.statements)
    values = {" ".join(unwrap(s.value).split()) for s in committed if s.value}
    return values.pop() if len(values) == 1 else None


def read(response: str, gold: str, question: str = "") -> Reading:
    """Find the final statements of ``response`` and what keeps it from one answer."""
    if struck := STRUCK.search(response or ""):
        return Reading((), f"struck-out text ({short(struck.group())!r}) around the answer")
    value = gold_answer(gold)
    return _read(clean(response), value or gold, Shape.of(value or gold), question)


def _read(text: str, gold: str, shape: Shape, question: str, units: bool = False) -> Reading:
    refusal = None  # the last one: a refusal after the final statements takes them back
    for found in REFUSAL.finditer(text):
        if found.group().lower() not in gold.lower():
            refusal = found
    boxes = list(itertools.islice(_boxes(text, shape), 2 * MAX_STATEMENTS))  # more are refused anyway
    answers = itertools.islice(_answer_statements(text, shape, boxes), 2 * MAX_STATEMENTS)
    marked = _merge(sorted([*boxes, *answers], key=lambda s: s.start))
    if shape.commas:  # a gold of several values, answered in several boxes: "\boxed{-2} and \boxed{1}"
        marked = _joined(text, marked, _UNIT_JOINER if units else _JOINER)
    if len(marked) > MAX_STATEMENTS:
        return Reading((), f"the response makes {len(marked)} final statements", several=True)
    if refusal is not None and (not marked or refusal.start() > marked[-1].start):
        return Reading((), f"the response declines to answer ({short(refusal.group())!r})")
    if not marked:  # a plain-text answer: its closing sentence, and every conclusion or revision before it
        closing = _closing(text, question, shape)
        if closing is None:
            return Reading((), None)
        concluded = _conclusions(text, closing.start, shape, CONCLUSION, _REVISING)
        if not concluded:
            return Reading((closing,), None)
        return _capped(text, (concluded[0], *_later(text, concluded[:1], shape), closing))
    concluded = [c for c in _conclusions(text, len(text), shape, CONCLUSION)
                 if not any(s.start <= c.start < s.end or c.start <= s.start < c.end for s in marked)]
    statements = sorted(marked + concluded, key=lambda s: s.start)
    return _capped(text, tuple(statements) + tuple(_later(text, statements, shape)))


def _capped(text: str, statements: tuple[Statement, ...]) -> Reading:
    if len(statements) > MAX_STATEMENTS:
        return Reading((), f"the response makes {len(statements)} final statements", several=True)
    marked = [statements[0]] + [dataclasses.replace(s, revises=True)
                                if REVISION.search(text, previous.end, max(previous.end, s.start)) else s
                                for previous, s in zip(statements, statements[1:])]
    return Reading(tuple(marked), None)


_JOINER = re.compile(r"(?:[\s$,;.~]|\\[,;:! ]|\\q?quad\b|\\\]|\\\[|\\\)|\\\()*"
                     r"(?:(?:\\(?:text|mathrm|mbox|textrm)\s*\{\s*)?(?:and|&)(?:\s*\})?)?"
                     r"(?:[\s$,;~]|\\[,;:! ]|\\q?quad\b|\\\]|\\\[|\\\)|\\\()*(?:[A-Za-z](?:_\{?\w{1,8}\}?)?\s*=\s*)?\$?\s*",
                     re.I)


_JOIN_GAP = 120  # characters between two boxes read as a joiner (bounded work on hostile gaps)
_JOINED = 2000  # characters of one answer made of several boxes
_TEXT_AND = re.compile(r"\s*\\(?:text|mbox|textrm)\s*\{(?=[^{}]*\band\b)(?![^{}]*\b(?:or|maybe|either|perhaps|possibly)\b)"
                       r"[A-Za-z ().,]{1,40}\}\s*\$?\s*")  # "\boxed{(3, 3)} \text{ for part (a) and } \boxed{(1, 1)}"
_UNIT_JOINER = re.compile(r"[ \t]*[A-Za-z]{1,12}[ \t]*(?:" + _JOINER.pattern + ")", re.I)  # "\boxed{1} papers and \boxed{2}"


def _joined(text: str, statements: list[Statement], joiner: re.Pattern = _JOINER) -> list[Statement]:
    """Boxes joined only by "and" or a comma are one answer of several values (``\boxed{-2} and \boxed{1}``)."""
    kept: list[Statement] = []
    for statement in statements:
        last = kept[-1] if kept else None
        if last is not None and last.kind == statement.kind == "boxed" and not (last.problem or statement.problem) \
                and statement.start - last.end <= _JOIN_GAP and len(last.value) + len(statement.value) < _JOINED \
                and any(j.fullmatch(text, last.end, statement.start) for j in (_JOINER, _TEXT_AND, joiner)):
            kept[-1] = dataclasses.replace(last, end=statement.end, value=f"{last.value}, {statement.value}",
                                           others=last.others + statement.others)
            continue
        kept.append(statement)
    return kept


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


def _conclusions(text: str, before: int, shape: Shape, *markers: re.Pattern) -> list[Statement]:
    """Sentences that start before offset ``before`` with one of ``markers`` ("So in the end she makes $20."):
    final statements wherever they stand. (Working never says "in the end": 0 of 2,001 correct GPT-3
    GSM8K solutions conclude an intermediate value that way.)"""
    found = []
    for start, end in sentence_bounds(text):
        if start >= before:
            break
        sentence = text[start:end]
        if any(m.search(sentence) for m in markers) and (
                statement := _sentence_statement("conclusion", sentence, start, shape, words=True)):
            found.append(statement)
    return found


def _later(text: str, statements: list[Statement], shape: Shape) -> list[Statement]:
    """What follows the last final statement: every sentence there that states a value (not as a
    condition) is a final statement too; one that revokes the answer or doubts it is a problem."""
    last = statements[-1].end
    found: list[Statement] = []
    for start, end in sentence_bounds(text):
        if start < last:  # before it, or the rest of its own sentence (which _around has read)
            continue
        sentence = text[start:end]
        if revoked := REVOKED.search(sentence):
            found.append(Statement("result", start, end, "", f"a revision ({revoked.group().strip()!r})"))
        elif doubt := _DOUBT.search(sentence):
            found.append(Statement("result", start, end, "", f"doubt ({doubt.group().strip()!r})"))
        elif REMARK.search(sentence):
            continue
        elif statement := _sentence_statement("result", sentence, start, shape, words=True):
            found.append(statement)
        elif revised := _TAKEN_BACK.search(sentence):  # "Actually, no." takes the answer back
            found.append(Statement("result", start, end, "", f"a revision ({revised.group().strip()!r})"))
        if len(found) > MAX_STATEMENTS:
            break  # refused as too many in any case
    return found
