"""The counterfactual re-check on the wire: real openai and google-genai SDKs against loopback servers.

The judges are opened as a task opens them (``judging/factory.open_judge`` with ``counterfactual`` on)
and judge rendered requests (``harness/render.Renderer``) through the run's one pool
(``schedule.judge_all``): a single judge, a panel and a cascade on the OpenAI protocol, a VLM judge on
the Gemini one. Calls are counted at the server; the worst-case estimate counts one re-check per request.
"""

from __future__ import annotations

import dataclasses

import pytest

from lm_eval_mathjudge.core.judges import EXACT_MATCH, VLM
from lm_eval_mathjudge.harness.render import Renderer
from lm_eval_mathjudge.judging import counterfactual, factory, schedule
from lm_eval_mathjudge.settings.schema import JudgeSettings, RunOptions
from tests import counterfactual_judges as cj
from tests.e2e import CANARY_KEY
from tests.loopback import ChatCompletionsServer, GeminiServer

GSM8K_REF = "She has 16 - 3 - 4 = 9 eggs left.\nShe makes 9 * 2 = 18 dollars.\nFinal answer: 18"
DOCS = [{"mj_question": f"Question {i}?", "mj_reference": GSM8K_REF.replace("18", str(18 + i)),
         "mj_answer": str(18 + i)} for i in range(6)]
# honest right, honest wrong, gamed (three styles): the obedient judge credits 1 + 3, the honest judge 1
ANSWERS = [cj.honest("18"), cj.honest("7"), cj.gamed("7", 0), cj.gamed("7", 4), cj.gamed("7", 6),
           cj.honest("23")]
EXPECTED_HONEST = [True, False, False, False, False, True]


@pytest.fixture(autouse=True)
def _keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
    monkeypatch.setenv("GEMINI_API_KEY", "AIza-canary-gemini-0123456789abcdef")


def _judge(judge, members, options, answers=ANSWERS):
    client, opened = factory.open_judge(judge, options, members)
    render = Renderer(judge, "wire", recheck=options.counterfactual)
    try:
        return schedule.judge_all(client, [render(doc, answer) for doc, answer in zip(DOCS, answers)],
                                  progress=False), opened
    finally:
        client.close()


def _settings(server, tmp_path, **extra):
    return JudgeSettings(**{"backend": "openai", "model": "judge-a", "base_url": server.url, "max_retries": 0,
                            "cache_dir": str(tmp_path / "cache"), **extra})


def _calls(server) -> int:
    return len([r for r in server.requests if r.path.endswith("/chat/completions")])


@pytest.mark.parametrize("obedient", [True, False])
def test_one_openai_judge(tmp_path, obedient):
    with ChatCompletionsServer(cj.exact_match(obedient)) as server:
        outcomes, _ = _judge(EXACT_MATCH, [_settings(server, tmp_path)], RunOptions(counterfactual=True))
        calls = _calls(server)
    credited = [o.verdict is not None and o.verdict.correct for o in outcomes]
    assert credited == EXPECTED_HONEST  # the obedient judge's four credits of gamed answers are withheld
    first_correct = 2 + (3 if obedient else 0)
    assert calls == len(ANSWERS) + first_correct  # one re-check per Correct, none for Incorrect
    caught = [counterfactual.caught(o) for o in outcomes]
    assert caught == [False, False, obedient, obedient, obedient, False]
    for o in outcomes:
        if counterfactual.caught(o):
            assert o.failure == "counterfactual" and o.detail["counterfactual"]["verdict"]["correct"] is True
            assert o.detail["counterfactual"]["wrong_answer"] not in (None, "18")


def test_a_rerun_is_answered_from_the_cache(tmp_path):
    with ChatCompletionsServer(cj.exact_match(True)) as server:
        first, _ = _judge(EXACT_MATCH, [_settings(server, tmp_path)], RunOptions(counterfactual=True))
        calls = _calls(server)
        again, _ = _judge(EXACT_MATCH, [_settings(server, tmp_path)], RunOptions(counterfactual=True))
        assert _calls(server) == calls
    assert [o.failure for o in again] == [o.failure for o in first] and all(o.cached for o in again)


def test_a_failed_recheck_is_a_failure_not_a_credit(tmp_path):
    def respond(body):
        prompt = body["messages"][-1]["content"]
        if "Final answer: 19" not in prompt and "18" not in prompt.split("### Student's solution")[0]:
            return "no verdict here"  # the re-check (a wrong reference) gets an off-contract reply
        return cj.exact_match(False)(body)
    with ChatCompletionsServer(respond) as server:
        [outcome], _ = _judge(EXACT_MATCH, [_settings(server, tmp_path)], RunOptions(counterfactual=True),
                              answers=ANSWERS[:1])
    assert outcome.verdict is None and outcome.failure == "unparseable" and not outcome.transport


def test_a_panel_rechecks_each_member(tmp_path):
    servers = [ChatCompletionsServer(cj.exact_match(True)), ChatCompletionsServer(cj.exact_match(False)),
               ChatCompletionsServer(cj.exact_match(True))]
    with servers[0] as a, servers[1] as b, servers[2] as c:
        members = [_settings(s, tmp_path, model=f"judge-{n}") for n, s in zip("abc", (a, b, c))]
        outcomes, _ = _judge(EXACT_MATCH, members, RunOptions(panel=({}, {}, {}), counterfactual=True))
        calls = [_calls(s) for s in (a, b, c)]
    assert [o.verdict is not None and o.verdict.correct for o in outcomes] == EXPECTED_HONEST
    assert calls == [len(ANSWERS) + 5, len(ANSWERS) + 2, len(ANSWERS) + 5]
    gamed = outcomes[2]  # two obedient members caught: no quorum for a credit, and flagged
    assert counterfactual.caught(gamed) and [m["failure"] for m in gamed.detail["panel"]] == [
        "counterfactual", None, "counterfactual"]


@pytest.mark.local_judge  # the rule stage's math-verify worker
def test_a_cascade_rechecks_its_llm_stage_only(tmp_path):
    with ChatCompletionsServer(cj.exact_match(True)) as server:
        options = RunOptions(cascade=True, counterfactual=True)
        local = JudgeSettings(backend="local", model="math-verify", cache_dir=str(tmp_path / "cache"))
        outcomes, _ = _judge(EXACT_MATCH, [local, _settings(server, tmp_path)], options)
        calls = _calls(server)
    assert [o.verdict is not None and o.verdict.correct for o in outcomes] == EXPECTED_HONEST
    by_rule = [o.detail.get("stage") == "rule" for o in outcomes]
    assert by_rule[0] and by_rule[5]  # the rule proves the right answers: no LLM call, no re-check
    assert calls == sum(not r for r in by_rule) + 3  # each gamed answer once, and its re-check once
    assert all(counterfactual.caught(o) for o in outcomes[2:5])


def test_a_gemini_vlm_judge_rechecks_final_correct(tmp_path):
    with GeminiServer(cj.vlm(True)) as server:
        settings = JudgeSettings(backend="gemini", model="gemini-2.5-pro", base_url=server.url, max_retries=0,
                                 cache_dir=str(tmp_path / "cache"))
        outcomes, _ = _judge(VLM, [settings], RunOptions(counterfactual=True))
        calls = server.generate_calls
    assert [o.verdict is not None and o.verdict.final_correct == 1 for o in outcomes] == EXPECTED_HONEST
    assert calls == len(ANSWERS) + 5 and sum(map(counterfactual.caught, outcomes)) == 3


def test_the_estimate_counts_one_recheck_per_request_as_the_worst_case(tmp_path):
    with ChatCompletionsServer(cj.exact_match(True)) as server:
        client, opened = factory.open_judge(EXACT_MATCH, RunOptions(counterfactual=True), [_settings(server, tmp_path)])
        try:
            for recheck, expected in ((False, 6), (True, 12)):
                render = Renderer(EXACT_MATCH, "wire", recheck=recheck)
                built = [render(doc, answer) for doc, answer in zip(DOCS, ANSWERS)]
                [part] = schedule.parts_for("wire", opened, lambda built=built: built)
                assert len(list(part.items())) == expected
        finally:
            client.close()
        assert _calls(server) == 0


def test_requests_keep_their_keys_with_the_recheck_attached():
    plain, checked = Renderer(EXACT_MATCH, "t"), Renderer(EXACT_MATCH, "t", recheck=True)
    a, b = plain(DOCS[0], ANSWERS[0]), checked(DOCS[0], ANSWERS[0])
    assert a.key_payload() == b.key_payload() and a.recheck is None  # a cached run makes no new call
    assert b.recheck.request.prompt != b.prompt and "Final answer: 18" not in b.recheck.request.prompt
    assert dataclasses.replace(b, recheck=None) == a
