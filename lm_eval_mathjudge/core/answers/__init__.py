"""The answer policy: when a response commits to one final answer, and which.

The model under test writes the text a judge reads, so a response that gives
several answers, hedges, or revises its answer must never be credited for
the one that happens to be right. Every exact-match judge applies the same
policy: the local judge in code (this package, run inside its worker
process), LLM judges through rule 1 of their prompt; so a cascade's rule
stage only credits what its LLM stage would credit too. ``_text`` holds the
vocabulary (sentences, numbers, hedges, refusals), ``_values`` the values and
the gold's shape; this module finds the final statements and decides.

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

import itertools
import re
from dataclasses import dataclass
from typing import Callable, Iterator

from ._text import (ALTERNATIVE, BOX, COMMAND, CONCLUSION, HEDGE_WORDS, INLINE_ANCHOR, LINE_ANCHOR, NEGATED, NUMBER,
                    REFUSAL, REGION, REVOKED, UNIT_TEXT, box_content, clean, conditioned, sentence_bounds, sentence_end,
                    sentence_values, short, stated, word_numbers)
from ._values import LEAD_DECOR, Shape, as_number, normalise, value_of, value_problem

MAX_STATEMENTS = 64  # final statements weighed; a response with more is several answers anyway
MAX_DISTINCT = 8  # distinct values compared with math-verify before "several answers" is certain
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


# ------------------------------------------------------------------ reading

_BARE_BOX = re.compile(r"[^\s$.,;]{1,40}")
_VISIBLE = re.compile(r"\S")
_CLAUSE = re.compile(r"[.!?;:]\s")
_HEDGE_FIRST = re.compile(r"[ \t*_$]*(?:(?:is|be)[ \t]+)?(?:" + HEDGE_WORDS.pattern + ")", re.I)
_TEXT_ANSWER = re.compile(r"[ \t*_\"'(]*([A-Za-z][\w' ()-]{0,40}?)[ \t*_\"')]*$")
_DOUBT = re.compile(r"\b(?:maybe|perhaps|probably|possibly|not[ \t]+(?:sure|certain|confident)|unsure|uncertain|"
                    r"i[ \t]+think|i[ \t]+guess|(?:could|might|may)[ \t]+be[ \t]+wrong|not[ \t]+100%|"
                    r"likely|presumably|i[ \t]+suspect|"  # "it could be 18": a guess, not a committed answer
                    r"(?:could|might|may)[ \t]+(?:well[ \t]+)?(?:be|equal)[ \t]+(?:about[ \t]+|around[ \t]+)?[$\\(]*[-\u2212]?\.?\d)",
                    re.I)
_TAKEN_BACK = re.compile(r"\b(?:actually|instead|rather|i[ \t]+mean|no,|nope|correction)(?![A-Za-z])", re.I)
_REVISING = re.compile(r"\b(?:wait|actually|no,|correction|i[ \t]+mean|rather|instead|kidding|oops|"
                       r"on[ \t]+second[ \t]+thought)\b", re.I)
_BARE = re.compile(r"[A-Za-z]{2,}")
_GAP = re.compile(r"[ \t$*_]*(?:[,;/|]|\bor\b|\band\b|\bto\b|[\u2013\u2014])?[ \t$*_]*", re.I)


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
        problem, others = _around(before, after, content, shape)
        if text.startswith("?", stop):
            problem = problem or f"a question, not an answer ({short(content)!r}?)"
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
    r"^[ \t$*_),;:(]*(?:or\b(?![ \t$]*\\boxed)|approx|roughly|about\b|around\b|maybe|perhaps|probably|possibly|"
    r"give[ \t]+or[ \t]+take|more[ \t]+or[ \t]+less|at[ \t]+(?:least|most)|or[ \t]+so|-?ish\b|\?|\+/-|\+(?![ \t]*\d)|"
    r"plus[ \t]+or[ \t]+minus|circa)", re.I)
_OTHERWISE = re.compile(r"\b(?:otherwise|unless|else|alternatively|or|either|in[ \t]+which[ \t]+case|if[ \t]+not|"
                        r"depending|(?:could|might|may)[ \t]+(?:also[ \t]+)?be|wait|actually|instead|rather|"
                        r"i[ \t]+mean|so[ \t]+in[ \t]+the[ \t]+end|in[ \t]+the[ \t]+end|no,)(?![A-Za-z])", re.I)


_RUN_ON = re.compile(r"(?<=[a-z0-9$}.,;:])[ \t]+(?=(?!I\b)[A-Z][a-z])")


def _around(before: str, after: str, value: str, shape: Shape) -> tuple[str | None, tuple[str, ...]]:
    """What a value's sentence says around it: (a hedge, or None; the values offered beside it).
    Only the text near the value is read (``_WINDOW`` before it, ``REGION`` after it)."""
    before, after = before[-_WINDOW:], after[:REGION]
    clause = _CLAUSE.split(before)[-1] if before else ""
    if hedge := (_HEDGE_BEFORE.search(clause) or _DOUBT.search(clause)):
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
    elif hedge := _HEDGE_AFTER.search(after):
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
            boxed = next((b for b in box_starts if at <= b < end), None)
            if boxed is not None:  # "The answer is \boxed{18}", "the answer is 7!/4 = \boxed{1260}": the box is it
                end = boxed  # ... unless a value of its own comes first ("Final answer: 19 \boxed{18}")
                if text[at:end].rstrip(" \t$([\\").endswith("=") or not _VISIBLE.search(text[at:end].strip("$\\([ ")):
                    continue
            region = text[at:end]
            if NEGATED.match(region):
                continue  # "the answer is not 20" commits to no value
            if _HEDGE_FIRST.match(region):
                yield Statement("answer", match.start(), end, region.strip(),
                                f"a hedged answer ({short(region.strip(), 60)!r})")
                continue
            value, rest = value_of(region)
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
            problem, others = _around("", rest, value, shape)
            if text.startswith("?", end):
                problem = problem or f"a question, not an answer ({short(value)!r}?)"
            yield Statement("answer", match.start(), at + len(region) - len(rest), value,
                            value_problem(value, shape) or problem, others)


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


def read(response: str, gold: str, question: str = "") -> Reading:
    """Find the final statements of ``response`` and what keeps it from one answer."""
    text = clean(response)
    shape = Shape.of(gold)
    refusal = None  # the last one: a refusal after the final statements takes them back
    for found in REFUSAL.finditer(text):
        if found.group().lower() not in gold.lower():
            refusal = found
    boxes = list(itertools.islice(_boxes(text, shape), 2 * MAX_STATEMENTS))  # more are refused anyway
    answers = itertools.islice(_answer_statements(text, shape, boxes), 2 * MAX_STATEMENTS)
    marked = _merge(sorted([*boxes, *answers], key=lambda s: s.start))
    if len(marked) > MAX_STATEMENTS:
        return Reading((), f"the response makes {len(marked)} final statements")
    if refusal is not None and (not marked or refusal.start() > marked[-1].start):
        return Reading((), f"the response declines to answer ({short(refusal.group())!r})")
    if not marked:  # a plain-text answer: its closing sentence, and every conclusion or revision before it
        closing = _closing(text, question, shape)
        if closing is None:
            return Reading((), None)
        concluded = _conclusions(text, closing.start, shape, CONCLUSION, _REVISING)
        if not concluded:
            return Reading((closing,), None)
        return _capped((concluded[0], *_later(text, concluded[:1], shape), closing))
    concluded = [c for c in _conclusions(text, len(text), shape, CONCLUSION)
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
                statement := _sentence_statement("result", sentence, start, shape, words=True)):
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
        shown = ", then ".join(short(g) for g in groups[:4])
        return Decision(False, None, f"The response gives several different final answers ({shown}).")
    answer = groups[0]
    if _equal(gold, answer, shape, same):
        return Decision(True, answer, f"The response's one final answer {short(answer)} matches the reference "
                                      f"answer {short(gold)}.")
    return Decision(False, answer, f"The response's final answer {short(answer)} does not match the reference "
                                   f"answer {short(gold)}.")


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
        words = [_NOT_WORD.sub(" ", COMMAND.sub(" ", UNIT_TEXT.sub(r" \1 ", v)).lower()).split() for v in (a, b)]
        if words[0] == words[1]:
            return True
    return same(left, right)


def answer_classes(answers: list[str | None], gold: str, same: Callable[[str, str], bool]) -> list[int | None]:
    """For each final answer, the index of its equivalence class (first appearance first, equivalence as
    ``decide`` compares an answer with the gold: ``1/2``, ``0.5`` and ``\\frac12`` are one class); None for
    a response without one final answer. The majority vote of k samples counts these classes."""
    shape = Shape.of(gold)
    classes: list[str] = []
    out: list[int | None] = []
    for answer in answers:
        if answer is None:
            out.append(None)
            continue
        found = next((i for i, c in enumerate(classes) if _equal(answer, c, shape, same)), None)
        if found is None:
            classes.append(answer)
            found = len(classes) - 1
        out.append(found)
    return out
