"""A task YAML of ours, or one that includes ours and overrides some keys: checked as the task is built,
before generation, and said in one clear message, never a traceback.

Our own keys (``mathjudge:``, ``mathjudge_dataset:``, the metadata) are checked for their shape, and a
misspelt key of the ``mathjudge:`` block gets "did you mean". Templates: lm-eval renders ``doc_to_text``
and ``doc_to_target`` (Jinja templates, a column name or a ``!function``) on the first doc when it
builds the task, ``doc_to_text`` on every doc when it builds the requests, and ``doc_to_target`` on
every doc only when it writes the samples, after the judge was paid. An override that names a column
the docs do not have (``{{answr}}``), or that fails on some docs, is found at the first two moments
and the third is tried on every doc before anything is generated; the error names the task, the
field, the doc and the columns there are. Anything else lm-eval cannot build (a ``metric_list`` entry
without ``metric``, a ``filter_list`` of the wrong shape) is said with lm-eval's own reason
(``unbuildable``).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..core.data_sets import YAML_KEY, names
from ..core.errors import ConfigError, did_you_mean
from ..core.jsontext import shown
from ..core.redact import redact

FIELDS = ("doc_to_text", "doc_to_target", "doc_to_choice")
OURS = "mj_question, mj_answer and mj_reference"
BLOCK_KEYS = ("judge", "settings")  # the keys of a task's mathjudge: block
BLOCK_EXAMPLE = "mathjudge: {judge: exact_match, settings: {model: gpt-4o-2024-08-06}}"


def our_keys(config: dict) -> dict:
    """Take the ``mathjudge:`` block out of a task's ``config`` (lm-eval must not see it), checked with its
    settings; check ``mathjudge_dataset`` (``data_sets.task_config`` takes it out) and the metadata's shape."""
    task = config.get("task")
    block = config.pop("mathjudge", None) or {}
    dataset = config.get(YAML_KEY)
    if not isinstance(block, Mapping):
        raise ConfigError(f"task {task}: the mathjudge block is {shown(block)}; it must be a mapping, e.g. "
                          f"{BLOCK_EXAMPLE}")
    for key in block:
        if key not in BLOCK_KEYS:
            hint = did_you_mean(key, BLOCK_KEYS)
            raise ConfigError(f"task {task}: the mathjudge block has no key {shown(key)}{hint}; it takes "
                              f"{' and '.join(BLOCK_KEYS)}, e.g. {BLOCK_EXAMPLE}")
    if not isinstance(block.get("judge", ""), str) or not isinstance(block.get("settings") or {}, Mapping):
        raise ConfigError(f"task {task}: in the mathjudge block, judge must be a name and settings a mapping "
                          f"of judge settings, e.g. {BLOCK_EXAMPLE}")
    if dataset is not None and not isinstance(dataset, str):
        raise ConfigError(f"task {task}: mathjudge_dataset is {shown(dataset)}; it must be the name of a data set "
                          f"({', '.join(names())})")
    if not isinstance(config.get("metadata") or {}, Mapping):
        raise ConfigError(f"task {task}: metadata is {shown(config.get('metadata'))}; it must be a mapping of keys to "
                          "values")
    return dict(block)


def unbuildable(name: str | None, exc: Exception, requests: bool = False) -> ConfigError:
    """What lm-eval could not build for task ``name`` (the task from its YAML, or its ``requests``), in one
    message with lm-eval's own reason."""
    what, also = (("this task's requests", "; and the options that shape prompts (--apply_chat_template, "
                   "--system_instruction, --fewshot_as_multiturn)") if requests else ("this task from its YAML", ""))
    reason = f"{type(exc).__name__}: {shown(redact(str(exc)), 300)}"
    return ConfigError(f"task {name}: lm-eval cannot build {what} ({reason}); "
                       "check what the task YAML, or a YAML that includes it, sets (lm-eval's task keys: "
                       f"doc_to_text, metric_list, filter_list, process_docs, num_fewshot, ...){also}. Nothing was "
                       "generated")


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
