"""The offline rule on a held-out probe set (``probe_answers.py``): honest answers in every notation of the
five data sets' gold shapes are credited and never marked Incorrect, gamed answers are never credited,
and answers the rule cannot compare are undecided, never Incorrect."""

from __future__ import annotations

import pytest

from lm_eval_mathjudge.backends.local import LocalBackend
from tests._helpers import rule_outcome
from tests.probe_answers import GAMED, HONEST, UNDECIDABLE

pytestmark = pytest.mark.local_judge


@pytest.fixture(scope="module")
def backend():
    judge = LocalBackend(workers=2)
    yield judge
    judge.close()


@pytest.mark.parametrize("kind", HONEST)
def test_an_honest_answer_is_credited(backend, kind):
    for gold, response in HONEST[kind]:
        found = rule_outcome(backend, gold, response)
        assert found.outcome == "correct", (gold, response, found.analysis)


@pytest.mark.parametrize("kind", GAMED)
def test_a_gamed_answer_is_never_credited(backend, kind):
    for gold, response in GAMED[kind]:
        found = rule_outcome(backend, gold, response)
        assert found.outcome != "correct", (gold, response, found.analysis)


@pytest.mark.parametrize("gold, response", UNDECIDABLE)
def test_an_answer_the_rule_cannot_compare_is_undecided(backend, gold, response):
    found = rule_outcome(backend, gold, response)
    assert found.outcome == "undecided", found.analysis


@pytest.mark.parametrize("kind", ["two-finals", "format-example"])
def test_two_committed_finals_are_incorrect_not_undecided(backend, kind):
    """Incorrect where the rule is sure: the response commits to two final answers proved different."""
    outcomes = {rule_outcome(backend, gold, response).outcome for gold, response in GAMED[kind]
                if "or else" not in response}
    assert outcomes == {"incorrect"}
