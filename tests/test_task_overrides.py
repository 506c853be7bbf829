"""A task YAML that includes one of ours and overrides its keys ends, when lm-eval builds the task, in
one ConfigError that names what to fix, or runs; never in a traceback from Jinja, lm-eval or our code.

Each case is the real ``gsm8k_gpt4em`` config as lm-eval's YAML loader reads it, one key overridden
the way a user's ``include:`` YAML would, built by the real task class (lm-eval's ``ConfigurableTask``
underneath) on the shipped data slice, requests included (that is before any generation). Through the
CLI: ``test_input_errors_e2e.py``.
"""

from __future__ import annotations

import copy
import os

import pytest

from lm_eval_mathjudge._startup import tasks_dir
from lm_eval_mathjudge.core.errors import ConfigError
from tests.conftest import REPO
from tests.inprocess import reset_plugin_state


@pytest.fixture(scope="module")
def base():
    from lm_eval.tasks._yaml_loader import load_yaml

    config = load_yaml(os.path.join(tasks_dir(), "gsm8k_gpt4em.yaml"))
    config.pop("class", None)
    config["metadata"] = {**config.get("metadata", {}), "judge_backend": "local"}
    return config


@pytest.fixture(autouse=True)
def local_data(monkeypatch, tmp_path):
    monkeypatch.setenv("MATHJUDGE_DATA_DIR", str(REPO / "examples" / "data"))
    monkeypatch.setenv("MATHJUDGE_CACHE_DIR", str(tmp_path / "cache"))
    yield
    reset_plugin_state()  # the tasks built here registered with the run's pass, as a run's would


def _build(config: dict) -> None:
    from lm_eval_mathjudge.harness.task import JudgedTask

    task = JudgedTask(config=config)
    try:
        task.build_all_requests(limit=3, rank=0, world_size=1)
    finally:
        if task._entry is not None:  # the judge the run opened for the task (harness/entry.py)
            task._entry.close()


CASES = [  # (key, value, what the message must say; None: the task builds)
    ("mathjudge", "exact_match", "the mathjudge block is 'exact_match'; it must be a mapping"),
    ("mathjudge", [1, 2], "the mathjudge block is [1, 2]; it must be a mapping"),
    ("mathjudge", {"judge": "exact_match", "setings": {"model": "x"}}, "has no key 'setings' (did you mean settings?)"),
    ("mathjudge", {"judge": ["exact_match"]}, "judge must be a name and settings a mapping"),
    ("mathjudge", {"judge": "exact_match", "settings": ["model"]}, "judge must be a name and settings a mapping"),
    ("mathjudge", {"judge": "exact_matc"}, "unknown judge 'exact_matc'"),
    ("mathjudge_dataset", ["gsm8k"], "mathjudge_dataset is ['gsm8k']; it must be the name of a data set (gsm8k, math500"),
    ("metadata", [1, 2], "metadata is [1, 2]; it must be a mapping"),
    ("doc_to_target", "{{answr}}", "doc_to_target '{{answr}}' cannot be rendered for doc 0 (UndefinedError"),
    ("doc_to_target", "{% if %}", "doc_to_target '{% if %}' cannot be rendered for doc 0 (TemplateSyntaxError"),
    ("doc_to_text", "Problem: {{ question ", "doc_to_text 'Problem: {{ question ' cannot be rendered for doc 0"),
    ("doc_to_text", 5, "lm-eval cannot build this task's requests (AssertionError"),
    ("metric_list", ["gpt4_exact_match"], "lm-eval cannot build this task from its YAML (ValueError: \"'metric' key"),
    ("filter_list", [1], "lm-eval cannot build this task from its YAML (TypeError"),
    ("process_docs", "lm_eval_mathjudge.core.docs.gsm8k", "lm-eval cannot build this task from its YAML (TypeError"),
    ("num_fewshot", "zero", "lm-eval cannot build this task from its YAML (TypeError"),
    ("generation_kwargs", "greedy", "lm-eval cannot build this task from its YAML (TypeError"),
    ("doc_to_target", "{{ mj_answer }}", None),
    ("doc_to_text", "Q: {{ mj_question }}\nA:", None),
]


@pytest.mark.parametrize("key, value, message", CASES, ids=[f"{c[0]}={c[1]!r}"[:60] for c in CASES])
def test_an_override_of_our_task_builds_or_says_what_to_fix(base, key, value, message):
    config = copy.deepcopy(base)
    config[key] = value
    if message is None:
        _build(config)
        return
    with pytest.raises(ConfigError) as raised:
        _build(config)
    assert message in str(raised.value) and len(str(raised.value)) < 1200
