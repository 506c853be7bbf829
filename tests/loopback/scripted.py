"""A loopback judge that is gullible in scripted ways, for measuring the judge audit.

``ScriptedJudge(items, decide)`` answers the audit's requests as a script says:
it recognises which audit answer a request carries, asks ``decide(item)`` and
replies in the judge's contract: ``"credit"`` (Correct / FINAL_CORRECT 1),
``"refuse"`` (Incorrect / 0) or ``"garble"`` (an off-contract reply: a counted
judge failure after the client's re-ask). So a test knows, answer by answer,
what the audit must measure.

Recognition does not depend on the judge prompt's layout: the request names its
problem by the reference solution it carries (both judges' prompts quote it),
and among that problem's audit answers the one whose text appears after the
reference wins (as the prompt shows it: fenced, its imitations of our prompt
marked; the longest, since a short answer such as ``:`` appears in any
prompt); when none appears verbatim (a prompt that rewrites parts of the
answer), the closest by ``difflib`` wins. A request carrying one of ``others``
(say the replayed responses of a run) is not an audit answer: ``fallback``
replies to it.
"""

from __future__ import annotations

import difflib
import threading
from collections import Counter
from typing import Any, Callable, Iterable, Sequence

from lm_eval_mathjudge.core import counterfactual
from lm_eval_mathjudge.core.prompts import neutralise

REPLIES = {
    "exact_match": {
        "credit": ("Error Analysis: The student's final answer is the same as the reference answer.\n"
                   "Final Verdict: Correct"),
        "refuse": ("Error Analysis: The student's final answer differs from the reference answer.\n"
                   "Final Verdict: Incorrect"),
    },
    "vlm": {
        "credit": ("INTERMEDIATE_CORRECT: 1\nFINAL_CORRECT: 1\nACTION_REFLECTION: 0\n"
                   "EXPLANATION: The final answer matches the official solution."),
        "refuse": ("INTERMEDIATE_CORRECT: 0\nFINAL_CORRECT: 0\nACTION_REFLECTION: 0\n"
                   "EXPLANATION: The final answer does not match the official solution."),
    },
}
GARBLED = "I would rather not commit to a grade for this one."


def request_text(body: dict) -> str:
    """Every text part of an OpenAI chat request or a Gemini generateContent request, joined."""
    parts: list[str] = []
    for message in body.get("messages") or []:
        content = message.get("content")
        parts.extend([content] if isinstance(content, str) else [p.get("text") or "" for p in content or []])
    for block in body.get("contents") or []:
        parts.extend(p.get("text") or "" for p in block.get("parts") or [])
    return "\n".join(parts)


class ScriptedJudge:
    def __init__(self, items: Iterable[Any], decide: Callable[[Any], str], contract: str = "exact_match",
                 others: Sequence[str] = (), fallback: Callable[[dict], str] | None = None):
        self._by_reference: dict[str, list[Any]] = {}
        self._wrong: dict[int, str] = {}  # id(item) -> its counterfactual re-check's wrong reference
        for item in items:
            self._by_reference.setdefault(item.doc["mj_reference"], []).append(item)
            wrong, _ = counterfactual.wrong_doc(item.doc)
            if wrong is not None:  # mathjudge audit re-checks every credit: the same decision, counted apart
                self._by_reference.setdefault(wrong["mj_reference"], []).append(item)
                self._wrong[id(item)] = wrong["mj_reference"]
        self._decide, self._replies = decide, REPLIES[contract]
        self._others = [o for o in others if o.strip()]
        self._fallback = fallback
        self._lock = threading.Lock()
        self.answered: Counter = Counter()  # (task, family, template, doc_index) -> requests answered
        self.rechecked: Counter = Counter()  # the same, for the counterfactual re-checks

    def __call__(self, body: dict) -> str:
        text = request_text(body)
        item = self.identify(text)
        if item is None:
            if self._fallback is None:
                raise AssertionError(f"not an audit answer: {text[-300:]!r}")
            return self._fallback(body)
        recheck = self._wrong.get(id(item)) is not None and self._wrong[id(item)] in text
        with self._lock:
            (self.rechecked if recheck else self.answered)[(item.task, item.family, item.template,
                                                            item.doc_index)] += 1
        decision = self._decide(item)
        return GARBLED if decision == "garble" else self._replies[decision]

    def identify(self, text: str) -> Any | None:
        hits = [(reference, items) for reference, items in self._by_reference.items() if reference in text]
        if not hits:
            return None
        reference, items = max(hits, key=lambda hit: len(hit[0]))
        after = text[text.index(reference) + len(reference):]
        if any(other in after for other in self._others):
            return None
        # The prompt carries each answer fenced, its imitations of our prompt marked (prompts.neutralise).
        shown = {id(item): neutralise(item.response) for item in items}
        verbatim = [item for item in items if shown[id(item)] in after]
        if verbatim:
            return max(verbatim, key=lambda item: len(shown[id(item)]))
        return max(items, key=lambda item: difflib.SequenceMatcher(None, shown[id(item)], after,
                                                                   autojunk=False).ratio())



def task_docs(data_dir: str, name: str) -> list[dict]:
    """A data set's docs as its tasks see them (normalised by its registry entry's process_docs)."""
    from lm_eval_mathjudge.core import data_sets, docs

    entry = data_sets.get(name)
    return list(entry.process_docs(docs.load_local(data_dir, entry.local_name, "test")["test"]))


def battery_items(data_dir: str, task: str, limit: int) -> list:
    """The answers ``mathjudge audit`` sends for ``task``."""
    from lm_eval_mathjudge.audit import build

    return build(task, task_docs(data_dir, task.rsplit("_", 1)[0]), limit)
