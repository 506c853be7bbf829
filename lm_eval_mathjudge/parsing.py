"""Judge reply text -> verdict, or an explicit :class:`UnparseableReply`.

Two pure parsers, one per judging protocol. Neither ever guesses: a reply that
does not follow its contract raises ``UnparseableReply(reason)`` with a short
reason naming what was wrong, so callers can count it as a third state instead
of folding it into "incorrect".

``parse_exact_match(text) -> ExactMatchVerdict``
    GPT4-based Exact Match (Orca-Math). Contract: an ``Error Analysis:`` part
    and a ``Final Verdict:`` line whose value is exactly ``Correct`` or
    ``Incorrect`` (any case, markdown decoration, quotes, brackets and trailing
    punctuation ignored). Only a line that *starts* with the label counts; the
    last such line wins (see ``_find_verdict``). A bare label line (a heading)
    takes its value from the next non-empty line.

``parse_vlm(text) -> VlmVerdict``
    VLM-as-judge (Gemini). Contract: lines ``INTERMEDIATE_CORRECT: 0|1``,
    ``FINAL_CORRECT: 0|1``, ``ACTION_REFLECTION: 0|1`` and ``EXPLANATION: ...``.
    The three binary fields are required, in any order; a repeated field must
    repeat the same value. ``EXPLANATION`` may be missing or empty (-> "").

Shared by both: ``<think>...</think>`` blocks are ignored (an orphan
``</think>`` drops everything before it, an unclosed ``<think>`` everything
after it), code-fence lines are dropped, and text before the parts (a
preamble) is ignored. Nothing here does I/O; importing only compiles regexes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lm_eval_mathjudge.errors import UnparseableReply

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


# Markdown that may precede a label: spaces, quote marks '>', headings '#',
# bullets, emphasis, an optional list number, then emphasis again.
_LEAD = r"^[\s>#*_`~+\-\u2022]*(?:\d+[.)]\s*)?[*_`]*\s*"
_THINK_BLOCK = re.compile(r"<(think(?:ing)?)>.*?</\1>", re.S | re.I)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.I)
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.I)
_FENCE = re.compile(r"^\s*(?:```|~~~)[\w+.-]*\s*$")
# Exact match: a separator (':', '-', '=', dashes) or the end of the line.
_VERDICT_LINE = re.compile(
    _LEAD + r"final\s+verdict\s*[*_`]*\s*(?:[:\uff1a=\-\u2013\u2014]|$)(?P<value>.*)$", re.I)
_ANALYSIS_LINE = re.compile(
    _LEAD + r"error\s+analysis\s*[*_`]*\s*(?:[:\uff1a=\-\u2013\u2014]|$)(?P<value>.*)$", re.I)
_VERDICT_WORDS = {"correct": True, "incorrect": False}
_EDGE_JUNK = re.compile(r"^[\W_]+|[\W_]+$")
# VLM: a colon or '=' is required, so prose like "Final correct-ness ..." is not a field.
_FIELD_LINE = re.compile(
    _LEAD + r"(?P<label>intermediate[\s_-]*correct|final[\s_-]*correct|"
    r"action[\s_-]*reflection|explanation)\s*[*_`]*\s*[:\uff1a=](?P<value>.*)$", re.I)
_BINARY_FIELDS = ("INTERMEDIATE_CORRECT", "FINAL_CORRECT", "ACTION_REFLECTION")
_VALUE_DECOR = " \t*_`'\"\u201c\u201d\u2018\u2019[]()"


def _content_lines(text: str) -> list[str]:
    """The reply's lines without reasoning blocks and code-fence lines."""
    text = _THINK_BLOCK.sub("", text or "")
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:  # the opening tag was in the prompt template: all before it is thinking
        text = text[closes[-1].end():]
    opened = _THINK_OPEN.search(text)
    if opened:  # unclosed block: a truncated reasoning reply
        text = text[:opened.start()]
    return [line for line in text.splitlines() if not _FENCE.match(line)]


def _reply_lines(text: str) -> list[str]:
    """Content lines of a reply; an empty reply (or one that is all reasoning) is unparseable."""
    lines = _content_lines(text)
    if any(line.strip() for line in lines):
        return lines
    if _THINK_OPEN.search(text or "") or _THINK_CLOSE.search(text or ""):
        raise UnparseableReply("empty reply outside <think> block")
    raise UnparseableReply("empty reply")


def _short(value: str, limit: int = 40) -> str:
    value = value.strip()
    return value if len(value) <= limit else value[:limit - 3] + "..."


# ---------------------------------------------------------------- exact match

def _find_verdict(lines: list[str]) -> tuple[int, str]:
    """Index and raw value of the verdict line.

    Tie-break: only lines that START with the label count (a verdict quoted
    inside a sentence never does), and when there are several such lines the
    LAST one wins, even if earlier ones disagree: a judge that revises itself
    ends with its final word, and a template echo like "Final Verdict:
    Correct or Incorrect" comes first. If that last line is unusable, the
    reply is unparseable; we never fall back to an earlier line.
    """
    for index in range(len(lines) - 1, -1, -1):
        match = _VERDICT_LINE.match(lines[index])
        if match:
            value = match.group("value")
            if not _EDGE_JUNK.sub("", value):  # bare heading: value on the next line
                value = next((line for line in lines[index + 1:] if line.strip()), "")
            return index, value
    raise UnparseableReply("no 'Final Verdict' line in the reply")


def _verdict_value(value: str) -> bool:
    word = _EDGE_JUNK.sub("", value).lower()
    if not word:
        raise UnparseableReply("'Final Verdict' has no value (truncated reply?)")
    if word not in _VERDICT_WORDS:
        raise UnparseableReply(
            f"'Final Verdict' value {_short(value)!r} is not Correct or Incorrect")
    return _VERDICT_WORDS[word]


def _clean_analysis(lines: list[str]) -> str:
    kept = [re.sub(r"\*\*|__", "", line).strip(" \t*_") for line in lines]
    return "\n".join(line for line in kept if line)


def _analysis(lines: list[str], verdict_index: int) -> str:
    """Text of the Error Analysis part, from its label up to the next verdict line.

    The last analysis before the chosen verdict line is used; failing that, the
    first one after it (a judge that gave its verdict first).
    """
    starts = [i for i, line in enumerate(lines) if _ANALYSIS_LINE.match(line)]
    before = [i for i in starts if i < verdict_index]
    start = before[-1] if before else next((i for i in starts if i > verdict_index), None)
    if start is None:
        return ""
    end = next((i for i in range(start + 1, len(lines)) if _VERDICT_LINE.match(lines[i])),
               len(lines))
    first = _ANALYSIS_LINE.match(lines[start]).group("value")
    return _clean_analysis([first, *lines[start + 1:end]])


def parse_exact_match(text: str) -> ExactMatchVerdict:
    """Parse an Error Analysis / Final Verdict reply; raise UnparseableReply if it has no clean verdict."""
    lines = _reply_lines(text)
    index, value = _find_verdict(lines)
    return ExactMatchVerdict(correct=_verdict_value(value), analysis=_analysis(lines, index))


# --------------------------------------------------------------- VLM-as-judge

def _field_name(label: str) -> str:
    return re.sub(r"[\s_-]+", "_", label.strip()).upper()


def _binary(value: str) -> int | None:
    """0 or 1 from a decorated value ('**1**', '`0`', '1.'), else None."""
    core = value.strip(_VALUE_DECOR).rstrip(".,;!").strip(_VALUE_DECOR)
    return int(core) if core in ("0", "1") else None


def _record(fields: dict[str, int], name: str, value: int) -> None:
    previous = fields.setdefault(name, value)
    if previous != value:
        raise UnparseableReply(
            f"{name} given twice with different values ({previous}, then {value})")


def _scan_vlm(lines: list[str]) -> tuple[dict[str, int], list[str] | None]:
    """Binary fields found and the explanation lines (None if there is no EXPLANATION label).

    Before EXPLANATION, a field line with a bad value is an error. After it, a
    field line counts only if its value is a clean 0/1 (so a repeated block is
    checked for contradictions); otherwise it is prose of the explanation, like
    "- Final correct: the answer 12 matches".
    """
    fields: dict[str, int] = {}
    explanation: list[str] | None = None
    for line in lines:
        match = _FIELD_LINE.match(line)
        name, raw = (_field_name(match["label"]), match["value"]) if match else ("", "")
        value = _binary(raw) if name in _BINARY_FIELDS else None
        if name == "EXPLANATION" and explanation is None:
            explanation = [re.sub(r"^\s*(?:\*\*|__)?", "", raw)]
        elif value is not None:
            _record(fields, name, value)
        elif name in _BINARY_FIELDS and explanation is None:
            raise UnparseableReply(f"{name} value {_short(raw)!r} is not 0 or 1")
        elif explanation is not None:
            explanation.append(line)
    return fields, explanation


def parse_vlm(text: str) -> VlmVerdict:
    """Parse the four-line VLM judge reply; raise UnparseableReply naming the faulty field."""
    lines = _reply_lines(text)
    fields, explanation = _scan_vlm(lines)
    missing = [name for name in _BINARY_FIELDS if name not in fields]
    if missing:
        raise UnparseableReply("missing field " + ", ".join(missing))
    return VlmVerdict(
        intermediate_correct=fields["INTERMEDIATE_CORRECT"],
        final_correct=fields["FINAL_CORRECT"],
        action_reflection=fields["ACTION_REFLECTION"],
        explanation="\n".join(explanation or []).strip(),
    )
