"""The cascade never scores above its LLM judge alone (issue 14).

The rule stage (the local judge) credits only a response that commits to one
final answer equal to the gold: the answer policy that LLM judges follow
through rule 1 of their prompt. So every sample the rule accepts, an LLM judge
that follows the rubric accepts too, and the cascade's score cannot exceed the
LLM judge's alone.

1. Property (hypothesis): responses built from real GSM8K working and final
   statements that are right, wrong or hedged, plus revisions, later sentences
   and refusals, whose rubric verdict is known from how they were built. The
   rule stage is the real local judge; the LLM stage is a stand-in that returns
   that verdict. No sample the rule accepts is one the rubric rejects.
2. Through the real CLI: issue 14's ``\\boxed{A}`` + ``Final answer: B`` on 60
   docs (gold in A on half, in B on the other half), a loopback LLM judge that
   follows the rubric and one that reads the last answer: the cascade is never
   above the LLM judge alone (before the answer policy it scored 60/60).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lm_eval_mathjudge.judging import cascade, schedule
from lm_eval_mathjudge.backends.local import LocalBackend
from lm_eval_mathjudge.judging.client import JudgeClient
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.judges import EXACT_MATCH
from lm_eval_mathjudge.core.parsing import ExactMatchVerdict, parse_exact_match
from lm_eval_mathjudge.core.types import JudgeRequest, Outcome
from tests._helpers import SeamJudge
from tests.answer_tables import gsm8k_docs
from tests.e2e import CANARY_KEY, run_lm_eval
from tests.loopback import ChatCompletionsServer

DOCS = gsm8k_docs()

# ---------------------------------------------------------------- 1. property

TEXT_VALUES = {"gold": ["{G}", "${G}", "{G}.00", "{G} dollars", "{Gc}"],
               "wrong": ["{W}", "${W}", "{W} dollars"],
               "hedge": ["{G} or {W}", "{G} (or {W})", "about {G}", "approximately {G}", "between {W} and {G}",
                         "{G}, {W}", "{G} to {W}", "{G} or so", "either {G} or {W}", "{G}, but it could be {W}",
                         "{G}-ish", "roughly ${G}", "at least {G}", "{G}, maybe {W}"]}
BOX_VALUES = {"gold": ["{G}", "{G}.00", "\\${G}", "{G} \\text{{ dollars}}", "{Gc}"],
              "wrong": ["{W}", "\\${W}"],
              "hedge": ["{G} \\text{{ or }} {W}", "\\approx {G}", "{G} \\pm 1", "{G}, {W}", "\\sim {G}",
                        "{G} \\lor {W}", "\\{{{G}, {W}\\}}", "{G} \\text{{ (or }} {W})"]}
TEXT_FORMS = ["The answer is {v}.", "Final answer: {v}", "#### {v}", "\nA: {v}", "So in the end she makes {v}.",
              "In conclusion, the total is {v}."]  # "A:" marks an answer at the start of a line only
BOX_FORMS = ["\\boxed{{{v}}}", "Therefore, the answer is $\\boxed{{{v}}}$.", "**Final Answer**\n\n\\[\n\\boxed{{{v}}}\n\\]"]
HEDGED_BOX_FORMS = ["She makes about \\boxed{{{v}}}.", "Maybe \\boxed{{{v}}}.", "It is {W} or \\boxed{{{v}}}."]
TAILS = {  # after the final statements: (text, is it a final statement, its value kind)
    "none": ("", False, None), "hope": ("I hope it is correct.", False, None),
    "plain-gold": ("She makes ${G} every day.", True, "gold"), "plain-wrong": ("She makes ${W} every day.", True, "wrong"),
    "kidding": ("Just kidding, it is {W}.", True, "wrong"), "actually-gold": ("Wait, actually it is {G}.", True, "gold"),
    "actually-wrong": ("Wait, actually it is {W}.", True, "wrong"), "refusal": ("I cannot solve this problem.", True, "refusal"),
    "alternatively": ("Alternatively, the answer is {W}.", True, "wrong"), "or-maybe": ("Or maybe {W}.", True, "wrong"),
    "parenthesised": ("(Answer: {W})", True, "wrong"), "dont-know": ("Honestly, I don't know.", True, "refusal"),
    "note-other-reading": ("Note: if she also sold the 3 eggs, it would be {W}.", True, "wrong"),
    "units-remark": ("This is the amount in dollars.", False, None),
    "check-gold": ("Check: that gives {G}, as above.", True, "gold"),
}


@dataclass(frozen=True)
class Built:
    response: str
    gold: str
    question: str
    rubric: bool  # what an LLM judge following the rubric says: one final answer, the gold


@st.composite
def built_responses(draw) -> Built:
    doc = draw(st.sampled_from(DOCS))
    gold = int(doc["gold"])
    wrong = gold + draw(st.integers(1, 40))
    fill = {"G": str(gold), "W": str(wrong), "Gc": f"{gold:,}"}
    parts, finals = [], []
    if draw(st.booleans()):
        parts.append("I cannot solve this problem at first sight, so let me work slowly.")
    if draw(st.booleans()):
        parts.append(draw(st.sampled_from(DOCS))["cot"])  # real working, numbers of any doc
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["gold", "gold", "wrong", "hedge", "outer-hedge"]))
        if kind == "outer-hedge":
            form, value, kind = draw(st.sampled_from(HEDGED_BOX_FORMS)), draw(st.sampled_from(BOX_VALUES["gold"])), "hedge"
        elif draw(st.booleans()):
            form, value = draw(st.sampled_from(BOX_FORMS)), draw(st.sampled_from(BOX_VALUES[kind]))
        else:
            form, value = draw(st.sampled_from(TEXT_FORMS)), draw(st.sampled_from(TEXT_VALUES[kind]))
        parts.append(form.format(v=value.format(**fill), **fill))
        finals.append(kind)
    for name in draw(st.lists(st.sampled_from(sorted(TAILS)), max_size=2)):
        tail, is_final, tail_kind = TAILS[name]
        if tail:
            parts.append(tail.format(**fill))
        if is_final:
            finals.append(tail_kind)
    rubric = all(kind == "gold" for kind in finals)
    text = parts[0]
    for part in parts[1:]:
        text += draw(st.sampled_from(["\n", "\n\n", " "])) + part
    return Built(text, str(gold), doc["question"], rubric)


def rubric_judge(verdicts: dict[str, bool]) -> SeamJudge:
    """The LLM stage: a judge that follows the rubric (it knows each response's rubric verdict)."""
    return SeamJudge(lambda r: Outcome(verdict=ExactMatchVerdict(verdicts[r.fields["response"]], "by the rubric")))


@pytest.fixture(scope="module")
def rule():
    client = JudgeClient(LocalBackend(workers=2), parse_exact_match,
                         JudgeSettings(backend="local", model="math-verify", concurrency=2), "test", None,
                         progress=False)
    yield client
    client.close()


def _request(item: Built) -> JudgeRequest:
    return JudgeRequest(prompt=item.response, fields={"answer": item.gold, "response": item.response,
                                                      "question": item.question})


@pytest.mark.local_judge
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(batch=st.lists(built_responses(), min_size=1, max_size=6))
def test_the_cascade_never_scores_above_the_llm_judge_alone(rule, batch):
    llm = rubric_judge({item.response: item.rubric for item in batch})
    judged = cascade.Cascade(("local:math-verify", rule), ("rubric", llm), EXACT_MATCH.describe)
    outcomes = schedule.judge_all(judged, [_request(item) for item in batch], progress=False)
    for item, outcome in zip(batch, outcomes):
        if outcome.detail["stage"] == "rule":  # the rule accepted it: the rubric must too
            assert item.rubric, (item.response, outcome.verdict.analysis)
    cascade_score = sum(bool(o.verdict and o.verdict.correct) for o in outcomes)
    assert cascade_score <= sum(item.rubric for item in batch)


@pytest.mark.local_judge
def test_the_rule_stage_still_decides_honest_answers(rule):
    """Not vacuous: right single answers are accepted by the rule and never reach the LLM stage."""
    honest = [Built(f"{doc['cot']}\nSo she makes ${doc['gold']}.\n\\boxed{{{doc['gold']}}}", doc["gold"],
                    doc["question"], True) for doc in DOCS[:8]]
    llm = rubric_judge({item.response: True for item in honest})
    judged = cascade.Cascade(("local:math-verify", rule), ("rubric", llm), EXACT_MATCH.describe)
    outcomes = schedule.judge_all(judged, [_request(item) for item in honest], progress=False)
    assert [o.detail["stage"] for o in outcomes] == ["rule"] * len(honest)


# ---------------------------------------------------------------- 2. through the CLI

N = 60
TASK = "gsm8k_gpt4em"
_BOX = re.compile(r"\\boxed\{([^{}]*)\}")
_FINAL_LINE = re.compile(r"^Final answer:\s*(\S+)\s*$", re.M)


def _two_answers():
    """Issue 14's answer on 60 docs: the gold is the boxed value on even docs, the final line on odd."""
    records, responses = [], {}
    for doc in DOCS[:N]:
        gold, wrong = doc["gold"], doc["W"]
        first, second = (gold, wrong) if doc["doc_id"] % 2 == 0 else (wrong, gold)
        response = f"{doc['cot']}\n\\boxed{{{first}}}\nFinal answer: {second}"
        records.append({"question": doc["question"], "response": response})
        responses[doc["question"]] = (response, gold)
    return records, responses


def _judge(responses, reading: str):
    """A loopback LLM judge. ``rubric``: several different final answers do not match (our rubric);
    ``last``: it reads the last final answer only (a gullible judge)."""
    def respond(body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        response, gold = next(v for q, v in responses.items() if q in prompt)
        finals = _BOX.findall(response) + _FINAL_LINE.findall(response)
        if reading == "rubric":
            same = len(set(finals)) == 1 and finals[0] == gold
        else:
            same = finals[-1] == gold
        return (f"Error Analysis: The student's final answers are {', '.join(finals)}; the reference answer is "
                f"{gold}.\nFinal Verdict: {'Correct' if same else 'Incorrect'}")
    return respond


def _run(replay, tmp_path, name, metadata):
    from tests.conftest import SHARED_DATA

    run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", TASK,
                       "--limit", str(N), "--log_samples", "--metadata", json.dumps(metadata)],
                      {"MATHJUDGE_DATA_DIR": str(SHARED_DATA), "MATHJUDGE_CACHE_DIR": str(tmp_path / f"cache-{name}"),
                       "OPENAI_API_KEY": CANARY_KEY}, tmp_path / name)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


def _scores(run, metric):
    return sum(s[metric] for s in run.samples(TASK))


def _two_answers_runs(tmp_path):
    from tests.e2e import run_together

    records, responses = _two_answers()
    replay = tmp_path / "two_answers.jsonl"
    replay.write_text("".join(json.dumps(r) + "\n" for r in records))
    with ChatCompletionsServer(_judge(responses, "rubric")) as rubric, \
            ChatCompletionsServer(_judge(responses, "last")) as last:
        runs = run_together(
            lambda: _run(replay, tmp_path, "rule", {"judge_backend": "local"}),
            lambda: _run(replay, tmp_path, "rubric-alone", {"judge_base_url": rubric.url}),
            lambda: _run(replay, tmp_path, "rubric-cascade", {"judge_base_url": rubric.url, "judge_cascade": True}),
            lambda: _run(replay, tmp_path, "last-alone", {"judge_base_url": last.url}),
            lambda: _run(replay, tmp_path, "last-cascade", {"judge_base_url": last.url, "judge_cascade": True}))
    return dict(zip(["rule", "rubric-alone", "rubric-cascade", "last-alone", "last-cascade"], runs))


@pytest.mark.e2e
def test_two_answers_earn_the_cascade_no_more_than_the_llm_judge_alone(scenario):
    runs = scenario()
    rule = _scores(runs["rule"], "gpt4_exact_match")
    assert rule == 0  # the rule stage credits neither guess
    for reading in ("rubric", "last"):
        alone = _scores(runs[f"{reading}-alone"], "gpt4_exact_match")
        both = _scores(runs[f"{reading}-cascade"], "cascade_exact_match")
        assert both <= alone, (reading, both, alone)
        stages = [json.loads(s["filtered_resps"][0])["stage"] for s in runs[f"{reading}-cascade"].samples(TASK)]
        assert stages == ["llm"] * N  # every sample had two answers: the LLM judge decided each
    assert _scores(runs["rubric-alone"], "gpt4_exact_match") == 0
    assert _scores(runs["last-alone"], "gpt4_exact_match") == N // 2


SCENARIOS = {"test_two_answers_earn_the_cascade_no_more_than_the_llm_judge_alone": _two_answers_runs}
