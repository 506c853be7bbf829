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
ours; the prompts tell the judge what the mark means. The answer is compared
with that structure as a reader sees it (``core/fold.py``: look-alike letters,
fullwidth forms, zero-width and no-break spaces folded), and every structural
word comes from the templates themselves (their headings, the labels of the
reply they ask for, the boundary lines), so a disguise hides no imitation.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from ..errors import ConfigError
from ..fold import Folded, fold, word, words

_PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")

JUDGE_TEMPLATES = ("exact_match", "vlm_judge")  # whose headings an answer may not imitate
QUOTE_MARK = "[quoted]"
_BEGIN, _END = "<<<BEGIN ANSWER {}>>>", "<<<END ANSWER {}>>>"
_TOKEN_LETTERS = 16  # A-Z only: no digit a grader could take for part of the answer
_MAX_DERIVATIONS = 64  # a text holding 64 derived tokens of itself does not exist in practice
_BREAKS = r"\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # every line break an LLM may read as one (a regex class)
_EDGE_BEFORE, _EDGE_AFTER = r"(?<![A-Za-z0-9])", r"(?![A-Za-z0-9])"
# After a reply label, what makes it a label and not prose ("Final Verdict: ...", "**Final Verdict** = ...",
# a label alone on its line), as opposed to "my final verdict is".
_LABEL_END = rf"(?=[ \t*_]*(?:[:=|>\u2192\u2013\u2014-]|[{_BREAKS}]|$))"
_LOOSE, _TOKEN = r"[ \t_-]*", r"[ \t]?_+[ \t]?"  # between a label's words: spelled loosely; as one token
_REPLY_LABEL = re.compile(r"^([A-Za-z][A-Za-z_ ]*?):[ \t]*<", re.M)  # "Final Verdict: <Correct or Incorrect>"


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

    @property
    def reply_labels(self) -> tuple[str, ...]:
        """The labels of the reply the template asks for (``Final Verdict``, ``FINAL_CORRECT``)."""
        return tuple(dict.fromkeys(m.strip() for m in _REPLY_LABEL.findall(self.text)))

    def render(self, **values: str) -> str:
        missing = self.placeholders - values.keys()
        extra = values.keys() - self.placeholders
        if missing or extra:
            raise ConfigError(f"template {self.name}: missing {sorted(missing)}, unexpected {sorted(extra)}")
        return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), self.text)


@cache
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


def imitations(text: str | Folded) -> list[tuple[str, str]]:
    """(kind, the imitation as folded) per imitation in ``text``; kinds ``our_heading``, ``verdict_line``,
    ``fake_fence``. The comparison is made on the folded text (``core/fold.py``): disguises do not hide one."""
    folded = text if isinstance(text, Folded) else fold(text)
    return [(kind, folded.text[start:end]) for start, end, kind in _folded_spans(folded.text)]


def substrings(text: str, candidates: frozenset[str]) -> frozenset[str]:
    """Which of the lower-case ``candidates`` occur in ``text`` (any case): one cheap test each."""
    low = text.lower()
    return frozenset(c for c in candidates if c in low)


def triggered(present: frozenset[str], triggers: tuple[tuple[str, ...], ...]) -> bool:
    """Every group of ``triggers`` has a member ``present``: only then is a pattern worth trying."""
    return all(not present.isdisjoint(group) for group in triggers)


def _spans(text: str | Folded) -> list[tuple[int, int, str]]:
    """(start, end, kind) of every imitation in the original text."""
    folded = text if isinstance(text, Folded) else fold(text)
    return [(folded.origin(start), folded.origin(end), kind) for start, end, kind in _folded_spans(folded.text)]


def _folded_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of every imitation in folded text, in order, none overlapping (the earliest,
    then the longest wins)."""
    found = sorted((m.start(), -m.end(), kind) for kind, pattern in _patterns() for m in pattern.finditer(text))
    spans, reached = [], 0
    for start, end, kind in found:
        if start >= reached:
            spans.append((start, -end, kind))
            reached = -end
    return spans


@cache
def _patterns() -> tuple[tuple[str, re.Pattern], ...]:
    """What an answer may not imitate, as (kind, pattern) over folded text, all from the templates:
    their section headings, the labels of the replies they ask for, the boundary lines. Each word
    matches its ASCII look-alikes too (``fold.word``). Compiled on first use (reading the templates is
    I/O: never at import)."""
    templates = [load(name) for name in JUDGE_TEMPLATES]
    headings = sorted({h for t in templates for h in t.headings}, key=len, reverse=True)
    names = "|".join(words(h.split(), r"[ \t]*") for h in headings)
    # A whole heading line (any line break an LLM may read as one ends it), as the templates write them.
    # No two neighbouring quantifiers can take the same character: linear on a line of 100k spaces.
    heading = rf"#{{1,6}}[ \t]*(?:{names})[ \t*#]*(?::[ \t]*)?(?=[{_BREAKS}]|$)"
    labels = [_label(label) for t in templates for label in t.reply_labels]
    fence_words = sorted({m for f in (_BEGIN, _END) for m in re.findall(r"[A-Z]+", f)})  # BEGIN, END, ANSWER
    marks = "|".join(word(w, case=True) for w in fence_words if w != "ANSWER")
    fence_line = rf"{_EDGE_BEFORE}(?:{marks})[ \t_-]+{word('ANSWER', case=True)}{_EDGE_AFTER}"
    return (("our_heading", re.compile(heading)),
            *(("verdict_line", re.compile(label)) for label in labels),
            ("fake_fence", re.compile(rf"<<<+(?:[ \t]*{fence_line})?")),
            ("fake_fence", re.compile(fence_line)))


def _label(label: str) -> str:
    """A reply label: as a token wherever it is (``FINAL_CORRECT``), or spelled any way (``final
    correct``, ``Final-Verdict``) where it stands as a label (``_LABEL_END``). A one-word label is
    matched in its own case only: an honest solution may well say ``Explanation:``."""
    parts = re.split(r"[ _]+", label)
    case = len(parts) == 1
    spelled = _EDGE_BEFORE + words(parts, _LOOSE, case) + _LABEL_END
    return f"{words(parts, _TOKEN, case)}|{spelled}" if "_" in label else spelled
