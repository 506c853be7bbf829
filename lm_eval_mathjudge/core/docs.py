"""Loading a data set's docs offline, and the one list of keys a question goes by.

What each data set is and how its rows become docs (the ``mj_*`` fields) is its entry in the
registry, ``data_sets.py``; the task's ``mathjudge_dataset`` names it.

With ``MATHJUDGE_DATA_DIR=DIR`` a task reads ``DIR/<name>/test.jsonl``
instead of the Hugging Face hub (the layout of the project's shared data);
``local_source`` describes that file (path, content hash, rows) for the
results. When the hub cannot be reached, ``hub_failure`` says what to do; ``hub_unreachable``
finds that out in seconds (``datasets`` would retry for about 40 s before giving up).

``QUESTION_KEYS`` is the one list of names a question goes by (ours first, then
the data sets' own), read by ``question_of`` wherever a doc or a record is
matched by its question: generators, replay, rejudge, reports.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any

from . import jsontext
from .errors import ConfigError, DataError
from .redact import redact

DATA_DIR_ENV = "MATHJUDGE_DATA_DIR"
LOCAL_FILE = "test.jsonl"
CALCULATOR = re.compile(r"<<[^<>]*>>")  # GSM8K's "<<48/2=24>>" annotations (a model may copy them too)
QUESTION_KEYS = ("mj_question", "question", "problem", "Question", "Problem")


def question_of(doc: dict[str, Any]) -> str | None:
    """The question text of a doc or record, under the first of ``QUESTION_KEYS`` that holds text."""
    for key in QUESTION_KEYS:
        if isinstance(doc.get(key), str):
            return doc[key]
    return None


def question_texts(doc: dict[str, Any]) -> set[str]:
    """Every question text a doc carries (a record may match any of them)."""
    return {doc[key] for key in QUESTION_KEYS if isinstance(doc.get(key), str)}


def local_data_dir() -> str | None:
    return os.environ.get(DATA_DIR_ENV) or None


def load_local(data_dir: str, name: str, split: str):
    """A DatasetDict with one split read from ``data_dir/name/test.jsonl``."""
    import datasets

    path = os.path.join(data_dir, name, LOCAL_FILE)
    if not os.path.isfile(path):
        raise DataError(f"{DATA_DIR_ENV}={data_dir} has no {name}/{LOCAL_FILE} (looked for {path}). "
                          f"Point {DATA_DIR_ENV} at a folder laid out as <dataset>/{LOCAL_FILE}, "
                          f"or unset it to load from the Hugging Face hub.")
    with open(path, encoding="utf-8") as fh:
        rows = [_json_row(line, path, n) for n, line in enumerate(fh, 1) if line.strip()]
    return datasets.DatasetDict({split: datasets.Dataset.from_list(rows)})


def local_source(data_dir: str, name: str) -> dict[str, Any]:
    """Where a task's local data came from: absolute path, SHA-256 of the bytes, number of rows."""
    path = os.path.abspath(os.path.join(data_dir, name, LOCAL_FILE))
    digest, rows = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        for line in fh:
            digest.update(line)
            rows += bool(line.strip())
    return {"path": path, "sha256": digest.hexdigest(), "rows": rows}


HUB_PROBE_S = 3.0  # one TCP connect to the hub: an unreachable hub is known in seconds, not after retries
_OFFLINE_ENV = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
_PROXY_ENV = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def hub_unreachable(environ: dict[str, str] | None = None, timeout: float = HUB_PROBE_S) -> str | None:
    """Why the Hugging Face hub cannot be reached (a short reason), or None when it can or cannot be told.

    Not probed in offline mode (``datasets`` then reads its cache at once) or behind a proxy (only the
    proxy knows the way); the host is ``HF_ENDPOINT``'s, as ``huggingface_hub`` uses it.
    """
    import socket
    from urllib.parse import urlsplit

    environ = os.environ if environ is None else environ
    if any(environ.get(n, "").strip().lower() in ("1", "true", "yes", "on") for n in _OFFLINE_ENV):
        return None
    if any(environ.get(n) for n in _PROXY_ENV):
        return None
    url = urlsplit(environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = url.hostname, url.port or (80 if url.scheme == "http" else 443)
    if not host:
        return None
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        return f"{host}:{port} does not answer ({type(exc).__name__}: {exc})"
    return None


def hub_failure(task: str, name: str | None, hub_id: str, error: BaseException | str) -> str:
    """The message for a data set that could not be loaded from the hub: both ways out first, then the cause."""
    folder = name or "<dataset>"
    cause = error if isinstance(error, str) else f"{type(error).__name__}: {redact(str(error))[:300]}"
    return (f"task {task}: the data set {hub_id} is not local and cannot be loaded from the Hugging Face hub. "
            f"Set {DATA_DIR_ENV} to a folder laid out as <dataset>/{LOCAL_FILE} (this task reads "
            f"{folder}/{LOCAL_FILE}; the project's examples/data holds the first rows of every set), or, with a "
            f"copy already in the Hugging Face cache, set HF_HUB_OFFLINE=1 and HF_DATASETS_OFFLINE=1. "
            f"(Cause: {cause}.)")


def _json_row(line: str, path: str, number: int) -> dict[str, Any]:
    try:
        return jsontext.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{number} is not valid JSON ({exc.msg})") from None
