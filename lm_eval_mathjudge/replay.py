"""Replay recorded generations as an lm-eval model, so they can be judged again.

``--model mathjudge-replay --model_args path=FILE`` answers every request
from FILE instead of generating. FILE is JSONL in either shape:

* a previous run's samples file (``samples_<task>_*.jsonl``): ``doc`` and ``resps``;
* plain records with ``response`` and ``question`` (or ``problem``) and/or ``doc_id``,
  such as the generations this plugin saves when a judge run fails.

A request is matched by its question text first (robust to ``--limit`` and
reordering), then by ``doc_id``. Requests with no recording are an error that
says how many and which, rather than silently empty answers.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Iterable

from lm_eval.api.model import LM

from .errors import ConfigError

REPLAY_MODEL = "mathjudge-replay"
_QUESTION_KEYS = ("question", "problem", "Question", "Problem", "mj_question")


class ReplayLM(LM):
    def __init__(self, path: str | None = None, **_ignored: Any):
        super().__init__()
        if not path:
            raise ConfigError(f"--model {REPLAY_MODEL} needs --model_args path=FILE.jsonl "
                              "(a samples file or records with 'response' and 'question'/'doc_id')")
        self._by_question: dict[str, str] = {}
        self._by_doc_id: dict[int, str] = {}
        for number, row in _rows(path):
            self._add(row, path, number)

    def _add(self, row: dict, path: str, number: int) -> None:
        response = _response_of(row)
        if response is None:
            raise ConfigError(f"{path}:{number} has neither 'response' nor 'resps'")
        question = _question_of(row.get("doc") or row)
        if question is not None:
            self._by_question[_norm(question)] = response
        if row.get("doc_id") is not None:
            self._by_doc_id[int(row["doc_id"])] = response

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        answers, missing = [], []
        for request in requests:
            found = self._lookup(request)
            if found is None:
                missing.append(request.doc_id)
            answers.append(found or "")
        if missing:
            raise ConfigError(f"{len(missing)} of {len(answers)} requests have no recorded response "
                              f"(doc_id {', '.join(map(str, missing[:10]))}{' ...' if len(missing) > 10 else ''}); "
                              "restrict the run with --limit or --samples to the recorded docs")
        return answers

    def _lookup(self, request) -> str | None:
        question = _question_of(request.doc or {})
        if question is not None and _norm(question) in self._by_question:
            return self._by_question[_norm(question)]
        return self._by_doc_id.get(request.doc_id)

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        raise ConfigError(f"{REPLAY_MODEL} only replays generations; it cannot score log-likelihoods")

    loglikelihood_rolling = loglikelihood


def save_generations(cache_dir: str, task: str, rows: Iterable[tuple[int, dict, str]]) -> str:
    """Write generations to a replay file under the cache folder and return its path."""
    folder = os.path.join(cache_dir, "generations")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{task}-{time.strftime('%Y%m%dT%H%M%S')}.jsonl")
    with open(path, "w", encoding="utf-8") as fh:
        for doc_id, doc, response in rows:
            record = {"doc_id": doc_id, "question": _question_of(doc), "response": response}
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


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


def _question_of(doc: dict) -> str | None:
    for key in _QUESTION_KEYS:
        if isinstance(doc.get(key), str):
            return doc[key]
    return None


def _norm(text: str) -> str:
    return " ".join(text.split())
