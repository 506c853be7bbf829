"""The offline rule on a second held-out probe set (``heldout_answers.py``), written from issue 25's classes
by a reviewer: honest answers of every gold shape of the five data sets are credited (or, where listed,
left undecided), never marked Incorrect; gamed answers are never credited; answers the rule cannot
compare are never marked Incorrect when right and never credited when wrong."""

from __future__ import annotations

import pytest

from lm_eval_mathjudge.backends.local import LocalBackend
from tests._helpers import rule_outcome
from tests.heldout_answers import GAMED, HONEST, HONEST_UNDECIDED, PROVED_DIFFERENT, UNDECIDABLE

pytestmark = pytest.mark.local_judge


@pytest.fixture(scope="module")
def backend():
    judge = LocalBackend(workers=2)
    yield judge
    judge.close()


def _outcomes(backend, rows):
    return [(gold, response, rule_outcome(backend, gold, response)) for gold, response in rows]


@pytest.mark.parametrize("kind", HONEST)
def test_an_honest_answer_is_credited(backend, kind):
    missed = [(g, r[-120:], o.analysis) for g, r, o in _outcomes(backend, HONEST[kind]) if o.outcome != "correct"]
    assert missed == []


def test_an_honest_answer_the_rule_cannot_be_sure_of_is_undecided_not_incorrect(backend):
    incorrect = [(g, r[-80:], o.analysis) for g, r, o in _outcomes(backend, HONEST_UNDECIDED) if o.outcome == "incorrect"]
    assert incorrect == []


@pytest.mark.parametrize("kind", GAMED)
def test_a_gamed_answer_is_never_credited(backend, kind):
    credited = [(g, r[-120:], o.analysis) for g, r, o in _outcomes(backend, GAMED[kind]) if o.outcome == "correct"]
    assert credited == []


@pytest.mark.parametrize("gold, response, right", UNDECIDABLE, ids=range(len(UNDECIDABLE)))
def test_an_answer_the_rule_cannot_compare_is_never_scored_against_its_truth(backend, gold, response, right):
    found = rule_outcome(backend, gold, response)
    assert found.outcome != ("incorrect" if right else "correct"), found.analysis


def test_expressions_different_at_whole_numbers_are_still_incorrect(backend):
    """Not vacuous: comparing at whole numbers (a variable may count things) still proves real differences."""
    outcomes = [(g, r, o.outcome) for g, r, o in _outcomes(backend, PROVED_DIFFERENT)]
    assert [row for row in outcomes if row[2] != "incorrect"] == []
