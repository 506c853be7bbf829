"""Judge reply text -> verdict, or an explicit :class:`UnparseableReply`.

Two pure parsers, one per judging protocol. Neither ever guesses: a reply that
does not follow its contract, or that the parser is unsure about, raises
``UnparseableReply(reason)`` (the client asks once more, then counts the
sample as a judge failure). Nothing else is ever raised, for any ``str``.

``parse_exact_match(text) -> ExactMatchVerdict``
    GPT4-based Exact Match (Orca-Math). Contract: an ``Error Analysis:`` part
    and a ``Final Verdict:`` line whose value is exactly ``Correct`` or
    ``Incorrect``. A bare label line (a heading) takes its value from the next
    non-blank line.

``parse_vlm(text) -> VlmVerdict``
    VLM-as-judge (Gemini). Contract: lines ``INTERMEDIATE_CORRECT: 0|1``,
    ``FINAL_CORRECT: 0|1``, ``ACTION_REFLECTION: 0|1`` and ``EXPLANATION: ...``.
    The three binary fields are required, in any order, before ``EXPLANATION``.
    ``EXPLANATION`` may be missing or empty (-> ""); after it, a field-like line
    whose value is not 0/1 is prose ("- Final correct: the boxed 12 matches"),
    one whose value is 0/1 may only repeat a field already given: a field that
    first appears inside the explanation (a bullet ``- ACTION_REFLECTION: 1``
    under "Their notes list:") is refused, never read as the value.

The rules both share, in order:

1. Reasoning blocks go: ``<think>...</think>`` (or ``thinking``) is removed,
   an orphan close tag drops everything before it, an unclosed open tag
   everything after it.
2. Lines: the ONLY line break is ``\\n`` (``\\r\\n`` counts as one). Form feed,
   vertical tab, NEL (U+0085), U+2028/U+2029 and a lone ``\\r`` are characters
   inside a line: a quoted student answer cannot open a fresh line with them,
   and a verdict value that contains one is not clean, so it is refused.
3. Quoted (``>``) and indented (4+ columns, a markdown code block) lines are
   never label lines and never count as a verdict: they hold material the
   judge quotes. Code-fence lines (```` ``` ````, ``~~~``) are dropped, their
   content kept (judges wrap whole replies in fences).
4. A label line starts with the label after markdown decoration (``#``,
   bullets, ``*``/``_``/backtick emphasis, a list number). A value is clean
   when, without surrounding whitespace, emphasis, quotes, brackets and a
   trailing ``.``/``!``, it is exactly the expected word or digit; anything
   else (``~~Correct~~``, ``Correct ❌``, combining overlays) is refused.
5. Disagreement is refused in both parsers: two verdict lines (or two
   copies of a field) with different values, a qualified label such as
   ``Final Verdict (revised):``, and a restatement that contradicts the
   verdict (exact match: any mention of "Final Verdict" after the last verdict
   line; VLM: a ``FIELD: 0|1`` statement anywhere in the text that disagrees
   with the field). A judge that changed its mind is asked again rather than
   read by position: "last wins" would also let trailing quoted or injected
   text decide the score.
6. A reply cut short is refused, even when an earlier full verdict line
   exists (it may be the judge quoting the student): its last line is a
   label cut short (``Final Verd``, ``**FINAL_COR``, ``Error Anal``) or a
   label with nothing after it (``FINAL_CORRECT:``). A reply the backend
   reports as stopped at its token limit never reaches the parser
   (``finish_reason`` ``length`` / ``MAX_TOKENS``: the backends and the client
   refuse it).

Every step is a single pass with ``str`` methods or anchored regexes that look
at a bounded prefix of a line, so parsing time is linear in the reply length
(``bench/parsing.py``). Nothing here does I/O; importing only compiles regexes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import UnparseableReply

__all__ = ["ExactMatchVerdict", "VlmVerdict", "parse_exact_match", "parse_vlm"]


@dataclass(frozen=True)
class ExactMatchVerdict:
    correct: bool
    analysis: str


@dataclass(frozen=True)
class VlmVerdict:
    intermediate_correct: int
    final_correct: int
    action_reflection: int
    explanation: str


_THINK_TAG = re.compile(r"</?think(?:ing)?>", re.I)
_THINK_OPEN = re.compile(r"<(think(?:ing)?)>", re.I)
_THINK_CLOSE = {name: re.compile(f"</{name}>", re.I) for name in ("think", "thinking")}
_LAST_THINK_CLOSE = re.compile(r".*</think(?:ing)?>", re.I | re.S)  # greedy: the last one
_FENCE_INFO = re.compile(r"[\w+.-]*")
_INDENT_COLUMNS = 4  # markdown: this much indentation is a code block
_LEAD = "#*_`+-\u2022 \t"  # headings, bullets, emphasis before a label
_EMPHASIS = "*_` \t"
_SEPARATORS = ":\uff1a=-\u2013\u2014"
_VALUE_DECOR = " \t*_`'\"\u201c\u201d\u2018\u2019[]()"
_LABEL_SCAN = 64  # label regexes see at most this many characters of a line: bounded work per line
_CUT_SCAN = 40  # a last line longer than this is never a label cut short (rule 6)
_EXACT_LABELS = ("final verdict", "error analysis")
_VLM_LABELS = ("intermediate correct", "final correct", "action reflection", "explanation")

_VERDICT_LABEL = re.compile(r"final[ \t]+verdict", re.I)
_ANALYSIS_LABEL = re.compile(r"error[ \t]+analysis", re.I)
_BOLD = re.compile(r"\*\*|__")
_VERDICT_WORDS = {"correct": True, "incorrect": False}
_ECHO = re.compile(r"<?(correct|incorrect)\s*(?:or|/|\|)\s*(correct|incorrect)>?")

_FIELD_LABEL = re.compile(
    r"(?:intermediate|final)[ \t_-]*correct|action[ \t_-]*reflection|explanation", re.I)
_LABEL_GAP = re.compile(r"[ \t_-]+")
_BINARY_FIELDS = ("INTERMEDIATE_CORRECT", "FINAL_CORRECT", "ACTION_REFLECTION")
# Bounded repeats only: each match attempt does O(1) work, so findall is linear in the line.
_STATEMENT = re.compile(
    r"((?:intermediate|final)[ \t_-]{0,3}correct|action[ \t_-]{0,3}reflection)"
    r"[*_` \t]{0,4}[:\uff1a=][ \t*_`'\"\u201c\u201d\u2018\u2019\[\]()]{0,6}([01])(?!\d|\.\d)")


# ---------------------------------------------------------------- shared rules

def drop_reasoning(text: str) -> str:
    """Rule 1, in one left-to-right pass: each search is a C-level scan from where the last ended."""
    if "<" not in text:  # C-speed shortcut: most replies have no tag at all
        return text
    pieces: list[str] = []
    kept_from = 0
    while (opened := _THINK_OPEN.search(text, kept_from)) is not None:
        pieces.append(text[kept_from:opened.start()])
        closed = _THINK_CLOSE[opened.group(1).lower()].search(text, opened.end())
        if closed is None:  # unclosed block: a truncated reasoning reply
            return _after_orphan_close("".join(pieces))
        kept_from = closed.end()
    pieces.append(text[kept_from:])
    return _after_orphan_close("".join(pieces))


def _after_orphan_close(kept: str) -> str:
    """What follows the last orphan close tag (its open tag was in the prompt template)."""
    last = _LAST_THINK_CLOSE.match(kept)
    return kept[last.end():] if last else kept


def _split_lines(text: str) -> list[str]:
    """Rule 2: lines end at "\\n" only."""
    return text.replace("\r\n", "\n").split("\n")


def _is_fence(line: str) -> bool:
    stripped = line.strip()
    return stripped[:3] in ("```", "~~~") and _FENCE_INFO.fullmatch(stripped, 3) is not None


def _reply_lines(text: str) -> list[str]:
    """Content lines of a reply; an empty reply (or one that is all reasoning) is unparseable."""
    text = text or ""
    lines = [line for line in _split_lines(drop_reasoning(text))
             if not (("`" in line or "~" in line) and _is_fence(line))]
    if any(line.strip() for line in lines):
        return lines
    if _THINK_TAG.search(text):
        raise UnparseableReply("empty reply outside <think> block")
    raise UnparseableReply("empty reply")


def _body(line: str) -> str | None:
    """Rule 3 and the start of rule 4: the line after its markdown lead, None if quoted or indented."""
    if not line:
        return line
    rest = line.lstrip(" \t")
    indent = len(line) - len(rest)
    columns = indent + (_INDENT_COLUMNS - 1) * line.count("\t", 0, indent)
    if columns >= _INDENT_COLUMNS or rest.startswith(">"):
        return None
    rest = rest.lstrip(_LEAD)
    if rest.startswith(">"):  # a quote inside a list item
        return None
    digits = len(rest) - len(rest.lstrip("0123456789"))
    if 0 < digits <= 3 and rest[digits:digits + 1] in (".", ")"):  # "2. Final Verdict: ..."
        rest = rest[digits + 1:]
    return rest.lstrip(_EMPHASIS)


def _check_not_cut(lines: list[str], labels: tuple[str, ...], may_end: str = "") -> None:
    """Rule 6: refuse a reply whose last line is one of ``labels`` cut short ("Final Verd") or
    left without its value ("FINAL_CORRECT:"). ``may_end`` is the one label that may end a reply
    with nothing after it (the VLM's empty EXPLANATION)."""
    last = next((line for line in reversed(lines) if line.strip()), "")
    body = _body(last)
    if not body or len(body) > _CUT_SCAN:
        return
    core = body.strip(_EMPHASIS).rstrip(_SEPARATORS + _EMPHASIS)
    words = " ".join(core.replace("_", " ").replace("-", " ").lower().split())
    if words and any(label.startswith(words) and words != may_end for label in labels):
        raise UnparseableReply(f"the reply ends in the label {_short(last)!r} with no value after it "
                               "(a reply cut short?)")


def _labelled(body: str | None, label: re.Pattern) -> tuple[str, str, str] | None:
    """(kind, rest, label text) if ``body`` starts with ``label``. kind is "value" (a separator
    follows; rest is the value), "bare" (nothing follows) or "other" (e.g. "(revised): ...")."""
    if body is None:
        return None
    match = label.match(body, 0, _LABEL_SCAN)
    if match is None:
        return None
    rest = body[match.end():].lstrip(_EMPHASIS)
    if not rest:
        return "bare", "", match.group()
    if rest[0] in _SEPARATORS:
        return "value", rest[1:], match.group()
    return "other", rest, match.group()


def _core(value: str) -> str:
    """The value without surrounding whitespace, emphasis, quotes, brackets and a final '.'/'!'."""
    return value.strip().strip(_VALUE_DECOR).rstrip(".!;,").strip(_VALUE_DECOR)


def _printable(text: str) -> str:
    # Lone surrogates (invalid Unicode from a reply) cannot be written as UTF-8: escape them.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _short(value: str, limit: int = 40) -> str:
    value = _printable(value.strip()[:limit + 1])
    return value if len(value) <= limit else value[:limit - 3] + "..."


# ---------------------------------------------------------------- exact match

def _verdict_value(value: str) -> bool | None:
    """True/False for a clean value, None for a template echo ("Correct or Incorrect")."""
    core = _core(value)
    if not core:
        raise UnparseableReply("'Final Verdict' has no value (truncated reply?)")
    word = core.lower()
    if word in _VERDICT_WORDS:
        return _VERDICT_WORDS[word]
    echo = _ECHO.fullmatch(word) if len(word) < _LABEL_SCAN else None
    if echo and echo.group(1) != echo.group(2):
        return None
    raise UnparseableReply(f"'Final Verdict' value {_short(value)!r} is not Correct or Incorrect")


def _heading_value(lines: list[str], index: int) -> str:
    """The value under a bare 'Final Verdict' heading: the next non-blank line."""
    following = next((lines[i] for i in range(index + 1, len(lines)) if lines[i].strip()), "")
    body = _body(following)
    if body is None:
        raise UnparseableReply("'Final Verdict' heading is followed by quoted or indented text")
    return body


def _verdict_lines(lines: list[str], bodies: list[str | None]) -> tuple[list[tuple[int, bool]], list[int]]:
    """Index and value of every verdict line (rules 4 and 5; template echoes are skipped), and
    the indexes of all lines that start with the label."""
    found: list[tuple[int, bool]] = []
    labelled: list[int] = []
    echoed = ""
    for index, body in enumerate(bodies):
        label = _labelled(body, _VERDICT_LABEL) if body else None
        if label is None:
            continue
        labelled.append(index)
        kind, value, _ = label
        if kind == "other":
            raise UnparseableReply(f"unreadable 'Final Verdict' line {_short(lines[index])!r} "
                                   "(a revision or qualifier is not the contract)")
        if kind == "bare" or not _core(value):  # "### Final Verdict" or "**Final Verdict:**": value below
            value = _heading_value(lines, index)
        verdict = _verdict_value(value)
        if verdict is None:
            echoed = value
        else:
            found.append((index, verdict))
    if not found and echoed:
        raise UnparseableReply(f"'Final Verdict' value {_short(echoed)!r} is only the template's choice")
    if not found:
        raise UnparseableReply("no 'Final Verdict' line in the reply")
    if len({verdict for _, verdict in found}) > 1:
        words = ", then ".join("Correct" if v else "Incorrect" for _, v in found)
        raise UnparseableReply(f"'Final Verdict' lines disagree ({_short(words, 60)})")
    return found, labelled


def _check_nothing_after(bodies: list[str | None], last: int) -> None:
    for body in bodies[last + 1:]:
        if body and _VERDICT_LABEL.search(body):
            raise UnparseableReply("the reply mentions 'Final Verdict' again after its verdict line "
                                   "(a self-revision?)")


def _clean_analysis(lines: list[str]) -> str:
    kept = [_BOLD.sub("", line).strip(" \t*_") for line in lines]
    return _printable("\n".join(line for line in kept if line))


def _analysis(lines: list[str], bodies: list[str | None], verdict_labels: list[int],
              verdict_index: int) -> str:
    """Text of the Error Analysis part, from its label up to the next verdict line.

    The last analysis before the verdict line is used; failing that, the
    first one after it (a judge that gave its verdict first). ``verdict_labels``
    are the indexes of all lines that start with the verdict label.
    """
    labels = [_labelled(body, _ANALYSIS_LABEL) if body else None for body in bodies]
    starts = [i for i, label in enumerate(labels) if label is not None and label[0] != "other"]
    before = [i for i in starts if i < verdict_index]
    start = before[-1] if before else next((i for i in starts if i > verdict_index), None)
    if start is None:
        return ""
    end = next((i for i in verdict_labels if i > start), len(lines))
    return _clean_analysis([labels[start][1], *lines[start + 1:end]])


def parse_exact_match(text: str) -> ExactMatchVerdict:
    """Parse an Error Analysis / Final Verdict reply; raise UnparseableReply if it has no clean verdict."""
    lines = _reply_lines(text)
    bodies = [_body(line) if line else line for line in lines]
    found, labelled = _verdict_lines(lines, bodies)
    _check_not_cut(lines, _EXACT_LABELS)
    last = found[-1][0]
    _check_nothing_after(bodies, last)
    return ExactMatchVerdict(correct=found[-1][1], analysis=_analysis(lines, bodies, labelled, last))


# --------------------------------------------------------------- VLM-as-judge

def _field_name(label: str) -> str:
    return _LABEL_GAP.sub("_", label.strip()).upper()


def _binary(value: str) -> int | None:
    """0 or 1 from a decorated value ('**1**', '`0`', '1.'), else None."""
    core = _core(value)
    return int(core) if core in ("0", "1") else None


def _record(fields: dict[str, int], name: str, value: int) -> None:
    previous = fields.setdefault(name, value)
    if previous != value:
        raise UnparseableReply(
            f"{name} given twice with different values ({previous}, then {value})")


def _statements(body: str) -> set[tuple[str, int]]:
    """Every "FIELD: 0|1" written anywhere in a line, e.g. "..., so FINAL_CORRECT: 0 after all".

    Matched case-sensitively on a lowercased copy: much faster than re.I over a long line."""
    low = body.lower()
    if "correct" not in low and "reflect" not in low:  # every field label holds one of these
        return set()
    return {(_field_name(label), int(value)) for label, value in set(_STATEMENT.findall(low))}


def _scan_vlm(lines: list[str]) -> tuple[dict[str, int], list[str] | None, set[tuple[str, int]]]:
    """Binary fields, the explanation lines (None without an EXPLANATION label) and every statement.

    Before EXPLANATION, a field line with a bad value is an error. After it, a
    field line counts only if its value is a clean 0/1 (so a repeated block is
    checked for contradictions); otherwise it is prose of the explanation.
    """
    fields: dict[str, int] = {}
    explanation: list[str] | None = None
    statements: set[tuple[str, int]] = set()
    for line in lines:
        if not line:  # fast path: 1 MB of blank lines is a million of these
            if explanation is not None:
                explanation.append(line)
            continue
        body = _body(line)
        label = _labelled(body, _FIELD_LABEL)
        if body:
            statements |= _statements(body)
        name = _field_name(label[2]) if label else ""
        if label is not None and label[0] == "other" and label[1][:1] in "([":
            raise UnparseableReply(f"unreadable {name} line {_short(line)!r} "
                                   "(a revision or qualifier is not the contract)")
        raw = label[1] if label is not None and label[0] == "value" else None
        value = _binary(raw) if raw is not None and name in _BINARY_FIELDS else None
        if raw is not None and name == "EXPLANATION" and explanation is None:
            explanation = [raw.lstrip(" \t").removeprefix("**").removeprefix("__")]
        elif value is not None:
            if explanation is not None and name not in fields:  # e.g. a bullet of the explanation
                raise UnparseableReply(f"{name} is given only after EXPLANATION, inside the explanation "
                                       "(the fields come before it)")
            _record(fields, name, value)
        elif raw is not None and name in _BINARY_FIELDS and explanation is None:
            raise UnparseableReply(f"{name} value {_short(raw)!r} is not 0 or 1")
        elif explanation is not None:
            explanation.append(line)
    return fields, explanation, statements


def parse_vlm(text: str) -> VlmVerdict:
    """Parse the four-line VLM judge reply; raise UnparseableReply naming the faulty field."""
    lines = _reply_lines(text)
    fields, explanation, statements = _scan_vlm(lines)
    _check_not_cut(lines, _VLM_LABELS, may_end="explanation")
    missing = [name for name in _BINARY_FIELDS if name not in fields]
    if missing:
        raise UnparseableReply("missing field " + ", ".join(missing))
    for name, value in statements:
        if fields[name] != value:
            raise UnparseableReply(f"the reply also states {name}: {value}, against the field's "
                                   f"{fields[name]} (a self-revision?)")
    return VlmVerdict(
        intermediate_correct=fields["INTERMEDIATE_CORRECT"],
        final_correct=fields["FINAL_CORRECT"],
        action_reflection=fields["ACTION_REFLECTION"],
        explanation=_printable("\n".join(explanation or []).strip()),
    )
