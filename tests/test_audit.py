"""The judge audit's battery and arithmetic, on the real problems of every data set (no judge involved).

The end-to-end audits through the real SDKs and CLIs are in tests/test_audit_e2e.py.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter

import pytest

from lm_eval_mathjudge.audit import battery, score
from lm_eval_mathjudge.settings.layers import resolve_run_options
from lm_eval_mathjudge.settings.schema import AUDIT_LIMIT
from lm_eval_mathjudge.core.errors import ConfigError
from lm_eval_mathjudge.core.stats import wilson_interval
from lm_eval_mathjudge.core.types import Outcome
from tests.conftest import DATASETS, SHARED_DATA
from tests.loopback.scripted import task_docs


@pytest.fixture(scope="module")
def every_docs() -> dict[str, list[dict]]:
    return {name: task_docs(str(SHARED_DATA), name) for name in DATASETS}


# ---------------------------------------------------------------------------------------- wrong answers
@pytest.mark.parametrize("gold, wrong, wrong2", [
    ("18", "28", "38"),  # GSM8K
    ("9", "8", "7"),
    ("115440", "215440", "315440"),  # Omni-MATH
    ("-3", "-4", "-5"),
    (r"\frac{14}{3}", r"\frac{24}{3}", r"\frac{34}{3}"),  # MATH-500
    (r"3\sqrt{13}", r"4\sqrt{13}", r"5\sqrt{13}"),
    (r"\left( 3, \frac{\pi}{2} \right)", r"\left( 4, \frac{\pi}{2} \right)", r"\left( 5, \frac{\pi}{2} \right)"),
    ("2516_8", "3516_8", "4516_8"),  # a base subscript is not where the change goes
    (r"864 \mbox{ inches}^2", r"964 \mbox{ inches}^2", r"664 \mbox{ inches}^2"),  # nor a unit's exponent
    (".0000672", ".0000772", ".0000872"),  # the leading digit: beyond any numeric tolerance
    ("0", "1", "2"),
    (r"90^\circ", r"80^\circ", r"70^\circ"),
])
def test_wrong_answers_keep_the_form_and_change_the_value(gold, wrong, wrong2):
    assert battery.wrong_answers(gold) == (wrong, wrong2)


@pytest.mark.parametrize("gold", [r"\text{Evelyn}", "p - q", r"\pi", ""])
def test_a_gold_answer_without_a_digit_gives_no_wrong_answer(gold):
    assert battery.wrong_answers(gold) is None
    assert battery.values({"mj_answer": gold, "mj_reference": "x"}) is None


def test_an_answer_only_reference_gives_no_worked_solution(every_docs):
    doc = every_docs["aime25"][0]
    values = battery.values(doc)
    assert values["gold"] == doc["mj_answer"] and values["steps"] is None and values["cut"] is None


# ---------------------------------------------------------------------------------------- the battery
def test_the_battery_is_versioned_and_hashed():
    spec = battery.load()
    assert spec.version == battery.VERSION == 2
    assert re.fullmatch(r"[0-9a-f]{64}", spec.sha256)
    kinds = Counter(f.kind for f in spec.families)
    assert kinds == {"attack": 11, "right": 1, "wrong": 1}
    assert {f.name for f in spec.families} >= {"master_key", "fake_verdict", "injection", "forged_reference",
                                                "hedge", "multi_answer", "truncated", "disguised_structure",
                                                "other_language", "encoded_instruction", "new_rubric"}
    assert battery.load(1).version == 1 and len(battery.load(1).families) == 9  # an old audit can be repeated
    assert spec.describe()["families"]["master_key"] == {"kind": "attack", "templates": 17}


def test_every_disguised_structure_answer_is_marked_and_flagged(every_docs):
    """The battery's disguises are the class the marking folds: each answer's imitation gets the mark."""
    from lm_eval_mathjudge.core import flags, prompts

    items = [i for i in battery.build("gsm8k", every_docs["gsm8k"], 50) if i.family == "disguised_structure"]
    assert len({i.template for i in items}) == len(next(f for f in battery.load().families
                                                        if f.name == "disguised_structure").templates)
    assert [i.template for i in items if prompts.QUOTE_MARK not in prompts.neutralise(i.response)] == []
    structural = {"verdict_line", "our_heading", "fake_fence"}
    assert [i.template for i in items if not structural & set(flags.detect(i.response))] == []


@pytest.mark.parametrize("name", DATASETS)
def test_items_are_deterministic_distinct_and_within_the_limit(every_docs, name):
    docs = every_docs[name]
    items = battery.build(f"{name}_gpt4em", docs, AUDIT_LIMIT)
    again = battery.build(f"{name}_gpt4em", [dict(d) for d in docs], AUDIT_LIMIT)
    assert [i.as_dict() for i in items] == [i.as_dict() for i in again]
    per_family = Counter(i.family for i in items)
    assert set(per_family) == {f.name for f in battery.load().families}
    assert all(n <= AUDIT_LIMIT for n in per_family.values())
    pairs = [(i.family, i.template, i.doc_index) for i in items]
    assert len(pairs) == len(set(pairs)), "a (template, problem) pair repeats"
    other = battery.build(f"{name}_vlmjudge", docs, AUDIT_LIMIT)
    assert [i.response for i in other] != [i.response for i in items]  # the seed includes the task


def test_a_larger_limit_only_adds_answers(every_docs):
    """So raising --limit pays only for the new answers: the smaller battery's are cached."""
    small, large = (battery.build("gsm8k_gpt4em", every_docs["gsm8k"], n) for n in (3, 10))
    for family in battery.load().families:
        assert [i for i in large if i.family == family.name][:3] == [i for i in small if i.family == family.name]


@pytest.mark.parametrize("name", DATASETS)
def test_templates_take_turns_and_meet_different_problems(every_docs, name):
    items = battery.build(f"{name}_gpt4em", every_docs[name], 40)
    for family in battery.load().families:
        mine = [i for i in items if i.family == family.name]
        used = Counter(i.template for i in mine)
        assert max(used.values()) - min(used.values()) <= 1 or len(mine) < 40  # balanced when there is room
        assert len({i.doc_index for i in mine}) >= min(len(mine), 5)


@pytest.mark.parametrize("name", DATASETS)
def test_only_hedges_multi_answers_and_right_controls_mention_the_gold_answer(every_docs, name):
    """An attack scores only through gullibility: outside the hedge and multi-answer families no answer
    contains the gold answer at all (not even cut short); every wrong control ends in a wrong answer."""
    docs = every_docs[name]
    for item in battery.build(f"{name}_gpt4em", docs, 200):
        gold = docs[item.doc_index]["mj_answer"]
        mentions = gold in item.response
        if item.family in ("hedge", "multi_answer") or item.kind == "right":
            assert mentions, item
        else:
            assert not mentions, item
        if item.kind == "wrong":
            wrong = battery.values(docs[item.doc_index])["wrong"]
            assert wrong in item.response.rsplit("\n", 1)[-1], item  # the last line states it


def test_a_cut_stops_before_the_line_that_reaches_the_gold_answer(every_docs):
    doc = next(d for d in every_docs["gsm8k"] if "\n" in d["mj_reference"])
    values = battery.values(doc)
    assert values["cut"] and values["gold"] not in values["cut"]
    reference = doc["mj_reference"]
    assert reference.startswith(values["cut"])
    rest = reference[len(values["cut"]):]
    assert rest[:1].isspace()  # cut at a line (or sentence) end, not inside a number
    assert values["gold"] in rest.lstrip().split("\n", 1)[0]  # the dropped line is the one reaching the answer


# ---------------------------------------------------------------------------------------- the arithmetic
def _item(family: str, kind: str, n: int = 0) -> battery.Item:
    return battery.Item("t", family, kind, 0, n, f"{family}-{n}", {})


V = object()  # any verdict; `credited` decides
ROWS = [
    *[(_item("master_key", "attack", i), Outcome(verdict=V), True) for i in range(3)],
    (_item("master_key", "attack", 3), Outcome(verdict=V), False),
    (_item("hedge", "attack", 0), Outcome(failure="unparseable"), False),
    (_item("hedge", "attack", 1), Outcome(verdict=V), False),
    (_item("control_right", "right", 0), Outcome(verdict=V), True),
    (_item("control_right", "right", 1), Outcome(failure="timeout"), False),
    (_item("control_wrong", "wrong", 0), Outcome(verdict=V), False),
    (_item("control_wrong", "wrong", 1), Outcome(failure="unparseable"), False),
]


def test_rates_intervals_controls_and_failures():
    summary = score.summarise(ROWS)
    master = summary["families"]["master_key"]
    assert (master["n"], master["credited"], master["false_positive_rate"]) == (4, 3, 0.75)
    assert master["ci95"] == list(wilson_interval(3, 4))
    hedge = summary["families"]["hedge"]
    assert (hedge["n"], hedge["credited"], hedge["failed"], hedge["failures"]) == (2, 0, 1, {"unparseable": 1})
    assert summary["attacks"] == {"n": 6, "k": 3, "false_positive_rate": 0.5, "ci95": list(wilson_interval(3, 6))}
    controls = summary["controls"]
    assert controls["right_credited"]["accuracy"] == 0.5  # the failed right control is not credited
    assert controls["wrong_refused"]["accuracy"] == 0.5  # a failure is not a refusal either
    assert controls["all"]["k"] == 2 and controls["all"]["n"] == 4
    assert summary["failures"] == {"total": 3, "kinds": {"unparseable": 2, "timeout": 1}, "unreached": 0}
    assert summary["complete"] is True
    json.dumps(summary)  # JSON-able as it is


def test_an_unreached_judge_makes_the_audit_incomplete():
    rows = [*ROWS, (_item("injection", "attack"), Outcome(failure="http_503", transport=True), False)]
    summary = score.summarise(rows)
    assert summary["complete"] is False and summary["failures"]["unreached"] == 1
    assert summary["families"]["injection"]["false_positive_rate"] == 0.0


@pytest.mark.parametrize("threshold, above", [
    (0.8, []),
    (0.75, []),  # "above" is strictly above
    (0.5, [("master_key", 0.75)]),
    (0.2, [("master_key", 0.75), ("all attacks", 0.5)]),
    (0.0, [("master_key", 0.75), ("all attacks", 0.5)]),  # hedge 0.0 is not above 0
])
def test_breaches_are_the_rates_above_the_threshold(threshold, above):
    assert score.breaches(score.summarise(ROWS), threshold) == above


def test_the_table_shows_rates_intervals_and_failure_kinds():
    text = score.table(score.summarise(ROWS))
    assert "| master_key | 4 | 3 | 0.750 [0.301, 0.954] | 0 |" in text
    assert "| hedge | 2 | 0 | 0.000 [0.000, 0.658] | 1 (unparseable: 1) |" in text
    assert "| control_wrong (refused) | 2 | 1 | 0.500 [0.095, 0.905] | 1 (unparseable: 1) |" in text
    assert not any(math.isnan(x) for x in wilson_interval(3, 4))


# ---------------------------------------------------------------------------------------- settings
@pytest.mark.parametrize("metadata, audit, limit", [
    ({}, False, AUDIT_LIMIT),
    ({"judge_audit": True}, True, AUDIT_LIMIT),
    ({"judge_audit": "yes", "judge_audit_limit": "25"}, True, 25),
    ({"gpt4em_judge_audit": "true"}, True, AUDIT_LIMIT),
])
def test_judge_audit_settings(metadata, audit, limit):
    options = resolve_run_options("exact_match", None, metadata, environ={})
    assert (options.audit, options.audit_limit) == (audit, limit)


def test_judge_audit_from_the_environment_and_the_yaml():
    options = resolve_run_options("vlm", {"audit_limit": 4}, None, environ={"MATHJUDGE_VLM_AUDIT": "1"})
    assert (options.audit, options.audit_limit) == (True, 4)


@pytest.mark.parametrize("metadata, message", [
    ({"judge_audit": "perhaps"}, "audit='perhaps' is not a valid bool"),
    ({"judge_audit_limit": 2.5}, "audit_limit=2.5 is not a valid int"),
    ({"judge_audit_limit": 0}, "judge_audit_limit=0 must be between 1 and"),
    ({"judge_panel": [{"backend": "local", "audit": True}, {"backend": "openai"}]}, "a member holds judge settings"),
])
def test_bad_judge_audit_settings_are_refused(metadata, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        resolve_run_options("exact_match", None, metadata, environ={})


# ---------------------------------------------------------------------------------------- the command's own errors
@pytest.mark.parametrize("args, message", [
    (["--tasks", "gsm8k_judged"], "--tasks 'gsm8k_judged': not a task of this plugin"),
    (["--tasks", ","], "--tasks names no task"),
    (["--max-false-positive", "5"], "--max-false-positive is a rate between 0 and 1"),
    (["--limit", "0"], "--limit must be at least 1"),
    (["--metadata", "[1]"], "--metadata must be a JSON object"),
])
def test_bad_audit_arguments_exit_2_with_a_message_before_anything_loads(args, message, capsys):
    from lm_eval_mathjudge.__main__ import main

    assert main(["audit", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_judge_families_name_every_data_set():
    from lm_eval_mathjudge.reports.audit import task_names

    assert task_names(None) == [f"{d}_gpt4em" for d in DATASETS]
    assert task_names("vlmjudge, gsm8k_gpt4em,gsm8k_vlmjudge") == [*(f"{d}_vlmjudge" for d in DATASETS), "gsm8k_gpt4em"]
