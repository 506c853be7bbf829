"""The supported lm-eval range: one rule at run time, the same range in pyproject, clear refusals.

Marked ``e2e_versions``: CI runs this file on every supported lm-eval, so the
installed-version checks below see 0.4.12, 0.4.13 and 0.5.0.dev1 in turn.
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

# (version, supported at run time, admitted by pip's requirement, why)
VERSIONS = [
    ("0.4.11", False, False, "older than the first tested release"),
    ("0.4.12", True, True, "tested"),
    ("0.4.12.post1", True, True, "a post release of a tested version"),
    ("0.4.13.dev0", False, False, "the development snapshot before 0.4.13, on the index"),
    ("0.4.13", True, True, "tested (the default)"),
    ("0.4.13.post2", True, True, "a post release of a tested version"),
    ("0.4.14", False, False, "the next 0.4 release is untested: excluded at install too"),
    ("0.4.14.1", False, False, "excluded at install with the rest of 0.4.14"),
    ("0.4.15", False, True, "PEP 440 cannot exclude every later 0.4.x: refused at run time"),
    ("0.5.0.dev0", False, False, "an untested pre-release"),
    ("0.5.0.dev1", True, True, "tested pre-release"),
    ("0.5.0.dev1+local.3", True, True, "a local build of the tested pre-release"),
    ("0.5.0.dev2", False, True, "untested pre-release: pip takes it only with --pre; refused at run time"),
    ("0.5.0rc1", False, True, "the same for release candidates"),
    ("0.5.0", False, False, "the 0.5 release is untested"),
    ("0.5.0.post1", False, False, "nor its post releases"),
    ("1.0", False, False, "a future major version"),
]


def _pyproject_requirement() -> str:
    text = (REPO / "pyproject.toml").read_text()
    return re.search(r'^\s*"(lm-eval[^"\[]*)"', text, re.M).group(1)


def test_pyproject_declares_the_requirement_compat_documents():
    assert _pyproject_requirement() == compat.PIP_REQUIREMENT


@pytest.mark.parametrize("version, runtime, pip, why", VERSIONS, ids=[v[0] for v in VERSIONS])
def test_runtime_rule_and_pip_range(version, runtime, pip, why):
    specifier = SpecifierSet(compat.PIP_REQUIREMENT.removeprefix("lm-eval"))
    assert compat.supported(version) is runtime, why
    # prereleases=True: how pip judges an installed version (it keeps an installed 0.5.0.dev1).
    assert specifier.contains(version, prereleases=True) is pip, why


def test_a_fresh_install_picks_the_stable_release_and_keeps_an_installed_prerelease():
    specifier = SpecifierSet(compat.PIP_REQUIREMENT.removeprefix("lm-eval"))
    on_the_index = ["0.4.11", "0.4.12", "0.4.13.dev0", "0.4.13", "0.5.0.dev1"]  # as the index lists them
    assert max(specifier.filter(on_the_index), key=Version) == "0.4.13"  # no --pre: the stable release
    assert max(specifier.filter(on_the_index, prereleases=True), key=Version) == "0.5.0.dev1"  # --pre
    # The old pin could not hold an installed 0.5.0.dev1: pip replaced it with 0.4.13.
    assert not SpecifierSet(">=0.4.13,<0.5").contains("0.5.0.dev1", prereleases=True)


@pytest.mark.parametrize("version, shown", [("0.4.11", "lm-eval 0.4.11"), ("0.5.0", "lm-eval 0.5.0"),
                                            ("not-a-version", "lm-eval not-a-version")])
def test_an_unsupported_version_is_refused_naming_the_range(version, shown):
    with pytest.raises(compat.UnsupportedLmEvalError) as caught:
        compat.require_supported(version)
    message = str(caught.value)
    assert "0.4.12, 0.4.13 or 0.5.0.dev1" in message and f"{shown} is installed" in message
    assert "pip install" in message


def test_the_installed_lm_eval_is_supported_and_gets_its_own_task_base():
    version = compat.require_supported()
    assert version == compat.installed_version()
    if Version(version).release[:2] >= (0, 5):
        from lm_eval.api.task import GenerateTask as expected
    else:
        from lm_eval.api.task import ConfigurableTask as expected
    assert issubclass(compat.TaskBase, expected)
    assert compat.is_05() is (expected.__name__ == "GenerateTask")


# Pretend the installed lm-eval is another version, then use the plugin as lm-eval would.
_FAKE_VERSION = """
import importlib.metadata as md
_real = md.version
md.version = lambda name: {fake!r} if name == "lm-eval" else _real(name)
"""

_BUILD_TASK = """
import lm_eval_mathjudge._startup as s; s.install()
import lm_eval_mathjudge  # importing the package never checks the version
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
def test_an_unsupported_lm_eval_fails_at_task_build_and_model_creation_not_at_import(tmp_path):
    code = _FAKE_VERSION.format(fake="0.4.11") + _BUILD_TASK
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = {line.split(" ", 1)[0]: line for line in proc.stdout.splitlines()}
    for where in ("TASK", "MODEL"):
        assert where in lines, proc.stdout + proc.stderr[-2000:]
        assert "UnsupportedLmEvalError" in lines[where] and "0.4.12, 0.4.13 or 0.5.0.dev1" in lines[where]
        assert "lm-eval 0.4.11 is installed" in lines[where]


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
    responses = ["so the answer is\n#### 42", "no number here", "#### 7 and #### 8"]
    instances = [SimpleNamespace(resps=[r], doc={}, filtered_resps={}) for r in responses]
    for ensemble in ensembles:
        ensemble.apply(instances)  # lm-eval's way: the whole task at once
    assert [compat.filter_one(task, [r], {}) for r in responses] == [i.filtered_resps for i in instances]
    assert "42" in str(instances[0].filtered_resps["strict"])
