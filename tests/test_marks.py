"""The e2e guard (tests/marks.py): a test not marked e2e that runs lm_eval or starts a process fails."""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests import marks
from tests.inprocess import run_cli

Failed = pytest.fail.Exception  # what the guard fails the phase of a test with


def _unmarked(nodeid: str = "tests/x.py::test_y", *marks_: str):
    return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: name in marks_ or None)


def _fork_and_exit() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


STARTS = {
    "subprocess": lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
    "os.system": lambda: os.system("true"),
    "os.fork": _fork_and_exit,
    "os.posix_spawn": lambda: os.waitpid(os.posix_spawn(sys.executable, [sys.executable, "-c", "pass"], {}), 0),
    "multiprocessing": lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
    "multiprocessing helper": lambda: multiprocessing.util.spawnv_passfds(sys.executable, [sys.executable, "-c", ""], ()),
    "lm_eval in process": lambda: run_cli("lm_eval", ["--help"], dict(os.environ)),
}


@pytest.mark.parametrize("start", STARTS.values(), ids=STARTS.keys())
def test_an_unmarked_test_may_not_start_a_process_or_run_the_cli(start):
    with pytest.raises(Failed, match="tests/x.py::test_y .*: mark this test e2e"):
        with marks.armed(_unmarked()):
            start()


def test_swallowing_the_failure_does_not_hide_it():
    def swallowed():
        try:
            subprocess.run(["true"])
        except BaseException:  # noqa: BLE001 - what careless code under test might do
            pass

    with pytest.raises(Failed, match=r"starts a process \(subprocess.Popen true\): mark this test e2e"):
        with marks.armed(_unmarked()):
            swallowed()


def test_lm_evals_simple_evaluate_is_guarded():
    from lm_eval import evaluator

    with pytest.raises(Failed, match="runs lm-eval's simple_evaluate: mark this test e2e"):
        with marks.armed(_unmarked()):
            evaluator.simple_evaluate(model="hf", tasks=[])


def test_this_test_is_armed_and_a_marked_one_is_not(request):
    assert marks._armed == [(request.node.nodeid, False)]
    with marks.armed(_unmarked("t", "e2e")):
        assert marks._armed == [(request.node.nodeid, False)]  # untouched: a marked test runs unguarded


@pytest.mark.local_judge
def test_a_local_judge_test_may_start_the_judges_workers_and_nothing_else():
    from lm_eval_mathjudge.backends.local import LocalBackend
    from lm_eval_mathjudge.core.parsing import parse_exact_match
    from lm_eval_mathjudge.core.types import JudgeRequest

    judge = LocalBackend(workers=1)
    try:
        reply = judge.complete(JudgeRequest(prompt="", fields={"answer": "18", "response": "\\boxed{18}"}))
    finally:
        judge.close()
    assert parse_exact_match(reply.text).correct is True
    with pytest.raises(Failed, match=r"starts a process \(subprocess.Popen true\): mark this test e2e"):
        with marks.armed(_unmarked("tests/x.py::test_y", "local_judge")):
            subprocess.run(["true"])


@pytest.mark.e2e
def test_a_marked_test_may_start_a_process():
    assert marks._armed == []
    assert subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True).stdout == "42\n"
