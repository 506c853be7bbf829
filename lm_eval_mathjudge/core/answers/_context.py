"""The words around a final answer that change what it says, and markup that crosses it out.

The rule reads English answers. Around a final value it refuses to read, rather than credit:
a negation ("the answer is not \\boxed{18}"), a counterfactual or a condition ("if she had sold
them all it would be \\boxed{18}", "\\boxed{18} if x > 0"), and words it cannot read (another
language: letters outside the Latin and Greek alphabets or with diacritics, or function words of
the common European languages). Struck-out text (``~~18~~``, ``<del>``, ``\\sout``) is not an
answer the rule can read either. A correction between two final statements ("wait", "I made an
error") marks the later one as a revision.
"""

from __future__ import annotations

import re
import unicodedata

from ._text import REVOKED

_NEGATION = re.compile(r"\b(not|never|no[ \t]+longer|isn't|aren't|wasn't|won't|cannot|can't|neither|nor)\b"
                       r"[^.!?\n]{0,24}$", re.I)
_IF = re.compile(r"\b(?:if|unless|suppose|supposing|assuming|provided)\b", re.I)
_WOULD = re.compile(r"\b(?:would|could|might)\b|'d\b", re.I)
_CONDITION_AFTER = re.compile(r"^[ \t$*_.,)\]}]*(?:if|unless|provided|assuming|whenever|when|only[ \t]+if|"
                              r"as[ \t]+long[ \t]+as|in[ \t]+case|but[ \t]+only)\b", re.I)
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019-][^\W\d_]+)*")
_MATH = re.compile(r"\$[^$]*\$|\\\(.*?\\\)|\\\[.*?\\\]|\\[A-Za-z]+", re.S)
_FOREIGN_WORDS = frozenset(
    "ist nicht kein keine und oder aber antwort ergebnis lautet est pas n'est c'est donc mais réponse "
    "reponse résultat es pero entonces respuesta resultado não nao então resposta risposta quindi sono "
    "antwoord niet dus odpowiedź wynosi jest".split())
STRUCK = re.compile(r"~~[^~\n]{1,400}~~|<(?:s|del|strike)(?:[ \t][^>\n]{0,80})?>|\\(?:sout|st|xout)\s*\{|\u0336")
CROSSED_OUT = re.compile(r"\\(?:cancel|bcancel|xcancel|cancelto|sout|st|xout)\s*\{")
REMARK = re.compile(r"^[\s*_(\[]*(?:check|verification|verify|to[ \t]+(?:check|verify|confirm)|indeed|as[ \t]+a[ \t]+check)\b|"
                    r"\b(?:because|since|which[ \t]+follows[ \t]+from|this[ \t]+follows[ \t]+from|as[ \t]+expected)\b",
                    re.I)  # a sentence after the final answer that checks or explains it: working, not an answer
REVISION = re.compile(r"\b(?:wait|actually|correction|i[ \t]+mean|oops|on[ \t]+second[ \t]+thought|mistake|error|"
                      r"apologi[sz]e|recalculat\w*|re-?evaluat\w*|re-?examin\w*|re-?check\w*|double-check\w*)\b|"
                      + REVOKED.pattern, re.I)


def unreadable(before: str, after: str) -> str | None:
    """Why the words right around a final value keep the rule from reading it, or None.
    ``before``: its clause up to the value; ``after``: the rest of its sentence."""
    negation = _NEGATION.search(before)
    if negation and not re.search(r"\d", before[negation.end(1):]):  # "not 10 which is 1,000.99": 10 is negated
        return f"a negation ({negation.group().split()[0]!r} before the value)"
    if _IF.search(before) and _WOULD.search(before):
        return "a condition (a counterfactual before the value)"
    if condition := _CONDITION_AFTER.search(after):
        return f"a condition ({condition.group().strip(' $*_.,)]}')!r} after the value)"
    if foreign := _foreign(before + " " + after):
        return f"words the rule cannot read ({foreign!r})"
    return None


def _foreign(text: str) -> str | None:
    for word in _WORD.findall(_MATH.sub(" ", text)):
        if word.lower() in _FOREIGN_WORDS or any(_foreign_letter(c) for c in word):
            return word
    return None


def _foreign_letter(char: str) -> bool:
    if char.isascii() or not char.isalpha():
        return False
    return not unicodedata.name(char, "").startswith("GREEK")
