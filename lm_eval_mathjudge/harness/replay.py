"""Replay recorded generations as an lm-eval model, so they can be judged again.

``--model mathjudge-replay --model_args path=FILE`` answers every request
from FILE instead of generating. FILE is JSONL (UTF-8), one JSON object per line,
in any of these shapes:

* a previous run's samples file (``samples_<task>_*.jsonl``): ``doc`` and ``resps``;
* records with ``response`` and ``question`` (or ``problem``), optionally ``task``
  and ``doc_id``, such as the generations this plugin saves when judging stops
  (``recovery.save_generations``);
* records with ``response`` and ``doc_id`` only, optionally ``task``.

A record may hold k answers for one doc, for a task with ``repeats: k``: ``"responses":
[...]`` instead of ``"response"``, or a samples file's ``resps`` with k answers. lm-eval asks
for a doc k times in a row; the i-th ask gets the i-th answer. A record of one answer
answers every ask; a record of fewer than k answers is an error naming its line.

A request is matched by its question text (robust to ``--limit`` and
reordering; a record of the same task wins when a file holds several tasks).
``doc_id`` is used only for records that carry no question, since doc ids of
different data sets collide: such a record matches the doc of that id in its
``task``, or, without a ``task``, in the run's only task (a run of several tasks
needs ``task`` on those records). A doc recorded twice is an error naming both
lines, unless both give the same response (then it counts once). Every
malformed line is a ``ConfigError`` naming ``FILE:LINE`` and what to fix;
requests with no recording are an error that says how many and which, rather
than silently empty answers.

With ``fallback=MODEL`` (the resume command of a run that died during generation names it, with
that run's model arguments after it) the requests the file does not hold go to MODEL, built from the
remaining model arguments, so only the generations that never finished are asked for; each answer,
replayed or new, is reported as finished like any model's (so this run's own generations file holds
them all).

``model=NAME`` names the run (lm-eval records it as the model's name; without it, the file's path);
with ``fallback``, ``model=`` is the fallback model's own argument, which names the run as well.

A record may name the folders its media response was made in (``media_dirs``,
as the saved generations of an image or video run do): the replay records them
as the task's media folders, so the VLM judge attaches those files again.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Iterator

from lm_eval.api.model import LM

from .. import compat
from .._startup import REPLAY_MODEL
from ..core.docs import QUESTION_KEYS, question_of
from ..core.errors import ConfigError
from ..generators import record_provenance
from ..generators.settings import refuse_name_arg

_SHAPES = ('one JSON object per line: {"question": "...", "response": "..."}, {"doc_id": 0, "response": "..."} '
           "(optionally with \"task\"), or the lines of an lm_eval samples_<task>_*.jsonl file")


@dataclass(frozen=True)
class _Recorded:
    responses: tuple[str, ...]  # one per sample (lm-eval's repeats)
    line: int


class ReplayLM(LM):
    def __init__(self, path: str | None = None, fallback: str | None = None, **rest: Any):
        compat.require_supported()
        refuse_name_arg(REPLAY_MODEL, rest)
        super().__init__()
        # The run's own model for what the file lacks; without it the other arguments are lm-eval's
        # batch size and device, which a replay has no use for.
        self._fallback = compat.build_model(fallback, rest) if fallback else None
        if not path:
            raise ConfigError(f"--model {REPLAY_MODEL} needs --model_args path=FILE.jsonl "
                              "(a samples file or records with 'response' and 'question'/'doc_id')")
        self._path = path
        # (task or None, question) -> {doc_id or None: record}: a data set may ask one question twice
        self._by_question: dict[tuple[str | None, str], dict[int | None, _Recorded]] = {}
        self._any_task: dict[str, dict[int | None, _Recorded]] = {}  # question -> the first records of any task
        self._by_doc_id: dict[tuple[str | None, int], _Recorded] = {}  # records without a question
        self._media_dirs: dict[str | None, list[str]] = {}  # task (None: any) -> folders of its media
        for number, row in _rows(path):
            self._add(row, number)
        if not (self._by_question or self._by_doc_id):
            raise ConfigError(f"replay file {path} holds no records (it is empty); it needs {_SHAPES}")

    def _add(self, row: Any, number: int) -> None:
        where = f"{self._path}:{number}"
        if not isinstance(row, dict):
            raise ConfigError(f"{where} is a JSON {_json_type(row)}, not an object; the file needs {_SHAPES}")
        response = _response_of(row, where)
        if response is None:
            raise ConfigError(f"{where} has no response text: give the model's answer as \"response\": \"...\" "
                              "(k answers as \"responses\": [...], or \"resps\" as in a samples file)")
        task = row.get("task")
        if task is not None and not isinstance(task, str):
            raise ConfigError(f"{where}: 'task' must be a task name (text), not {task!r}")
        doc_id = row.get("doc_id")
        if doc_id is not None and (isinstance(doc_id, bool) or not isinstance(doc_id, int) or doc_id < 0):
            raise ConfigError(f"{where}: 'doc_id' must be a whole number, 0 or more (the doc's index in the task), "
                              f"not {doc_id!r}")
        folders = row.get("media_dirs")
        if isinstance(folders, list):
            known = self._media_dirs.setdefault(task, [])
            known.extend(f for f in folders if isinstance(f, str) and f and f not in known)
        doc = row.get("doc")
        question = question_of(doc) if isinstance(doc, dict) else _question_field(row, where)  # a samples doc as is
        recorded = _Recorded(response, number)
        if question is not None:
            key = _norm(question)
            what = f"the question {_short(question)!r}" + (f" (doc_id {doc_id})" if doc_id is not None else "")
            self._keep(self._by_question.setdefault((task, key), {}), doc_id, recorded, what)
            self._any_task.setdefault(key, {}).setdefault(doc_id, recorded)
        elif doc_id is not None:
            self._keep(self._by_doc_id, (task, doc_id), recorded, f"doc_id {doc_id}" + (f" of {task}" if task else ""))
        else:
            raise ConfigError(f"{where} has neither a question ('question' or 'problem') nor a 'doc_id', so it "
                              "matches no request; add one of them")

    def _keep(self, table: dict, key: Any, recorded: _Recorded, what: str) -> None:
        """A doc recorded twice: the same response counts once; two different ones are an error naming both lines."""
        seen = table.get(key)
        if seen is None:
            table[key] = recorded
        elif seen.responses != recorded.responses:
            raise ConfigError(f"{self._path}:{seen.line} and {self._path}:{recorded.line} both record {what}, with "
                              "different responses; keep one of the two lines (or give each its 'task')")

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        self._check_doc_ids(requests)
        found: list[str | None] = []
        asked: dict[int, int] = {}  # lm-eval repeats a request k times in a row (the same Instance)
        for request in requests:
            recorded = self._lookup(request)
            nth = asked[id(request)] = asked.get(id(request), -1) + 1
            if recorded is None:
                found.append(None)
            elif len(recorded.responses) == 1:
                found.append(recorded.responses[0])
            elif nth < len(recorded.responses):
                found.append(recorded.responses[nth])
            else:
                raise ConfigError(f"{self._path}:{recorded.line} records {len(recorded.responses)} responses for "
                                  f"{request.task_name}:{request.doc_id}, but the run asks for more (repeats "
                                  f"{getattr(request, 'repeats', '?')}); record one response per sample, or lower repeats")
        missing = [i for i, answer in enumerate(found) if answer is None]
        for task in dict.fromkeys(r.task_name for r in requests):
            folders = list(dict.fromkeys([*self._media_dirs.get(task, []), *self._media_dirs.get(None, [])]))
            if folders:
                record_provenance(task, {"adapter": REPLAY_MODEL, "path": self._path, "media_dirs": folders})
        if self._fallback is not None:
            for i, request in enumerate(requests):  # the replayed ones too: a later resume needs them
                if found[i] is not None:
                    self.cache_hook.add_partial("generate_until", request.args, found[i])
            if missing:  # only what never finished goes to the run's own model
                for i, answer in zip(missing, self._fallback.generate_until([requests[i] for i in missing],
                                                                            disable_tqdm)):
                    found[i] = answer
            return found
        if missing:
            names = [f"{requests[i].task_name}:{requests[i].doc_id}" for i in missing]
            raise ConfigError(f"{len(missing)} of {len(requests)} requests have no recorded response in {self._path} "
                              f"({', '.join(names[:10])}{' ...' if len(names) > 10 else ''}); "
                              "records match by question text (or doc_id, for records without one): check that "
                              "the file is for these tasks, or restrict the run with --limit or --samples to the "
                              "recorded docs")
        return found

    def _check_doc_ids(self, requests) -> None:
        """Records with only a doc_id and no task name one doc per id: fine for one task, ambiguous for several."""
        if not any(task is None for task, _ in self._by_doc_id):
            return
        tasks = sorted({request.task_name for request in requests})
        if len(tasks) > 1:
            raise ConfigError(f"{self._path} has records with only a doc_id and no 'task', but this run has "
                              f"{len(tasks)} tasks ({', '.join(tasks)}) whose doc ids collide; add \"task\" to "
                              "those records, or run one task at a time")

    def _lookup(self, request) -> _Recorded | None:
        """By question text (this task's record first); else by doc_id among the records without a question."""
        question = question_of(request.doc or {})
        found = None
        if question is not None:
            key = _norm(question)
            found = _pick(self._by_question.get((request.task_name, key)), request.doc_id) \
                or _pick(self._any_task.get(key), request.doc_id)
        if found is None:
            found = self._by_doc_id.get((request.task_name, request.doc_id),
                                        self._by_doc_id.get((None, request.doc_id)))
        return found

    # lm-eval builds the prompts with the model's chat template: the fallback model's, so the requests
    # it is asked are the ones the dead run asked.
    def apply_chat_template(self, chat_history, add_generation_prompt: bool = True):
        if self._fallback is None:
            return super().apply_chat_template(chat_history, add_generation_prompt)
        return self._fallback.apply_chat_template(chat_history, add_generation_prompt)

    @property
    def tokenizer_name(self) -> str:
        return self._fallback.tokenizer_name if self._fallback is not None else super().tokenizer_name

    def chat_template(self, chat_template=False):
        return (self._fallback.chat_template(chat_template) if self._fallback is not None
                else super().chat_template(chat_template))

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        raise ConfigError(f"{REPLAY_MODEL} only replays generations; it cannot score log-likelihoods")

    loglikelihood_rolling = loglikelihood


def _pick(recorded: dict[int | None, _Recorded] | None, doc_id: int) -> _Recorded | None:
    """The record of this question for this doc: its own doc_id first, else the one response all agree on."""
    if not recorded:
        return None
    if doc_id in recorded:
        return recorded[doc_id]
    first = next(iter(recorded.values()))
    return first if all(r.responses == first.responses for r in recorded.values()) else None


def _rows(path: str) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) of every non-blank line; anything unreadable is a ConfigError naming the line."""
    if os.path.isdir(path):
        raise ConfigError(f"replay file {path} is a folder; pass one .jsonl file (a samples_<task>_*.jsonl, or the "
                          "generations file a stopped run named)")
    if not os.path.isfile(path):
        raise ConfigError(f"replay file {path} does not exist")
    try:
        with open(path, "rb") as fh:
            yield from _parsed(path, fh)
    except OSError as exc:
        raise ConfigError(f"replay file {path} cannot be read ({exc.strerror or exc})") from None


def _parsed(path: str, fh) -> Iterator[tuple[int, Any]]:
    for number, raw in enumerate(fh, 1):
        if not raw.endswith(b"\n") and not _whole_json(raw):  # a run file's last record, cut short by a kill
            continue
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark, as some editors write
            raw = raw[3:]
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}:{number} is not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
                              "save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)") from None
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{number} is not valid JSON ({exc.msg} at column {exc.colno}); the file needs "
                              f"{_SHAPES}") from None
        except RecursionError:
            raise ConfigError(f"{path}:{number} nests JSON too deeply to read; the file needs {_SHAPES}") from None


def _whole_json(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return True


def _response_of(row: dict, where: str) -> tuple[str, ...] | None:
    """The record's answers: ``response``, ``responses`` (k of them) or a samples file's ``resps``."""
    if isinstance(row.get("response"), str):
        return (row["response"],)
    many = row.get("responses")
    if many is None:
        many = row.get("resps")  # samples file: [[text, ...]] per request (k texts with repeats k)
        while isinstance(many, list) and len(many) == 1 and isinstance(many[0], list):
            many = many[0]
        if isinstance(many, str):
            many = [many]
    if not isinstance(many, list) or not many:
        return None
    if not all(isinstance(r, str) for r in many):
        raise ConfigError(f"{where}: every answer in 'responses' (or 'resps') must be text; found "
                          f"{_json_type(next(r for r in many if not isinstance(r, str)))}")
    return tuple(many)


def _question_field(row: dict, where: str) -> str | None:
    """A plain record's question text; a question field that is present but not text is an error."""
    for key in QUESTION_KEYS:
        value = row.get(key)
        if isinstance(value, str):
            return value
        if value is not None:
            raise ConfigError(f"{where}: {key!r} must be the question's text, not {_json_type(value)} {value!r:.40}")
    return None


def _json_type(value: Any) -> str:
    names = {list: "array", str: "string", bool: "boolean", int: "number", float: "number", dict: "object"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _short(text: str, limit: int = 60) -> str:
    text = _norm(text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _norm(text: str) -> str:
    return " ".join(text.split())
