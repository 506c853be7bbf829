"""``mathjudge-media``: score media made outside the harness (open-weight generators on your own GPUs).

``--model_args dir=DIR`` answers each request with
``DIR/<task>/<doc_id>.<png|jpg|jpeg|webp|mp4|webm|mov>``. With
``manifest=FILE`` (JSONL; ``task``, ``doc_id`` or ``question``, ``path``
relative to DIR) other layouts work too; a manifest entry wins over the
folder layout. Records without ``task`` apply to every task.

A doc with no file is that sample's counted failure (``missing_media``), as is
a doc with two candidate files (``ambiguous_media``) or a file whose real
location is outside DIR, e.g. through a symlink (``outside_dir``). A manifest
path that is absolute or climbs out of DIR is refused before anything runs.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

from lm_eval.api.model import LM

from ..core.docs import question_of
from ..core import jsontext
from ..core.errors import ConfigError
from ..core.media import inside as _inside
from . import failure_marker, record_provenance
from .settings import IGNORED_ARGS, refuse_name_arg

ADAPTER = "mathjudge-media"
EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".mp4", ".webm", ".mov")
# model=: the name lm-eval records for the run (this model has no vendor model to name)
_IGNORED_ARGS = (*IGNORED_ARGS, "model")


class PregeneratedMediaLM(LM):
    def __init__(self, dir: str | None = None, manifest: str | None = None, **args: Any):  # noqa: A002
        super().__init__()
        refuse_name_arg(ADAPTER, args)
        unknown = sorted(set(args) - set(_IGNORED_ARGS))
        if unknown:
            raise ConfigError(f"--model {ADAPTER}: unknown --model_args {', '.join(unknown)}; "
                              "known: dir, manifest, model (the run's name)")
        if not dir:
            raise ConfigError(f"--model {ADAPTER} needs --model_args dir=DIR (files DIR/<task>/<doc_id>.png|mp4|...)")
        self._root = os.path.realpath(os.path.expanduser(str(dir)))
        if not os.path.isdir(self._root):
            raise ConfigError(f"--model_args dir={dir}: no such folder")
        self._manifest_path = manifest
        self._by_doc: dict[tuple[str | None, int], str] = {}
        self._by_question: dict[tuple[str | None, str], str] = {}
        if manifest:
            self._load_manifest(os.path.expanduser(str(manifest)))

    # ------------------------------------------------------------------ manifest
    def _load_manifest(self, path: str) -> None:
        try:
            with open(path, encoding="utf-8") as fh:
                lines = list(enumerate(fh, 1))
        except OSError as exc:
            raise ConfigError(f"manifest={path}: cannot read it ({exc.strerror or exc})") from None
        for number, line in lines:
            if line.strip():
                self._add(_json(line, path, number), f"{path}:{number}")

    def _add(self, row: dict, where: str) -> None:
        rel = row.get("path")
        if not isinstance(rel, str) or not rel:
            raise ConfigError(f"{where}: a manifest record needs 'path' (relative to dir)")
        if os.path.isabs(rel) or not _inside(self._root, os.path.normpath(os.path.join(self._root, rel))):
            raise ConfigError(f"{where}: path {rel!r} leaves dir={self._root}; give paths relative to that folder")
        task = row.get("task")
        if row.get("question") is not None:
            self._by_question[(task, _norm(str(row["question"])))] = rel
        elif row.get("doc_id") is not None:
            self._by_doc[(task, int(row["doc_id"]))] = rel
        else:
            raise ConfigError(f"{where}: a manifest record needs 'doc_id' or 'question'")

    # ------------------------------------------------------------------ lm-eval API
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        answers, counts = [], Counter()
        for request in requests:
            answer, kind = self._answer(request)
            answers.append(answer)
            counts[(request.task_name, kind)] += 1
        for task in sorted({t for t, _ in counts}):
            failures = {k: n for (t, k), n in counts.items() if t == task and k != "found"}
            record_provenance(task, {"adapter": ADAPTER, "dir": self._root, "manifest": self._manifest_path,
                                     "run": {"requests": sum(n for (t, _), n in counts.items() if t == task),
                                             "found": counts[(task, "found")], "failures": failures}})
        return answers

    def _answer(self, request) -> tuple[str, str]:
        rel = self._manifest_entry(request)
        candidates = [rel] if rel else [os.path.join(request.task_name, f"{request.doc_id}{ext}") for ext in EXTENSIONS]
        found = [c for c in candidates if os.path.isfile(os.path.join(self._root, c))]
        where = f"{request.task_name} doc {request.doc_id}"
        if not found:
            looked = rel or os.path.join(request.task_name, f"{request.doc_id}.{{{','.join(e[1:] for e in EXTENSIONS)}}}")
            return failure_marker("missing_media", f"no media for {where}: looked for {os.path.join(self._root, looked)}"), \
                "missing_media"
        if len(found) > 1:
            return failure_marker("ambiguous_media", f"{where} has several files ({', '.join(found)}); keep one"), \
                "ambiguous_media"
        real = os.path.realpath(os.path.join(self._root, found[0]))
        if not _inside(self._root, real):
            return failure_marker("outside_dir", f"{where}: {found[0]} resolves to {real}, outside dir={self._root}; "
                                                 "copy the file into the folder instead of linking it"), "outside_dir"
        return real, "found"

    def _manifest_entry(self, request) -> str | None:
        question = question_of(request.doc or {})
        if question is not None:
            key = _norm(question)
            hit = self._by_question.get((request.task_name, key)) or self._by_question.get((None, key))
            if hit:
                return hit
        return self._by_doc.get((request.task_name, request.doc_id)) or self._by_doc.get((None, request.doc_id))

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        raise ConfigError(f"{ADAPTER} answers with media files; it has no log-likelihoods")

    loglikelihood_rolling = loglikelihood


def _json(line: str, path: str, number: int) -> dict:
    try:
        row = jsontext.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{number} is not valid JSON ({exc.msg})") from None
    if not isinstance(row, dict):
        raise ConfigError(f"{path}:{number}: expected a JSON object")
    return row


def _norm(text: str) -> str:
    return " ".join(text.split())
