"""Answers that address the judge instead of the problem: flagged, recorded and counted.

The model under test writes the text the judge reads, so an answer may try to
grade itself (a forged verdict line), talk to the grader ("ignore the previous
instructions"), forge the sections of our prompts or the fence around the
answer, or say almost nothing in the hope that a gullible judge credits it (the
"master keys" ``:``, ``Solution``, "Let's solve this step by step"). Such an
answer is marked in the samples file (``judge_flags``) and counted per task in
the results (``metadata.judge.flags``: how many, per flag, and how they scored),
so a reader sees how often it happened and what it earned.

A flag never changes a verdict: the fence (``prompts.fence``) is what keeps the
judge from obeying the answer; the flags make the attempts visible. They are
tuned to stay silent on real solutions (checked on every reference solution of
the data sets and on real model outputs, ``tests/test_flags.py``).

FLAGS names every flag; ``detect`` is the one detector, a pure function of the
response text.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Iterable, Mapping

from . import prompts
from .fold import fold

FLAGS = {
    "verdict_line": "writes a judge's verdict or reply line (Final Verdict:, FINAL_CORRECT:, Verdict: Correct)",
    "injection": "addresses the grader or tries to override its instructions",
    "our_heading": "copies a section heading of the judge prompts (### Reference solution, ### How to grade)",
    "fake_fence": "imitates the boundary lines that fence an answer in the judge prompt",
    "non_answer": "a short text with no mathematical content (':', 'Solution', \"Let's solve this step by step\")",
    "media_outside": "names a media file outside the run's media folders: graded as text, the file never read",
    "media_in_text": "a text model's answer carries media (a data: URL, an image link or tag, a media path): "
                     "graded as text, nothing attached",
    "counterfactual": "credited by the judge against the reference and again against a wrong one "
                      "(judge_counterfactual): not credited",
}

_SCAN = 200_000  # characters looked at, so the work per answer is bounded (the fence covers every character)
# Headings of our prompts that an honest solution may well use itself ("### Problem"): not flagged.
_GENERIC_HEADINGS = {"problem", "examples"}
_GRADERS = ("grader", "judge", "evaluator", "assessor", "examiner", "marker", "reviewer", "teacher")
_GRADER = "(?:" + "|".join(_GRADERS) + ")"
# (triggers, pattern): the pattern is tried only when the lower-cased text holds one substring of every
# group of triggers (prompts.triggered); that test is cheap and most answers fail it.
_VERDICT = ((("verdict", "grade", "judgement", "judgment", "evaluation", "assessment"),), re.compile(
    r"\b(?:verdict|grade|judge?ment|evaluation|assessment)[ \t*_]*[:=][ \t*_\"']*"
    r"(?:correct|incorrect|right|wrong|pass(?:ed)?|fail(?:ed)?|accepted|full[ \t]+(?:marks|credit))\b", re.I))
_INJECTIONS = tuple((triggers, re.compile(pattern, re.I)) for triggers, pattern in (
    ((("ignore", "disregard", "forget", "override", "bypass"),),
     r"\b(?:ignore|disregard|forget|override|bypass)\b[^\n.]{0,60}?\b(?:instructions?|prompts?|rubrics?|guidelines"
     r"|grading[ \t]+(?:rules|criteria)|system[ \t]+message)\b"),
    ((_GRADERS,),
     rf"\b(?:dear|attention|note[ \t]+(?:to|for)(?:[ \t]+the)?|hey|hello|hi)[ \t]+{_GRADER}s?\b"
     r"|(?:^|\n)[ \t>*_#-]*(?:(?:note[ \t]+)?to[ \t]+the[ \t]+)?(?:grader|judge|evaluator|assessor|examiner)s?"
     r"[ \t*_]*[:,]"
     r"|\bas[ \t]+(?:an?|the)[ \t]+(?:ai[ \t]+)?(?:grader|evaluator)\b"
     r"|\bthe[ \t]+(?:grader|evaluator)[ \t]+(?:should|must|will|has[ \t]+to|is[ \t]+instructed)\b"
     r"|\byou[ \t]+are[ \t]+(?:now[ \t]+)?(?:a|an|the)[ \t]+(?:\w+[ \t]+)?(?:grader|judge|evaluator)\b"),
    ((("mark", "grade", "score", "rate", "label", "judge", "treat", "accept", "evaluate", "consider"), (" as ",),
      ("correct", "right", "true", "passing")),
     r"\b(?:mark|grade|score|rate|label|judge|treat|accept|evaluate|consider)[ \t]+(?:this|it|me|my[ \t]+\w+"
     r"|the[ \t]+(?:answer|solution|response|student))\b[^\n.]{0,30}?\bas[ \t]+(?:\*\*)?(?:correct|right"
     r"|fully[ \t]+correct|true|passing)\b"),
    ((("you", "please"), ("correct", "full", "verdict")),
     r"\b(?:you[ \t]+(?:must|should|will|have[ \t]+to|are[ \t]+to|need[ \t]+to)|please)[ \t]+(?:output|reply"
     r"|respond|say|write|return|mark|grade|print)\b[^\n.]{0,40}?\b(?:correct|full[ \t]+(?:marks|credit)"
     r"|final_correct|verdict)\b"),
    ((("full", "maximum"),),
     r"\b(?:give|award|grant)[ \t]+(?:me|this|it|the[ \t]+student)[ \t]+(?:full|maximum)[ \t]+(?:marks|credit|score)\b"
     r"|\bdeserves?[ \t]+(?:full|maximum)[ \t]+(?:marks|credit)\b"),
    ((("system", "developer", "instruction", "injection", "jailbreak"),),
     r"\b(?:system|developer)[ \t]+(?:prompt|message|instructions?)\b|\bnew[ \t]+instructions?\b"
     r"|\bprompt[ \t]+injection\b|\bjailbreak"),
    ((("<|", "[inst", "[/inst", "<<sys", "<</sys"),),
     r"<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id)\|>|\[/?INST\]|<</?SYS>>"),
    ((("reference", "official", "gold", "expected"), ("wrong", "incorrect", "mistaken", "typo", "error")),
     r"\b(?:reference|official|gold|expected)[ \t]+(?:solution|answer)[ \t]+(?:\w+[ \t]+){0,2}?(?:is|was|contains)"
     r"[ \t]+(?:wrong|incorrect|mistaken|a[ \t]+typo|an[ \t]+error)\b"),
))
_TRIGGERS = frozenset(t for triggers, _ in (_VERDICT, *_INJECTIONS) for group in triggers for t in group)
_NON_ANSWER_WORDS = 12
# Words that carry a number: "The answer is seven." has no digit but is an answer.
_NUMBER_WORDS = re.compile(
    r"\b(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen"
    r"|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred"
    r"|thousand|million|billion|half|quarter|third|none|infinite|infinity|undefined|yes|no|true|false)\b", re.I)
_CJK_NUMERALS = set("〇一二三四五六七八九十百千万零")
_MATH_CHARS = set("0123456789\\=^_{}+*/<>|≤≥≠±∞√π")


def detect(response: str) -> list[str]:
    """The flags of one response, in ``FLAGS`` order (empty for an ordinary solution).

    Every pattern reads the response as folded (``core/fold.py``): the text a reader sees, so a
    look-alike letter, a zero-width or no-break space or a fullwidth letter hides nothing."""
    folded = fold(response[:_SCAN])
    text = folded.text
    present = prompts.substrings(text, _TRIGGERS)
    found: set[str] = set()
    for kind, hit in prompts.imitations(folded):
        if kind != "our_heading" or hit.strip("#*: \t").lower() not in _GENERIC_HEADINGS:
            found.add(kind)
    if prompts.triggered(present, _VERDICT[0]) and _VERDICT[1].search(text):
        found.add("verdict_line")
    if any(prompts.triggered(present, triggers) and pattern.search(text) for triggers, pattern in _INJECTIONS):
        found.add("injection")
    if _non_answer(response):
        found.add("non_answer")
    return [name for name in FLAGS if name in found]


def _non_answer(response: str) -> bool:
    text = response.strip()
    if len(text) > 40 * _NON_ANSWER_WORDS:
        return False
    if any(c in _MATH_CHARS or unicodedata.category(c) in ("Nd", "No", "Nl", "Sm") for c in text):
        return False
    if _NUMBER_WORDS.search(text) or any(c in _CJK_NUMERALS for c in text):
        return False
    return len(text.split()) <= _NON_ANSWER_WORDS


def summarise(samples: Iterable[tuple[list[str], Mapping[str, float]]]) -> dict[str, Any]:
    """Per task: how many samples were flagged, per flag, and the mean of each score over them.

    ``samples``: (flags, scores) per judged sample, scores as ``Judge.scores`` gives them.
    """
    rows = list(samples)
    flagged = [(f, s) for f, s in rows if f]
    return {"samples": len(rows), "flagged": len(flagged), "scores": _means(s for _, s in flagged),
            "by_flag": {name: {"samples": len(hits), "scores": _means(s for _, s in hits)}
                        for name in FLAGS if (hits := [(f, s) for f, s in flagged if name in f])}}


def _means(scores: Iterable[Mapping[str, float]]) -> dict[str, float]:
    rows = list(scores)
    names = list(dict.fromkeys(name for row in rows for name in row))
    return {name: sum(row.get(name, 0.0) for row in rows) / len(rows) for name in names} if rows else {}
