"""A task YAML that overrides our tasks' templates: checked before generation, never a jinja2 traceback.

lm-eval renders ``doc_to_text`` and ``doc_to_target`` (Jinja templates, a column name or a
``!function``) on the first doc when it builds the task, ``doc_to_text`` on every doc when it builds
the requests, and ``doc_to_target`` on every doc only when it writes the samples, after the judge
was paid. An override that names a column the docs do not have (``{{answr}}``), or that fails on
some docs, is found at the first two moments and the third is tried on every doc before anything
is generated; the error names the task, the field, the doc and the columns there are.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..core.errors import ConfigError
from ..core.jsontext import shown
from ..core.redact import redact

FIELDS = ("doc_to_text", "doc_to_target", "doc_to_choice")
OURS = "mj_question, mj_answer and mj_reference"


def explain(task: Any, docs: Iterable[tuple[int, Any]]) -> ConfigError | None:
    """The error for the first doc a template field of ``task`` cannot render; None when every field
    renders on every doc (the failure was something else)."""
    for doc_id, doc in docs:
        for field in FIELDS:
            if getattr(task.config, field, None) is None:
                continue
            try:
                getattr(task, field)(doc)
            except Exception as exc:  # noqa: BLE001 - Jinja, a column, a user's !function: said, not raised raw
                return _error(task, field, doc_id, doc, exc)
    return None


def check_targets(task: Any, docs: Iterable[tuple[int, Any]]) -> None:
    """Before generation: ``doc_to_target`` renders on every doc (lm-eval renders it when it writes the
    samples, after judging)."""
    for doc_id, doc in docs:
        try:
            task.doc_to_target(doc)
        except Exception as exc:  # noqa: BLE001 - as above
            raise _error(task, "doc_to_target", doc_id, doc, exc) from None


def first_doc(task: Any) -> list[tuple[int, Any]]:
    """The doc lm-eval tries a new task on (the first of its evaluation docs), if it has one yet."""
    docs = getattr(task, "task_docs", None)
    try:
        return [(0, docs[0])] if docs is not None and len(docs) else []
    except Exception:  # noqa: BLE001 - a data set that cannot even give its first doc: not a template's fault
        return []


def _error(task: Any, field: str, doc_id: int, doc: Any, exc: Exception) -> ConfigError:
    name = getattr(task.config, "task", None) or "this task"
    columns = ", ".join(sorted(map(str, doc))) if isinstance(doc, dict) else "(not a mapping)"
    reason = redact(str(exc)) or type(exc).__name__
    return ConfigError(
        f"task {name}: {field} {shown(getattr(task.config, field, None))} cannot be rendered for doc {doc_id} "
        f"({type(exc).__name__}: {shown(reason, 200)}). The docs have the columns {columns}: name one of them "
        f"(this plugin's templates use {OURS}), or remove {field} from the YAML override to keep the task's "
        "own. Nothing was generated")
