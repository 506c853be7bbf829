"""The gold answer as the rule reads it, and the key that compares two answers word for word.

A gold answer is a value as written (``\\frac{14}{3}``, ``x = -5, p = \\frac{14}{3}``), a value in
math delimiters (``\\[ \\binom{n}{2} \\]``), or a worked solution, read for its final answer like a
response (``_read.gold_answer``). ``text_key`` is the exact match
for answers that are words: it drops only layout (spacing, ``\\text`` wrappers, ``\\left``, the
case of letters), never a sign, a digit or a delimiter.
"""

from __future__ import annotations

import re

_DELIMITED = (("$$", "$$"), ("$", "$"), ("\\[", "\\]"), ("\\(", "\\)"))
_MATH = re.compile(r"\$\$.*?\$\$|\$[^$]*\$|\\\(.*?\\\)|\\\[.*?\\\]", re.S)
_COMMAND = re.compile(r"\\[A-Za-z]+")
_ENVIRONMENT = re.compile(r"\\(?:begin|end)\s*\{[A-Za-z*]*\}")
_WORD = re.compile(r"(?<![A-Za-z\\])[A-Za-z]{3,}")
_WRAPPER = re.compile(r"\\(?:text|textbf|textrm|textit|textnormal|textup|mathrm|mathbf|mathit|mbox|operatorname)"
                      r"\s*\{([^{}]*)\}")
_LAYOUT = re.compile(r"\\(?:left|right|displaystyle|textstyle|quad|qquad)(?![A-Za-z])|\\[,;:! ]|~|\s+")
_FRACTION = re.compile(r"\\[dtc]frac(?![A-Za-z])")


def unwrap(text: str) -> str:
    """The text without the math delimiters around all of it (``$...$``, ``\\[...\\]``, ...)."""
    value = text.strip()
    changed = True
    while changed:
        changed = False
        for left, right in _DELIMITED:
            inner = value[len(left):-len(right)]
            if len(value) > len(left) + len(right) and value.startswith(left) and value.endswith(right) and \
                    left not in inner and right not in inner:
                value, changed = inner.strip(), True
    return value


def is_prose(text: str) -> bool:
    """Sentences rather than a value: three words outside math and ``\\text``."""
    bare = _COMMAND.sub(" ", _ENVIRONMENT.sub(" ", _MATH.sub(" ", _WRAPPER.sub(" ", text))))
    return len(_WORD.findall(bare)) >= 3


def text_key(value: str) -> str:
    """Two answers with the same key are the same answer written alike."""
    text = unwrap(value)
    for _ in range(3):  # nested wrappers: \text{\textbf{Yes}}
        text = _WRAPPER.sub(r"\1", text)
    text = _FRACTION.sub(r"\\frac", _LAYOUT.sub("", text))
    return text.lower().rstrip(".")
