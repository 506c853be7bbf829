"""Judging from Python: one answer (``judge_answer``) or many (``judge_answers``), without lm-eval.

The answers go through the judging client a task uses (``judging.client``):
the same prompt and parser, cache, rate limits, retries, preflight and
failure accounting, on any backend. A judge failure (an off-contract reply,
a refusal, a judge that cannot be reached) comes back as a ``Judgement``
with ``failure`` set and ``correct`` None: it is never scored as wrong.

Settings are a ``JudgeSettings`` (taken as it is) or a mapping, which gets
the layers a task's settings get: the (judge, backend) defaults, then the
``MATHJUDGE_*`` environment variables, then the mapping.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .core.data_sets import answer_only
from .core.errors import ConfigError, MediaError
from .core.judges import JUDGES, Judge
from .core.types import JudgeRequest, Outcome, clean_text
from .judging import factory
from .judging.client import outcome_from_error
from .settings.credentials import refuse_credentials
from .settings.layers import resolve_settings
from .settings.models import DEFAULTS, LOCAL_MODEL
from .settings.schema import FIELDS, JudgeSettings, judge_label


@dataclass(frozen=True)
class Answer:
    """One answer to judge: the problem, the model's response, the gold answer.

    ``reference`` is the worked solution the judge compares against; without one
    the judge is told the final answer only (as for AIME 2025, which has none).
    """
    question: str
    response: str
    gold: str
    reference: str | None = None

    def __post_init__(self):
        for name in ("question", "response", "gold", "reference"):
            value = getattr(self, name)
            if not isinstance(value, str) and not (name == "reference" and value is None):
                raise ConfigError(f"Answer.{name} must be text, not {type(value).__name__} {value!r:.40}")

    def doc(self) -> dict[str, str]:
        """The fields a task's doc carries (``core.data_sets``), from which the judge's request is built."""
        reference = self.reference or answer_only(self.gold)
        return {"mj_question": self.question, "mj_reference": reference, "mj_answer": self.gold}


@dataclass(frozen=True)
class Judgement:
    """The judge's word on one answer.

    ``correct`` is the primary verdict (exact match: the judge's Final Verdict;
    VLM judge: FINAL_CORRECT), None when the judge failed. ``scores`` are the
    task's metrics for this answer (every one 0 and ``judge_failed`` 1 on a
    failure). ``transport`` marks a failure to reach the judge (not about the
    answer: judging again later may succeed, and cached verdicts are kept).
    """
    correct: bool | None
    scores: dict[str, float]
    verdict: Any = None  # the parsed verdict (core.parsing.ExactMatchVerdict or VlmVerdict)
    failure: str | None = None  # why there is no verdict: "unparseable", "http_401", "media_missing", ...
    error: str | None = None
    transport: bool = False
    cached: bool = False
    raw_reply: str | None = None
    judge: str = ""  # backend:model, as the results name it

    @property
    def failed(self) -> bool:
        return self.failure is not None


def judge_answer(question: str, response: str, gold: str, reference: str | None = None, *,
                 judge: str = "exact_match", settings: JudgeSettings | Mapping[str, Any] | None = None,
                 media_dirs: Sequence[str] = (), progress: bool = False) -> Judgement:
    """Judge one answer; see ``judge_answers``.

    >>> judge_answer("What is 2 + 3?", "2 + 3 = 5, so \\\\boxed{5}.", "5",
    ...              settings={"backend": "local"}).correct  # doctest: +SKIP
    True
    """
    answer = Answer(question, response, gold, reference)
    return judge_answers([answer], judge=judge, settings=settings, media_dirs=media_dirs, progress=progress)[0]


def judge_answers(answers: Sequence[Answer], *, judge: str = "exact_match",
                  settings: JudgeSettings | Mapping[str, Any] | None = None, media_dirs: Sequence[str] = (),
                  progress: bool = False) -> list[Judgement]:
    """One ``Judgement`` per answer, in order, judged concurrently through the judging client.

    ``judge``: "exact_match" (the GPT-4-based Exact Match judge) or "vlm" (the VLM
    judge; a response naming an image or video file inside ``media_dirs`` is sent
    as that file). ``settings``: a ``JudgeSettings``, or a mapping of setting names
    (``{"backend": "openai", "model": "gpt-4o"}``) layered like a task's. Keys come
    from the SDKs' environment variables only, as in a task.

    Before any answer is judged, raises ``ConfigError`` for settings that cannot
    work (an unknown judge or setting, a key given as a setting, missing
    credentials) and ``FatalJudgeError`` for a judge that fails its preflight
    (endpoint, key, model). Both are ``MathJudgeError``.
    """
    chosen = _judge(judge)
    resolved = _settings(chosen.name, settings)
    strays = [type(a).__name__ for a in answers if not isinstance(a, Answer)]
    if strays:
        raise ConfigError(f"judge_answers takes Answer(question, response, gold, reference) items, not {strays[0]}")
    if not answers:
        return []
    roots = tuple(str(d) for d in media_dirs)
    built = [_request(chosen, answer, roots) for answer in answers]
    client = factory.open_client(chosen, resolved, progress=progress)
    try:
        todo = [item for item in built if isinstance(item, JudgeRequest)]
        judged = iter(client.judge_all(todo, desc=f"judging {len(todo)} answers") if todo else ())
        outcomes = [next(judged) if isinstance(item, JudgeRequest) else item for item in built]
    finally:
        client.close()
    return [_judgement(chosen, outcome, judge_label(resolved)) for outcome in outcomes]


def _judge(name: str) -> Judge:
    if name not in JUDGES:
        raise ConfigError(f"unknown judge {name!r}; use one of {', '.join(JUDGES)}")
    return JUDGES[name]


def _settings(judge: str, settings: JudgeSettings | Mapping[str, Any] | None) -> JudgeSettings:
    if not isinstance(settings, JudgeSettings):
        values = dict(settings or {})
        refuse_credentials(values, "the judge settings", known=FIELDS)  # keys come from the environment only
        unknown = sorted(set(values) - set(FIELDS))
        if unknown:
            raise ConfigError(f"unknown judge setting {', '.join(map(repr, unknown))}; known: {', '.join(FIELDS)}")
        return resolve_settings(judge, None, None, overrides=values)
    if (judge, settings.backend) not in DEFAULTS:
        raise ConfigError(f"the {judge} judge cannot run on the {settings.backend} backend")
    # The local judge has no model to choose: name it as the harness does.
    return dataclasses.replace(settings, model=LOCAL_MODEL) if settings.backend == "local" else settings


def _request(judge: Judge, answer: Answer, media_dirs: tuple[str, ...]) -> JudgeRequest | Outcome:
    try:
        return judge.request(answer.doc(), clean_text(answer.response), media_dirs)
    except MediaError as exc:  # the response names media that cannot be sent: this answer only
        return outcome_from_error(exc)


def _judgement(judge: Judge, outcome: Outcome, label: str) -> Judgement:
    scores = judge.scores(outcome.verdict)
    primary = judge.metric_names[0]
    return Judgement(correct=None if outcome.verdict is None else scores[primary] == 1.0, scores=scores,
                     verdict=outcome.verdict, failure=outcome.failure, error=outcome.error,
                     transport=outcome.transport_failed, cached=outcome.cached, raw_reply=outcome.raw_reply,
                     judge=label)
