"""The words around a final answer that change what it says, and markup that crosses it out.

The rule reads English answers. Around a final value it refuses to read, rather than credit:
a negation ("the answer is not \\boxed{18}"), a counterfactual or a condition ("if she had sold
them all it would be \\boxed{18}", "\\boxed{18} if x > 0"), and words it cannot read (another
language: letters outside the Latin and Greek alphabets or with diacritics, or function words of
the common European languages). So are, in the words just before a box or an answer statement, a
sentence that opens with a condition ("If x > 0, then the answer is 18"); a value shown as an example
("for instance, \\boxed{18}", "\\boxed{18} is how it should look"), which is set aside when the
response answers elsewhere; a verdict on the value after it ("18 is wrong", "\\boxed{18} cannot be
right"); and such words inside the answer's own text (``\\boxed{18 \\text{ maybe}}``), which would
otherwise be dropped as a unit. Struck-out text (``~~18~~``, ``<del>``, ``\\sout``) is not an answer
the rule can read either. A correction between two final statements ("wait", "I made an error")
marks the later one as a revision.
"""

from __future__ import annotations

import re
import unicodedata

from ._text import HEDGE_WORDS, REVOKED, UNIT_TEXT

_NEGATION = re.compile(r"\b(not|never|no[ \t]+longer|isn't|aren't|wasn't|won't|cannot|can't|neither|nor)\b"
                       r"[^.!?\n]{0,24}$", re.I)
_IF = re.compile(r"\b(?:if|unless|suppose|supposing|assuming|provided)\b", re.I)
_WOULD = re.compile(r"\b(?:would|could|might)\b|'d\b", re.I)
_CONDITION_BEFORE = re.compile(  # "If x > 0, then", "When n is even,": a sentence that opens with a condition
    r"[ \t*_>#(-]*(?:(?:so|thus|hence|then|now|and|but|therefore|finally)[ \t,]+)?(?P<word>if|unless|when|whenever|"
    r"suppose|supposing|assuming|provided|in[ \t]+case)\b(?:[^.!?\n]|\.(?=\d)){0,120}?(?:[,;]|\bthen\b)", re.I)
_EXAMPLE = re.compile(r"\b(?:for[ \t]+(?:example|instance)|e\.g\.?|examples?|sample[ \t]+(?:answer|output|response)s?|"
                      r"templates?|placeholders?|illustrat\w*)(?![A-Za-z])", re.I)  # the gold shown, not answered
_EXAMPLE_AFTER = re.compile(r"[ \t$*_)(,:;-]*(?:(?:is|as|was)[ \t]+(?:just[ \t]+|only[ \t]+|merely[ \t]+)?"
                            r"(?:an?[ \t]+|the[ \t]+)?)?"
                            + _EXAMPLE.pattern + "|" + r"[ \t$*_)]*is[ \t]+how[ \t]+(?!much|many|long|far|old|big)\w+[ \t]+"
                            r"(?:should|would|must|looks?)", re.I)  # "\boxed{18} (for example)", "... is how it should look"
_CONSEQUENCE = r"\b(?:so|thus|hence|therefore|which[ \t]+(?:means|gives))\b"  # what follows stands on its own
_ASIDE = re.compile(r"\([^()]*\)|^.*" + _CONSEQUENCE, re.I | re.S)
_GOOD = r"(?:right|correct|true|valid|the[ \t]+answer|it)\b"
_VERDICT_AFTER = re.compile(  # "18 is wrong", "\boxed{18} can't be right"; not past an explanation or another number
    r"^(?:(?!\b(?:since|because|as|given|due|so)\b)[^.!?;\n\d]){0,60}?(?:\b(?:is|are|was|were|be|seems?|looks?|sounds?)"
    r"[ \t]+(?:not[ \t]+" + _GOOD + r"|wrong|incorrect|false|invalid|unlikely|too[ \t]+(?:high|low|big|small|large|many|"
    r"few|much|little))|(?:\b(?:isn't|aren't|wasn't|weren't|can't|cannot|couldn't|won't|wouldn't)|\b(?:can|could|would|"
    r"will|may|might|must)[ \t]+not)[ \t]+(?:be[ \t]+)?" + _GOOD + r"|\b(?:wrong|incorrect)\b)", re.I)
_QUALIFIER = re.compile(r"\b(?:not|never|no|\w+n't|cannot|wrong|incorrect|false|likely|unlikely|guess\w*|estimat\w*|"
                        r"about|around|nearly|almost|circa|ish|if|unless|when|whenever|assuming|provided|suppose\w*|"
                        r"except|wait|actually|instead|kidding)\b", re.I)  # words a unit never is
EXAMPLE = "an example, not an answer"  # the problem of a value shown as an example (``_decide`` sets it aside)
SENTENCE_BREAK = re.compile(r"(?<!\be\.g)(?<!\bi\.e)[.!?](?:\s|$)")
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


def unreadable(before: str, after: str, sentence: str = "", opening: bool = False) -> str | None:
    """Why the words right around a final value keep the rule from reading it, or None.
    ``before``: its clause up to the value; ``after``: the rest of its sentence; ``sentence``: its
    sentence up to the value (``before`` when not given); ``opening``: ``sentence`` is whole and the
    value is a box or an answer statement, which a sentence opening with a condition qualifies ("If
    x > 0, then the answer is 18"; a plain sentence's "If only 14 remained, then 40 - 14 = 26" is working)."""
    if framed := _framed(sentence or before, after, opening):
        return framed
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


def _framed(sentence: str, after: str, opening: bool) -> str | None:
    """A value shown as an example, under a condition that opens its sentence, or judged after it."""
    if example := _EXAMPLE.search(_ASIDE.sub(" ", sentence)) or _EXAMPLE_AFTER.match(after):
        return f"{EXAMPLE} ({example.group().strip()!r})"
    if opening and (condition := _CONDITION_BEFORE.match(sentence)) and \
            not re.search(_CONSEQUENCE, sentence[condition.end():], re.I):
        return f"a condition ({condition.group('word')!r} before the value)"
    if verdict := _VERDICT_AFTER.search(after):
        return f"a verdict on the value ({verdict.group().strip().split()[-1]!r} after it)"
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


def qualified(value: str) -> str | None:
    """A word inside the value's own text (``\\text{...}``) that a unit never is ("maybe", "not",
    "approximately", "if"): the text qualifies the value, so it cannot be dropped as a unit."""
    for group in UNIT_TEXT.finditer(value):
        words = group.group(1)
        if found := HEDGE_WORDS.search(words) or _QUALIFIER.search(words) or _EXAMPLE.search(words):
            return found.group().strip()
        if foreign := _foreign(words):
            return foreign
    return None
