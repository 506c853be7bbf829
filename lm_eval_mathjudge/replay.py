"""Replay recorded generations as an lm-eval model, so they can be judged again.

``--model mathjudge-replay --model_args path=FILE`` answers every request
from FILE instead of generating. FILE is JSONL in either shape:

* a previous run's samples file (``samples_<task>_*.jsonl``): ``doc`` and ``resps``;
* plain records with ``response`` and ``question`` (or ``problem``) or ``doc_id``,
  optionally ``task``, such as the generations this plugin saves when judging fails
  (``recovery.save_generations``).

A request is matched by its question text (robust to ``--limit`` and
reordering; a record of the same task wins when a file holds several tasks).
``doc_id`` is used only for records that carry no question, since doc ids of
different data sets collide. Requests with no recording are an error that
says how many and which, rather than silently empty answers.

A record may name the folders its media response was made in (``media_dirs``,
as the saved generations of an image or video run do): the replay records them
as the task's media folders, so the VLM judge attaches those files again.
"""

from __future__ import annotations

import json
import os
from typing import Any

from lm_eval.api.model import LM

from . import compat
from ._startup import REPLAY_MODEL
from .errors import ConfigError
from .generators import record_provenance

_QUESTION_KEYS = ("question", "problem", "Question", "Problem", "mj_question")


class ReplayLM(LM):
    def __init__(self, path: str | None = None, **_ignored: Any):
        compat.require_supported()
        super().__init__()
        if not path:
            raise ConfigError(f"--model {REPLAY_MODEL} needs --model_args path=FILE.jsonl "
                              "(a samples file or records with 'response' and 'question'/'doc_id')")
        # (task or None, question) -> response; doc_id -> response only for records without a question
        self._by_question: dict[tuple[str | None, str], str] = {}
        self._by_doc_id: dict[tuple[str | None, int], str] = {}
        self._path = path
        self._media_dirs: dict[str | None, list[str]] = {}  # task (None: any) -> folders of its media
        for number, row in _rows(path):
            self._add(row, path, number)

    def _add(self, row: dict, path: str, number: int) -> None:
        response = _response_of(row)
        if response is None:
            raise ConfigError(f"{path}:{number} has neither 'response' nor 'resps'")
        task, question = row.get("task"), question_of(row.get("doc") or row)
        folders = row.get("media_dirs")
        if isinstance(folders, list):
            known = self._media_dirs.setdefault(task, [])
            known.extend(f for f in folders if isinstance(f, str) and f and f not in known)
        if question is not None:
            self._by_question[(task, _norm(question))] = response
            self._by_question.setdefault((None, _norm(question)), response)
        elif row.get("doc_id") is not None:
            self._by_doc_id[(task, int(row["doc_id"]))] = response
            self._by_doc_id.setdefault((None, int(row["doc_id"])), response)

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        answers, missing = [], []
        for request in requests:
            found = self._lookup(request)
            if found is None:
                missing.append(f"{request.task_name}:{request.doc_id}")
            answers.append(found or "")
        for task in dict.fromkeys(r.task_name for r in requests):
            folders = list(dict.fromkeys([*self._media_dirs.get(task, []), *self._media_dirs.get(None, [])]))
            if folders:
                record_provenance(task, {"adapter": REPLAY_MODEL, "path": self._path, "media_dirs": folders})
        if missing:
            raise ConfigError(f"{len(missing)} of {len(answers)} requests have no recorded response "
                              f"({', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}); "
                              "restrict the run with --limit or --samples to the recorded docs")
        return answers

    def _lookup(self, request) -> str | None:
        """By question text (this task's record first); by doc_id only when the records carry no question."""
        question = question_of(request.doc or {})
        if question is not None:
            key = _norm(question)
            return self._by_question.get((request.task_name, key), self._by_question.get((None, key)))
        return self._by_doc_id.get((request.task_name, request.doc_id), self._by_doc_id.get((None, request.doc_id)))

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        raise ConfigError(f"{REPLAY_MODEL} only replays generations; it cannot score log-likelihoods")

    loglikelihood_rolling = loglikelihood


def _rows(path: str):
    if not os.path.isfile(path):
        raise ConfigError(f"replay file {path} does not exist")
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if line.strip():
                try:
                    yield number, json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"{path}:{number} is not valid JSON ({exc.msg})") from None


def _response_of(row: dict) -> str | None:
    if isinstance(row.get("response"), str):
        return row["response"]
    resps = row.get("resps")  # samples file: [[text, ...], ...] per request
    while isinstance(resps, list) and resps:
        resps = resps[0]
    return resps if isinstance(resps, str) else None


def question_of(doc: dict) -> str | None:
    """The question text of a doc or record, under any of the data sets' key names."""
    for key in _QUESTION_KEYS:
        if isinstance(doc.get(key), str):
            return doc[key]
    return None


def _norm(text: str) -> str:
    return " ".join(text.split())
