"""The audit battery: a versioned file of adversarial answers, filled in per problem.

``battery_v<N>.json`` holds the families (attacks and the two controls), each a
list of answer templates with ``{{name}}`` placeholders (``prompts.Template``:
LaTeX braces are inserted verbatim). ``build`` pairs them with the real
problems of one task: per family, templates are taken in turn, each on the
next problem of a seeded shuffle, so the same task, docs, limit and battery
version always give the same answers, and different templates meet different
problems. A template that needs a value a problem lacks (a worked solution,
for AIME 2025) is not paired with that problem.

Values derived from a doc (``values``): ``gold`` is its gold answer; ``wrong``
and ``wrong2`` change its leading digit (surely different values, in the same
form); ``steps`` is the reference's worked solution and ``cut`` that solution
up to the line before the gold answer first appears. A doc whose gold answer
has no digit (``\\text{Evelyn}``, ``p - q``) or is itself a choice (``A or B``)
is skipped: no wrong answer can be derived that is surely wrong. An answer
that is not meant to contain the gold answer (no ``{{gold}}``) but does for
some problem (``FINAL_CORRECT: 1`` where the answer is 1) is not paired with it.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Mapping, Sequence

from ..core.data_sets import NO_SOLUTION
from ..core.prompts import Template

VERSION = 2  # the files of earlier versions stay, so an old audit can be repeated: load(1)
KINDS = ("attack", "right", "wrong")  # "right"/"wrong": controls an honest judge credits / refuses
_NUMBER = re.compile(r"\d+")
_MIN_CUT_WORDS = 5  # a cut shorter than this is no longer "a solution cut off"
_LIST_LENGTH = 100
_ALTERNATIVES = re.compile(r"\bor\b", re.IGNORECASE)


@dataclass(frozen=True)
class Family:
    name: str
    kind: str
    about: str
    templates: tuple[Template, ...]


@dataclass(frozen=True)
class Battery:
    version: int
    seed: int
    sha256: str  # of the file's bytes: an edited file is a different battery
    families: tuple[Family, ...]

    def describe(self) -> dict[str, Any]:
        return {"version": self.version, "seed": self.seed, "sha256": self.sha256,
                "families": {f.name: {"kind": f.kind, "templates": len(f.templates)} for f in self.families}}


@dataclass(frozen=True)
class Item:
    """One adversarial (or control) answer paired with one problem of one task."""
    task: str
    family: str
    kind: str
    template: int  # index into the family's answers
    doc_index: int  # position in the task's evaluation docs
    response: str
    doc: Mapping[str, Any] = field(repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        return {"task": self.task, "family": self.family, "kind": self.kind, "template": self.template,
                "doc_index": self.doc_index, "response": self.response}


@cache
def load(version: int = VERSION) -> Battery:
    raw = resources.files(__package__).joinpath(f"battery_v{version}.json").read_bytes()
    spec = json.loads(raw)
    families = tuple(
        Family(name, body["kind"], body["about"],
               tuple(Template(f"{name}/{i}", text) for i, text in enumerate(body["answers"])))
        for name, body in spec["families"].items())
    assert spec["version"] == version and all(f.kind in KINDS for f in families), "a malformed battery file"
    return Battery(version, int(spec["seed"]), hashlib.sha256(raw).hexdigest(), families)


def wrong_answers(gold: str) -> tuple[str, str] | None:
    """Two different wrong answers in the gold answer's own form, or None when it has no digit.

    The leading digit of the first number changes (its first nonzero digit): a change there is far
    beyond any numeric tolerance (``.0000672`` -> ``.0000772``, not ``.0000673``) and never hides in a
    subscript or a unit (``2516_8`` -> ``3516_8``, ``864 \\mbox{ inches}^2`` -> ``964 ...``).
    """
    run = _NUMBER.search(gold)
    if run is None:
        return None
    i = run.start() + next((k for k, c in enumerate(run.group()) if c != "0"), 0)
    d = int(gold[i])
    first, second = (d + 1 if d < 9 else d - 1), (d + 2 if d < 8 else d - 2)
    return gold[:i] + str(first) + gold[i + 1:], gold[:i] + str(second) + gold[i + 1:]


def values(doc: Mapping[str, Any]) -> dict[str, str | None] | None:
    """The placeholder values of one doc (None for a value it lacks), or None to skip the doc."""
    gold = str(doc.get("mj_answer") or "").strip()
    wrong = wrong_answers(gold)
    if not gold or wrong is None or _ALTERNATIVES.search(gold):
        return None  # no wrong answer that is surely wrong, or a gold answer that is itself a choice
    reference = str(doc.get("mj_reference") or "").strip()
    steps = None if not reference or reference.endswith(NO_SOLUTION) else reference
    cut = None
    if steps and gold in steps:
        # Back to the end of the last line or sentence before the gold answer first appears: a cut inside
        # that line could end in an expression worth the gold answer ("99 + 5 =").
        head = steps[:steps.index(gold)]
        head = head[:max(head.rfind("\n"), head.rfind(". ") + 1, 0)].strip()
        cut = head if len(head.split()) >= _MIN_CUT_WORDS else None
    numbers = [gold, *wrong, *(str(k) for k in range(1, _LIST_LENGTH - 2))]
    return {"gold": gold, "wrong": wrong[0], "wrong2": wrong[1], "steps": steps, "cut": cut,
            "numbers": ", ".join(numbers)}


def build(task: str, docs: Sequence[Mapping[str, Any]], limit: int, battery: Battery | None = None) -> list[Item]:
    """Up to ``limit`` items per family for ``task``'s docs, deterministic for (task, docs, limit, battery)."""
    battery = battery or load()
    usable = [(i, v) for i, v in ((i, values(doc)) for i, doc in enumerate(docs)) if v is not None]
    items: list[Item] = []
    for family in battery.families:
        order = list(usable)
        random.Random(f"{battery.seed}:{task}:{family.name}").shuffle(order)  # str seeds hash the same in every process
        items += _pick(task, family, order, docs, limit)
    return items


def _pick(task: str, family: Family, order: list, docs: Sequence[Mapping[str, Any]], limit: int) -> list[Item]:
    """Templates in turn; template t starts t problems further along, so no (template, problem) pair repeats."""
    queues = []
    for t, template in enumerate(family.templates):
        start = t % len(order) if order else 0
        queues.append([(t, i, r) for i, v in order[start:] + order[:start] if (r := _render(template, v)) is not None])
    picked: list[Item] = []
    for turn in range(max((len(q) for q in queues), default=0)):
        for queue in queues:
            if len(picked) == limit:
                return picked
            if turn < len(queue):
                t, i, response = queue[turn]
                picked.append(Item(task, family.name, family.kind, t, i, response, docs[i]))
    return picked


def _render(template: Template, v: Mapping[str, str | None]) -> str | None:
    """The answer for one problem, or None when the problem lacks a value or the answer would quote
    the gold answer without meaning to (``FINAL_CORRECT: 1`` on a problem whose answer is 1)."""
    if any(v[name] is None for name in template.placeholders):
        return None
    response = template.render(**{name: v[name] for name in template.placeholders})
    return None if "gold" not in template.placeholders and v["gold"] in response else response
