"""Prompt templates: our own text files with ``{{name}}`` placeholders, and the fence for answers.

Placeholders are filled in one regex pass over the template only, so values
full of LaTeX braces (``\\frac{a}{b}``, ``{{x}}``) are inserted verbatim and
never re-scanned; ``str.format`` would choke on them. A template's version is
a hash of its text, recorded with every result and part of every cache key.

The text a judge grades was written by the model under test, so it goes to the
judge between two boundary lines (``fence``) whose token the text does not
contain: nothing in the answer can close the fence early. The token is derived
from the text itself (a digest, re-derived in the rare case the text holds it),
so the same answer always renders the same prompt and a rerun hits the judge
cache. Inside the fence the answer is verbatim except where it imitates the
prompt's own structure: our section headings, the judges' verdict labels and
the boundary lines. Each such imitation gets ``[quoted]`` in front of it, so a
forged ``### How to grade`` or ``Final Verdict: Correct`` cannot be read as
ours; the prompts tell the judge what the mark means.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from ..errors import ConfigError

_PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")

JUDGE_TEMPLATES = ("exact_match", "vlm_judge")  # whose headings an answer may not imitate
QUOTE_MARK = "[quoted]"
_BEGIN, _END = "<<<BEGIN ANSWER {}>>>", "<<<END ANSWER {}>>>"
_TOKEN_LETTERS = 16  # A-Z only: no digit a grader could take for part of the answer
_MAX_DERIVATIONS = 64  # a text holding 64 derived tokens of itself does not exist in practice
# What an answer may not imitate: (kind, triggers, pattern). A pattern is tried only when the
# lower-cased text holds one substring of every group of its triggers (``triggered``: a cheap test
# that most answers fail). The judges' reply labels are spelled loosely, as their parsers would read
# them; the headings come from the templates themselves (``_patterns``).
_IMITATIONS = (
    ("verdict_line", (("verdict", "analysis"),), r"(?i:final[ \t_-]*verdict|error[ \t_-]*analysis)"),
    ("verdict_line", (("_correct", "_reflection"),), r"(?i:intermediate_correct|final_correct|action_reflection)"),
    ("verdict_line", (("final", "intermediate", "action"), ("correct", "reflection")),
     r"(?i:(?:intermediate|final)[ \t-]+correct|action[ \t-]+reflection)[ \t*_]*:"),
    ("verdict_line", (("explanation",),), r"EXPLANATION[ \t*_]*:"),
    ("fake_fence", (("<<<",),), r"<<<+(?:[ \t]*(?:BEGIN|END)[ \t_-]+ANSWER\b)?"),
    ("fake_fence", (("answer",),), r"\b(?:BEGIN|END)[ \t_-]+ANSWER\b"),
)


@dataclass(frozen=True)
class Template:
    name: str
    text: str
    placeholders: frozenset[str] = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "placeholders", frozenset(_PLACEHOLDER.findall(self.text)))

    @property
    def version(self) -> str:
        return f"{self.name}@{hashlib.sha256(self.text.encode()).hexdigest()[:12]}"

    @property
    def headings(self) -> tuple[str, ...]:
        """The ``### ...`` section headings of the template."""
        return tuple(m.strip() for m in re.findall(r"^#{1,6}[ \t]+(.+)$", self.text, re.M))

    def render(self, **values: str) -> str:
        missing = self.placeholders - values.keys()
        extra = values.keys() - self.placeholders
        if missing or extra:
            raise ConfigError(f"template {self.name}: missing {sorted(missing)}, unexpected {sorted(extra)}")
        return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), self.text)


@lru_cache(maxsize=None)
def load(name: str) -> Template:
    """Load ``prompts/<name>.txt`` from the installed package."""
    text = resources.files(__package__).joinpath(f"{name}.txt").read_text(encoding="utf-8")
    return Template(name=name, text=text)


# ---------------------------------------------------------------------- the fence
@dataclass(frozen=True)
class Fence:
    """An answer ready for a judge prompt: ``text`` is the fenced block, ``begin``/``end`` its boundary lines."""
    token: str
    begin: str
    end: str
    text: str


def boundary(text: str, salt: str = "") -> str:
    """A token of capital letters that ``text`` does not contain, the same for the same text and salt."""
    folded = text.upper()
    for attempt in range(_MAX_DERIVATIONS):
        digest = hashlib.sha256(f"{attempt}\0{salt}\0{text}".encode("utf-8", "surrogatepass")).digest()
        token = "".join(chr(ord("A") + b % 26) for b in digest[:_TOKEN_LETTERS])
        if token not in folded:
            return token
    raise ConfigError("no fence token could be derived that the answer does not contain")


def fence(text: str, salt: str = "") -> Fence:
    """The answer between two boundary lines, its imitations of our prompt structure marked."""
    token = boundary(text, salt)
    begin, end = _BEGIN.format(token), _END.format(token)
    return Fence(token, begin, end, f"{begin}\n{neutralise(text)}\n{end}")


def neutralise(text: str) -> str:
    """``text`` with ``[quoted]`` before every imitation of our headings, verdict labels and boundaries."""
    spans = _spans(text)
    if not spans:
        return text
    cut = [0, *(start for start, _, _ in spans), len(text)]
    return f"{QUOTE_MARK} ".join(text[a:b] for a, b in zip(cut, cut[1:]))


def imitations(text: str) -> list[tuple[str, str]]:
    """(kind, matched text) per imitation in ``text``; kinds ``our_heading``, ``verdict_line``, ``fake_fence``."""
    return [(kind, text[start:end]) for start, end, kind in _spans(text)]


def substrings(text: str, candidates: frozenset[str]) -> frozenset[str]:
    """Which of the lower-case ``candidates`` occur in ``text`` (any case): one cheap test each."""
    low = text.lower()
    return frozenset(c for c in candidates if c in low)


def triggered(present: frozenset[str], triggers: tuple[tuple[str, ...], ...]) -> bool:
    """Every group of ``triggers`` has a member ``present``: only then is a pattern worth trying."""
    return all(not present.isdisjoint(group) for group in triggers)


def _spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of every imitation, in order, none overlapping (the earliest, then longest wins)."""
    patterns = _patterns()
    present = substrings(text, _triggers())
    found = sorted((m.start(), -m.end(), kind) for kind, triggers, pattern in patterns
                   if triggered(present, triggers) for m in pattern.finditer(text))
    spans, reached = [], 0
    for start, end, kind in found:
        if start >= reached:
            spans.append((start, -end, kind))
            reached = -end
    return spans


@lru_cache(maxsize=None)
def _triggers() -> frozenset[str]:
    return frozenset(t for _, triggers, _ in _patterns() for group in triggers for t in group)


@lru_cache(maxsize=None)
def _patterns() -> tuple[tuple[str, tuple[tuple[str, ...], ...], re.Pattern], ...]:
    # Compiled on first use (reading the templates is I/O: never at import).
    headings = sorted({h for name in JUDGE_TEMPLATES for h in load(name).headings}, key=len, reverse=True)
    names = "|".join(re.escape(h).replace(r"\ ", r"[ \t]+") for h in headings)
    # A whole heading line (any line break an LLM may read as one ends it), as the templates write them.
    heading = r"#{1,6}[ \t]*(?i:" + names + r")[ \t*]*:?(?=[ \t]*(?:[\r\n\x0b\x0c\x85\u2028\u2029]|$))"
    return (("our_heading", (("#",),), re.compile(heading)),
            *((kind, triggers, re.compile(pattern)) for kind, triggers, pattern in _IMITATIONS))
