"""One sample to its judge request: the judge's template, the media it may attach, and the samples never sent.

A ``Renderer`` is how a task's samples become judge requests (``TaskSpec.render``), for the run's
pass, for the streamed calls and for the judge audit alike: a sample whose generator made no media
is an ``Outcome`` (counted, never judged); media that cannot be sent fail that sample alone. Media
are attached only from the folders the task's generator made them in and the ``judge_media_dirs``
setting (``media_roots``, read once per renderer: the generator's folders are known once it ran); a
task without them had a text model answer, and nothing of its answers is attached.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Mapping, Sequence

from .. import generators
from ..core import counterfactual, flags, media
from ..core.errors import MediaError
from ..core.judges import Judge
from ..core.types import JudgeRequest, Outcome, Recheck, clean_text
from ..judging.client import outcome_from_error

log = logging.getLogger(__name__)


class Renderer:
    """(doc, response) -> the judge request of one task's sample, or the Outcome of one never judged."""

    def __init__(self, judge: Judge, task: str, media_dirs: Sequence[str] = (), recheck: bool = False):
        self.judge, self.task, self._extra = judge, task, tuple(media_dirs)
        self.recheck = recheck  # judge_counterfactual: each request carries its re-check with a wrong reference
        self._roots: tuple[str, ...] | None = None

    def __call__(self, doc: Mapping[str, Any], response: str) -> JudgeRequest | Outcome:
        failed = generators.generation_failure(response)
        if failed is not None:  # the generator made no media for this doc: counted, never judged
            return Outcome(failure=failed[0], error=failed[1])
        try:
            request = self.judge.request(doc, clean_text(response), self.media_roots())
            return self._with_recheck(request, doc, clean_text(response)) if self.recheck else request
        except MediaError as exc:  # the output names media that cannot be sent: this sample only
            log.warning("%s: %s", self.task, exc)
            return outcome_from_error(exc)

    def _with_recheck(self, request: JudgeRequest, doc: Mapping[str, Any], response: str) -> JudgeRequest:
        """The request with its counterfactual re-check: the same answer, the reference's final answer changed."""
        wrong, built = counterfactual.wrong_doc(doc)
        check = (Recheck(refused=built.refused) if wrong is None else
                 Recheck(request=self.judge.request(wrong, response, self.media_roots()), answer=built.answer))
        return dataclasses.replace(request, recheck=check)

    def media_roots(self) -> tuple[str, ...]:
        """Folders media may be attached from: the generator's, then the judge_media_dirs setting."""
        if self._roots is None:
            self._roots = tuple(dict.fromkeys((*generators.media_dirs(self.task), *self._extra)))
        return self._roots

    def flags(self, response: str) -> list[str]:
        """flags.py's flags of a response; ``media_in_text`` when a text model's answer carries media (never
        attached: the task has no media folders), ``media_outside`` when it names media we refused to read."""
        if generators.generation_failure(response) is not None:  # our own marker, not the model's text
            return []
        found = flags.detect(response)
        roots = self.media_roots()
        if not roots and media.embedded(response):
            found.append("media_in_text")
        elif self.judge.name == "vlm" and media.refused(response, roots):
            found.append("media_outside")
        return [name for name in flags.FLAGS if name in found]


def as_text(value: Any) -> str:
    """A filtered response as text: without a take_first filter lm-eval hands over a list (one per repeat)."""
    if isinstance(value, (list, tuple)):
        value = value[0] if value else ""
    return value if isinstance(value, str) else str(value)


def longest_answer(generation_kwargs: Any) -> int | None:
    """The most tokens the model may write per answer: the task's (or --gen_kwargs') limit; None when
    they name none (the model adapter's own limit then applies, which the task cannot see)."""
    kwargs = generation_kwargs if isinstance(generation_kwargs, dict) else {}
    limits = [kwargs.get(name) for name in ("max_gen_toks", "max_tokens", "max_new_tokens", "max_completion_tokens")]
    found = [int(v) for v in limits if isinstance(v, (int, float, str)) and str(v).strip().isdigit()]
    return max(found) if found else None
