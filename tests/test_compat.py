"""Which lm-eval the plugin runs on: pip's range in pyproject, and at run time the internals it needs.

Marked ``e2e_versions``: CI runs this file on every tested lm-eval (0.4.12, 0.4.13, 0.5.0.dev1).
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from lm_eval_mathjudge import compat
from tests.conftest import REPO

pytestmark = pytest.mark.e2e_versions

# (version, admitted by pip's requirement (as pip judges an installed version), why)
VERSIONS = [
    ("0.4.11", False, "older than the first tested release"),
    ("0.4.12", True, "tested"),
    ("0.4.13", True, "tested (the default)"),
    ("0.4.13.post2", True, "a post release of a tested version"),
    ("0.4.14", True, "the next bug-fix release: allowed, checked for its internals at run time"),
    ("0.4.14.1", True, "and its own fixes"),
    ("0.5.0.dev1", True, "the tested pre-release, kept when installed"),
    ("0.5.0", True, "the next release line"),
    ("0.5.3", True, "its bug-fix releases"),
    ("0.6.0", False, "the release line after: not promised"),
    ("1.0", False, "a future major version"),
]


def _pyproject_requirement() -> str:
    text = (REPO / "pyproject.toml").read_text()
    return re.search(r'^\s*"(lm-eval[^"\[]*)"', text, re.M).group(1)


def test_pyproject_declares_the_requirement_compat_documents():
    assert _pyproject_requirement() == compat.PIP_REQUIREMENT


@pytest.mark.parametrize("version, pip, why", VERSIONS, ids=[v[0] for v in VERSIONS])
def test_pip_range(version, pip, why):
    specifier = SpecifierSet(compat.PIP_REQUIREMENT.removeprefix("lm-eval"))
    assert specifier.contains(version, prereleases=True) is pip, why


def test_a_fresh_install_picks_the_stable_release_and_keeps_an_installed_prerelease():
    specifier = SpecifierSet(compat.PIP_REQUIREMENT.removeprefix("lm-eval"))
    on_the_index = ["0.4.11", "0.4.12", "0.4.13.dev0", "0.4.13", "0.5.0.dev1"]  # as the index lists them
    assert max(specifier.filter(on_the_index), key=Version) == "0.4.13"  # no --pre: the stable release
    assert max(specifier.filter(on_the_index, prereleases=True), key=Version) == "0.5.0.dev1"  # --pre
    assert max(specifier.filter([*on_the_index, "0.4.14"]), key=Version) == "0.4.14"  # a new fix release


def test_the_installed_lm_eval_has_what_the_plugin_needs_and_gets_its_task_base():
    assert compat.missing() == []
    assert compat.require_supported() == compat.installed_version()
    if compat.has_scorers():
        from lm_eval.api.task import GenerateTask as expected
    else:
        from lm_eval.api.task import ConfigurableTask as expected
    assert issubclass(compat.TaskBase, expected)
    assert compat.has_scorers() is (Version(compat.installed_version()).release[:2] >= (0, 5))


# Take an internal away from the installed lm-eval, then use the plugin as lm-eval would.
_WITHOUT = """
import {module} as m
delattr(m, {name!r})
"""

_BUILD_TASK = """
import lm_eval_mathjudge._startup as s; s.install()
import lm_eval_mathjudge  # importing the package never checks lm-eval
from lm_eval.tasks import TaskManager
manager = TaskManager()
assert "gsm8k_gpt4em" in manager.all_tasks  # discovery itself still works
try:
    manager.load_task_or_group(["gsm8k_gpt4em"])
except Exception as exc:
    print("TASK", type(exc).__name__, exc)
from lm_eval.api.registry import get_model
try:
    get_model("mathjudge-replay")(path="x.jsonl")
except Exception as exc:
    print("MODEL", type(exc).__name__, exc)
"""


@pytest.mark.e2e
@pytest.mark.parametrize("module, name", [("lm_eval.api.model", "hash_args"), ("lm_eval.utils", "make_table")])
def test_an_lm_eval_without_a_needed_internal_fails_at_task_build_and_model_creation(tmp_path, module, name):
    code = _WITHOUT.format(module=module, name=name) + _BUILD_TASK
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = {line.split(" ", 1)[0]: line for line in proc.stdout.splitlines()}
    for where in ("TASK", "MODEL"):
        assert where in lines, proc.stdout + proc.stderr[-2000:]
        assert "UnsupportedLmEvalError" in lines[where] and f"lacks {module}.{name}" in lines[where]
        assert "tested on lm-eval 0.4.12, 0.4.13 and 0.5.0.dev1" in lines[where]


# Which tasks are judged as their generations arrive: only those whose every filter reads one response.
FILTER_CASES = [
    ([("none", [["take_first", None]])], True),
    ([("strict", [["regex", {"regex_pattern": r"#### (\-?[0-9\.\,]+)"}], ["take_first", None]]),
      ("flexible", [["regex", {"regex_pattern": r"(-?[$0-9.,]{2,})|(-?[0-9]+)", "group_select": -1}],
                    ["take_first", None]])], True),
    ([("clean", [["remove_whitespace", None], ["lowercase", None], ["take_first", None]])], True),
    ([("maj", [["majority_vote", None], ["take_first", None]])], True),
    ([("mine", [["custom", {"filter_fn": lambda resps, docs: resps}], ["take_first", None]])], False),
    ([("none", [["take_first", None]]), ("mine", [["custom", {"filter_fn": lambda resps, docs: resps}]])], False),
    ([], False),
]


@pytest.mark.parametrize("pipelines, streams", FILTER_CASES)
def test_only_filters_that_read_one_response_at_a_time_let_a_task_stream(pipelines, streams):
    from lm_eval.filters import build_filter_ensemble

    ensembles = [build_filter_ensemble(name, steps) for name, steps in pipelines]
    assert compat.per_response(ensembles) is streams


def test_one_response_filtered_alone_gives_what_the_whole_pipeline_gives():
    from types import SimpleNamespace

    from lm_eval.filters import build_filter_ensemble

    ensembles = [build_filter_ensemble("strict", [["regex", {"regex_pattern": r"#### (\-?[0-9\.\,]+)"}],
                                                  ["take_first", None]])]
    task = SimpleNamespace(_filters=ensembles, _scorers=[SimpleNamespace(filter=e) for e in ensembles])
    assert compat.filter_ensembles(task) == ensembles  # what the run takes of the task (0.4: _filters; 0.5: scorers)
    responses = ["so the answer is\n#### 42", "no number here", "#### 7 and #### 8"]
    instances = [SimpleNamespace(resps=[r], doc={}, filtered_resps={}) for r in responses]
    for ensemble in ensembles:
        ensemble.apply(instances)  # lm-eval's way: the whole task at once
    assert [compat.filter_one(ensembles, [r], {}) for r in responses] == [i.filtered_resps for i in instances]
    assert "42" in str(instances[0].filtered_resps["strict"])
