"""Judge panels and the cascade at their seam: combination rules, agreement statistics, settings."""

from __future__ import annotations

import pytest

from lm_eval_mathjudge.core import stats
from lm_eval_mathjudge.judging import cascade, panel, schedule
from lm_eval_mathjudge.settings.layers import resolve_run_options, resolve_settings
from lm_eval_mathjudge.settings.schema import RunOptions
from lm_eval_mathjudge.core.errors import ConfigError
from lm_eval_mathjudge.core.judges import EXACT_MATCH, VLM
from lm_eval_mathjudge.core.parsing import ExactMatchVerdict, VlmVerdict, parse_exact_match
from lm_eval_mathjudge.core.types import JudgeRequest, Outcome
from tests._helpers import SeamJudge

# Realistic replies, parsed by the real parser.
YES = parse_exact_match("Error Analysis: The student's final answer is 18 and the reference answer is 18.\n"
                        "Final Verdict: Correct")
NO = parse_exact_match("Error Analysis: The student's final answer is 16 and the reference answer is 18.\n"
                       "Final Verdict: Incorrect")


def vlm(final: int, inter: int, action: int) -> VlmVerdict:
    return VlmVerdict(intermediate_correct=inter, final_correct=final, action_reflection=action, explanation="x")


@pytest.mark.parametrize("votes, rule, quorum, correct, failure", [
    ([YES, YES, NO], "majority", 2, True, None),
    ([NO, YES, NO], "majority", 2, False, None),
    ([YES, NO], "majority", 2, None, "panel_tie"),
    ([YES, NO, None], "majority", 2, None, "panel_tie"),  # the missing member does not break the tie
    ([YES, None, None], "majority", 2, None, "panel_quorum"),
    ([YES, None, None], "majority", 1, True, None),
    ([None, None], "majority", 1, None, "panel_quorum"),
    ([YES, YES, NO], "unanimous", 2, False, None),
    ([YES, YES, None], "unanimous", 2, True, None),
    ([YES, NO], "unanimous", 2, False, None),  # unanimity withholds credit instead of tying
    ([YES, None], "unanimous", 2, None, "panel_quorum"),
])
def test_exact_match_combination(votes, rule, quorum, correct, failure):
    verdict, kind, note = panel.combine(votes, rule, quorum)
    assert kind == failure
    if failure:
        assert verdict is None and note
    else:
        assert isinstance(verdict, ExactMatchVerdict) and verdict.correct is correct
        assert verdict.analysis.startswith(f"panel {rule} of {sum(v is not None for v in votes)} verdicts")


@pytest.mark.parametrize("votes, rule, expected, failure", [
    ([vlm(1, 1, 0), vlm(1, 0, 0), vlm(0, 1, 1)], "majority", (1, 1, 0), None),
    ([vlm(1, 1, 0), vlm(1, 0, 0)], "majority", None, "panel_tie"),  # tie on intermediate_correct only
    ([vlm(1, 1, 0), vlm(1, 0, 1)], "unanimous", (1, 0, 0), None),
])
def test_vlm_combination_is_per_field(votes, rule, expected, failure):
    verdict, kind, _ = panel.combine(votes, rule, 2)
    assert kind == failure
    if expected:
        assert (verdict.final_correct, verdict.intermediate_correct, verdict.action_reflection) == expected
        assert VLM.scores(verdict)["final_correct"] == float(expected[0])


def test_vlm_votes_on_its_three_scores_not_the_explanation():
    assert panel.vote_fields(vlm(1, 0, 1)) == ["intermediate_correct", "final_correct", "action_reflection"]
    assert panel.vote_fields(YES) == ["correct"]


def test_kappas_match_hand_computed_and_reference_values():
    # Two raters, 10 items: 4 yes/yes, 2 yes/no, 1 no/yes, 3 no/no. po = .7, pe = .6*.5 + .4*.5 = .5.
    a = [1] * 6 + [0] * 4
    b = [1, 1, 1, 1, 0, 0, 1, 0, 0, 0]
    assert stats.cohen_kappa(list(zip(a, b))).kappa == pytest.approx(0.4)
    sklearn = pytest.importorskip("sklearn.metrics")
    assert stats.cohen_kappa(list(zip(a, b))).kappa == pytest.approx(sklearn.cohen_kappa_score(a, b))
    # Fleiss' kappa, 3 raters x 4 items, by hand: P_i = 1, 1/3, 1/3, 1 -> Pbar = 2/3;
    # 6 of 12 votes are yes -> Pe = .5; kappa = (2/3 - .5) / .5 = 1/3.
    assert stats.fleiss_kappa([[1, 1, 1], [1, 1, 0], [0, 0, 1], [0, 0, 0]]) == pytest.approx(1 / 3)
    # 3 raters x 3 items: P_i = 1, 1/3, 1 -> Pbar = 7/9; 5 of 9 yes -> Pe = 41/81; kappa = (63-41)/(81-41) = .55
    assert stats.fleiss_kappa([[1, 1, 1], [1, 1, 0], [0, 0, 0]]) == pytest.approx(0.55)
    assert stats.fleiss_kappa([[1, 1], [1, 1]]) is None  # chance agreement 1: undefined, not 1.0
    assert stats.cohen_kappa([]).kappa is None


def test_fleiss_kappa_with_two_raters_is_close_to_scotts_pi():
    pairs = [(1, 1), (1, 0), (0, 0), (0, 0), (1, 1), (0, 1)]
    # Scott's pi: po = 4/6; pooled p(1) = 6/12 -> pe = .5; pi = (2/3 - .5)/.5 = 1/3. Fleiss with 2 raters = Scott's pi.
    assert stats.fleiss_kappa([list(p) for p in pairs]) == pytest.approx(1 / 3)


def test_agreement_report_skips_missing_votes():
    columns = [[YES, YES, NO, None], [YES, NO, NO, YES], [YES, YES, NO, YES]]
    report = panel.agreement(["a", "b", "c"], columns)["correct"]
    ab, ac, bc = report["pairs"]
    assert (ab["n"], ab["agreement"]) == (3, pytest.approx(2 / 3))
    assert (ac["n"], ac["agreement"]) == (3, 1.0)
    assert (bc["n"], bc["agreement"]) == (4, pytest.approx(3 / 4))
    assert report["fleiss_n"] == 3
    assert report["mean_pairwise_agreement"] == pytest.approx((2 / 3 + 1 + 3 / 4) / 3)


def fake_client(outcomes: dict[str, Outcome]) -> SeamJudge:
    """Our own seam: returns fixed outcomes per request prompt and counts what it was asked."""
    return SeamJudge(lambda request: outcomes[request.prompt])


def _requests(n):
    return [JudgeRequest(prompt=f"q{i}") for i in range(n)]


def test_panel_keeps_member_records_and_failures():
    down = Outcome(failure="http_503", transport=True, error="server error 503")
    a = fake_client({"q0": Outcome(verdict=YES), "q1": Outcome(verdict=NO), "q2": down})
    b = fake_client({"q0": Outcome(verdict=YES), "q1": Outcome(verdict=YES), "q2": Outcome(verdict=YES)})
    c = fake_client({"q0": Outcome(verdict=NO), "q1": Outcome(verdict=NO), "q2": Outcome(failure="unparseable")})
    p = panel.Panel([("a", a), ("b", b), ("c", c)], "majority", 2, EXACT_MATCH.describe)
    out = schedule.judge_all(p, _requests(3), progress=False)
    assert [o.verdict.correct if o.verdict else o.failure for o in out] == [True, False, "panel_quorum"]
    assert not any(o.transport_failed for o in out)  # the panel is the judge: counted, not a stopped run
    members = out[2].detail["panel"]
    assert [m["failure"] for m in members] == ["http_503", None, "unparseable"]
    assert members[1]["verdict"] == {"correct": True, "analysis": YES.analysis}
    summary = p.stats.as_dict()["panel"]
    assert summary["agreement"]["correct"]["pairs"][0]["n"] == 2
    p.close()
    assert a.closed and b.closed and c.closed


def test_cascade_sends_only_what_the_rule_does_not_accept():
    rule = fake_client({"q0": Outcome(verdict=YES), "q1": Outcome(verdict=NO),
                       "q2": Outcome(failure="timeout", error="no answer in time"), "q3": Outcome(verdict=YES)})
    llm = fake_client({"q1": Outcome(verdict=YES), "q2": Outcome(verdict=NO)})
    c = cascade.Cascade(("local:math-verify", rule), ("openai:m", llm), EXACT_MATCH.describe)
    out = schedule.judge_all(c, _requests(4), progress=False)
    assert llm.asked == ["q1", "q2"]
    assert [o.verdict.correct for o in out] == [True, True, False, True]
    assert [o.detail["stage"] for o in out] == ["rule", "llm", "llm", "rule"]
    assert out[2].detail["rule"]["failure"] == "timeout"
    summary = c.stats.as_dict()["cascade"]
    assert (summary["decided_by_rule"], summary["decided_by_llm"], summary["llm_requests_saved"]) == (2, 2, 2)
    assert cascade.rename(EXACT_MATCH.scores(YES)) == {"cascade_exact_match": 1.0, "judge_failed": 0.0}


# ---------------------------------------------------------------------- settings
@pytest.mark.parametrize("metadata, environ, expected", [
    ({"judge_panel": [{"backend": "local"}, {"backend": "openai"}]}, {},
     RunOptions(panel=({"backend": "local"}, {"backend": "openai"}))),
    ({}, {"MATHJUDGE_PANEL": '[{"backend": "local"}, {"model": "gpt-4o"}]', "MATHJUDGE_PANEL_RULE": "Unanimous"},
     RunOptions(panel=({"backend": "local"}, {"model": "gpt-4o"}), panel_rule="unanimous")),
    ({"judge_cascade": "true"}, {"MATHJUDGE_CASCADE": "0"}, RunOptions(cascade=True)),  # metadata beats env
    ({"judge_cascade": False, "gpt4em_judge_cascade": True}, {}, RunOptions(cascade=True)),  # scoped wins
    ({"vlm_judge_cascade": True}, {}, RunOptions()),  # another judge's scope
    ({"judge_panel": [{}, {"model": "b"}, {"model": "c"}], "judge_panel_min": "3"}, {},
     RunOptions(panel=({}, {"model": "b"}, {"model": "c"}), panel_min=3)),
])
def test_run_options_layers(metadata, environ, expected):
    assert resolve_run_options("exact_match", None, metadata, environ) == expected


@pytest.mark.parametrize("metadata, message", [
    ({"judge_panel": [{"backend": "local"}]}, "a panel needs 2"),
    ({"judge_panel": "not json"}, "is not JSON"),
    ({"judge_panel": {"backend": "local"}}, "must be a list of objects"),
    ({"judge_panel": [{"backend": "local"}, {"modle": "x"}]}, "unknown judge setting modle"),
    ({"judge_panel": [{"backend": "local"}, {"api_key": "x"}]}, "credentials are never read"),
    ({"judge_panel": [{"backend": "local"}, {"base_url": "https://u:p@host/v1"}]}, "carries credentials"),
    ({"judge_panel": [{"backend": "local"}, {"panel_rule": "majority"}]}, "panels do not nest"),
    ({"judge_panel": [{}, {}], "judge_panel_rule": "plurality"}, "must be one of majority, unanimous"),
    ({"judge_panel": [{}, {}], "judge_panel_min": 3}, "between 1 and the number of panel members"),
    ({"judge_panel": [{}, {}], "judge_panel_min": "two"}, "panel_min='two' is not a valid int"),
    ({"judge_panel_min": 1}, "judge_panel is not"),
    ({"judge_panel": [{}, {}], "judge_cascade": True}, "cannot be combined"),
    ({"judge_cascade": "maybe"}, "not a valid bool"),
])
def test_bad_run_options_say_what_to_do(metadata, message):
    with pytest.raises(ConfigError, match=message):
        resolve_run_options("exact_match", None, metadata, {})


def test_yaml_layer_is_lowest():
    yaml = {"panel": [{"backend": "local"}, {}], "panel_rule": "unanimous", "max_tokens": 64}
    assert resolve_run_options("exact_match", yaml, {}, {}) == RunOptions(panel=({"backend": "local"}, {}),
                                                                         panel_rule="unanimous")
    assert resolve_run_options("exact_match", yaml, {"judge_panel_rule": "majority"}, {}).panel_rule == "majority"
    assert resolve_settings("exact_match", yaml, {}, {}).max_tokens == 64  # the settings ignore the options


def test_cascade_is_exact_match_only_and_unknown_env_still_refused():
    with pytest.raises(ConfigError, match="exact-match judge only"):
        resolve_run_options("vlm", None, {"judge_cascade": True}, {})
    with pytest.raises(ConfigError, match="MATHJUDGE_PANELS"):
        resolve_settings("exact_match", None, {}, {"MATHJUDGE_PANELS": "x"})


def test_member_overrides_sit_above_every_layer_and_take_their_backend_defaults():
    metadata = {"judge_panel": [{"backend": "local"}, {}], "judge_temperature": 0.5}
    local = resolve_settings("exact_match", None, metadata, {"MATHJUDGE_MODEL": "gpt-4o"}, overrides={"backend": "local"})
    assert (local.backend, local.model, local.temperature) == ("local", "math-verify", 0.5)
    other = resolve_settings("exact_match", None, metadata, {}, overrides={"model": "gpt-4o", "temperature": 0})
    assert (other.backend, other.model, other.temperature) == ("openai", "gpt-4o", 0.0)
    with pytest.raises(ConfigError, match="cannot run on the local backend"):
        resolve_settings("vlm", None, {}, {}, overrides={"backend": "local"})
