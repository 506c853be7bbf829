"""Text as a reader sees it: the form in which an answer is compared with our prompts' structure.

An answer can write ``### Rеference solution`` with a Cyrillic ``е``, ``Final\\u200bVerdict`` with a
zero-width space, ``ＦＩＮＡＬ＿ＣＯＲＲＥＣＴ`` in fullwidth letters or ``FINAL\\u2060_CORRECT`` with a
word joiner: a judge reads each as the English words, a plain string match does not. ``fold``
gives the text the way it looks, character by character:

* invisible characters are dropped: format characters (category Cf: zero-width space, joiners,
  word joiner, soft hyphen, bidi controls, the byte-order mark, tags), combining marks (Mn, Me:
  accents, variation selectors), control characters other than tabs and line breaks, lone
  surrogates, and the blank letters Unicode has (the Hangul fillers, the blank Braille pattern);
* every other kind of space (no-break, thin, ideographic, ...) becomes a plain space;
* NFKC: fullwidth, mathematical, circled, superscript letters become plain ones;
* what is left outside ASCII becomes its ASCII look-alike where there is one: the Unicode
  confusables data of UTS #39 (``confusable-homoglyphs`` ships it), which maps Cyrillic ``е`` to
  ``e`` and Greek ``Ι`` to ``l`` (kept upper case here: ``I``), then the letter a Latin letter's
  name gives (``ᴇ`` LATIN LETTER SMALL CAPITAL E, ``é`` ... E WITH ACUTE).

Case is kept: the folded text is still the answer, only disguises are gone. ASCII look-alikes
(``l``, ``1``, ``I``, ``|``; ``0`` and ``O``; ``rn`` and ``m``) stay themselves in the text and are
matched together by the patterns ``word`` builds. The work is linear in the text (one table
look-up per character, the table bounded in size), and ``Folded.origin`` maps a position in the
folded text back to the answer, so a mark goes where the reader sees the imitation.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

_KEEP_CONTROLS = "\t\n\r\x0b\x0c\x1c\x1d\x1e\x85"  # tabs and the line breaks str.splitlines counts
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_DROPPED = {"Cf", "Mn", "Me", "Cs", "Co"}
_BLANK_NAMES = re.compile(r"\bFILLER$|^BRAILLE PATTERN BLANK$")
_LATIN_NAME = re.compile(r"^LATIN (?:(SMALL|CAPITAL) )?LETTER (?:(SMALL CAPITAL|DOTLESS) )?([A-Z])(?: WITH [A-Z ]+)?$")
_TABLE_LIMIT = 1 << 16  # distinct characters remembered; others are folded each time they occur
_UNSAFE_ASCII = re.compile(r"[\x00-\x08\x0e-\x1b\x1f\x7f]")  # ASCII text without these folds to itself


@dataclass(frozen=True)
class Folded:
    """The folded ``text`` of ``source``; ``origin(i)``: where folded position ``i`` starts in ``source``."""
    source: str
    text: str
    _origins: Sequence[int] | None = None  # per folded character (None: the fold changed nothing)

    def origin(self, i: int) -> int:
        if self._origins is None:
            return i
        return self._origins[i] if i < len(self._origins) else len(self.source)


def fold(text: str) -> Folded:
    """``text`` as a reader sees it (module docstring), with the way back to ``text``."""
    if text.isascii() and not _UNSAFE_ASCII.search(text):
        return Folded(text, text)
    table = _table()
    pieces = [table[o] for o in map(ord, text)]
    origins = [i for i, piece in enumerate(pieces) for _ in piece]
    return Folded(text, "".join(pieces), origins)


def folded(text: str) -> str:
    """Only the folded text (no way back)."""
    return text if text.isascii() and not _UNSAFE_ASCII.search(text) else text.translate(_table())


class _Table(dict):
    """Code point -> its folded text (``str.translate``'s table), filled on first sight, bounded in size."""

    def __missing__(self, code: int) -> str:
        value = fold_char(chr(code))
        if len(self) < _TABLE_LIMIT:
            self[code] = value
        return value


@lru_cache(maxsize=1)
def _table() -> _Table:
    return _Table()


def fold_char(char: str) -> str:
    """One character as a reader sees it: '' (invisible), ' ' (a space), or its look-alike."""
    category = unicodedata.category(char)
    if category in _DROPPED or (category == "Cc" and char not in _KEEP_CONTROLS):
        return ""
    if char.isspace():
        return char if char in _LINE_BREAKS or char in " \t" else " "
    if char.isascii():
        return char
    if _BLANK_NAMES.search(unicodedata.name(char, "")):
        return ""
    return "".join(c if c.isascii() else _look_alike(c) for c in unicodedata.normalize("NFKC", char)
                   if unicodedata.category(c) not in _DROPPED)


def _look_alike(char: str) -> str:
    prototype = _confusables().get(char)
    if prototype is not None:
        return "I" if prototype == "l" and char.isupper() else prototype  # TR39 maps I to l: keep the case
    match = _LATIN_NAME.match(unicodedata.name(char, ""))
    if match is None:
        return char
    letter = match.group(3)
    return letter.lower() if match.group(1) == "SMALL" or match.group(2) == "DOTLESS" else letter


@lru_cache(maxsize=1)
def _confusables() -> dict[str, str]:
    """Non-ASCII character -> its ASCII prototype, from the UTS #39 confusables data."""
    from confusable_homoglyphs import confusables  # loads its data files: on first use only

    found: dict[str, str] = {}
    for char, glyphs in confusables.confusables_data.items():
        if len(char) != 1 or char.isascii():
            continue
        ascii_glyphs = {g["c"] for g in glyphs if g["c"].isascii() and g["c"].strip()}
        if len(ascii_glyphs) == 1:  # a source has one prototype; a prototype lists its sources
            found[char] = ascii_glyphs.pop()
    return found


# ---------------------------------------------------------------------- patterns over folded text
@lru_cache(maxsize=1)
def _ascii_look_alikes() -> dict[str, frozenset[str]]:
    """ASCII character -> the ASCII characters (or pairs, ``rn``) confusable with it, itself included."""
    from confusable_homoglyphs import confusables

    groups: dict[str, set[str]] = {}
    for char, glyphs in confusables.confusables_data.items():
        if char.isascii() and char.strip():
            for other in (g["c"] for g in glyphs if g["c"].isascii() and g["c"].strip()):
                merged = groups.get(char, {char}) | groups.get(other, {other})
                for member in merged:
                    groups[member] = merged
    return {c: frozenset(members) for c, members in groups.items()}


def letter(char: str, case: bool) -> str:
    """A regex for one letter of a structural word and its ASCII look-alikes (any case unless ``case``)."""
    forms = {char} if case else {char.lower(), char.upper()}
    alikes = sorted({a for f in forms for a in _ascii_look_alikes().get(f, {f})})
    singles = "".join(re.escape(a) for a in alikes if len(a) == 1)
    longer = [re.escape(a) for a in alikes if len(a) > 1]
    cls = f"[{singles}]" if len(singles) > 1 else singles
    return f"(?:{'|'.join([cls, *longer])})" if longer else cls


def word(text: str, case: bool = False) -> str:
    """A regex for a structural word: its letters (``letter``), a space or tab allowed between them
    (a no-break space inside a word folds to one)."""
    return "[ \t]?".join(letter(c, case) for c in text)


def words(phrase: Sequence[str], separator: str, case: bool = False) -> str:
    """A regex for the words of a phrase joined by ``separator``."""
    return separator.join(word(w, case) for w in phrase)
