"""The public Python API: judge_answer / judge_answers through the judging client, on any backend.

Against the loopback OpenAI server through the real openai SDK, and with the
offline local judge: verdicts, the cache on a second call, judge failures
counted (never an Incorrect), settings refused before any call, and an import
of the package that stays cheap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import lm_eval_mathjudge
from lm_eval_mathjudge import Answer, JudgeSettings, Judgement, judge_answer, judge_answers
from lm_eval_mathjudge.core.errors import ConfigError, FatalJudgeError
from tests._helpers import isolate_gemini_sdk
from tests.conftest import REPO
from tests.loopback import ChatCompletionsServer, GeminiServer
from tests.e2e import TIMEOUT_S

CANARY = "sk-canary-api-0123456789abcdef"
MODEL = "gpt-4-turbo-2024-04-09"
QUESTION = ("Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for "
            "her friends every day with four. She sells the remainder at the farmers' market daily for $2 per "
            "fresh duck egg. How much in dollars does she make every day at the farmers' market?")
SOLUTION = "Janet sells 16 - 3 - 4 = 9 duck eggs a day.\nShe makes 9 * 2 = $18 every day at the farmer's market."
RIGHT = "16 - 3 - 4 = 9 eggs are sold, and 9 * 2 = 18.\nThe answer is $\\boxed{18}$."
WRONG = "She keeps 16 - 3 = 13 eggs... so 8 * 2 = 16.\nThe answer is $\\boxed{16}$."
MUMBLE = "I would rather not commit: \\boxed{?}"  # the loopback judge answers this one off the contract


def judge_reply(body: dict) -> str:
    """Grades like GPT-4 in the contract's two lines; answers MUMBLE's prompt off the contract."""
    prompt = body["messages"][0]["content"]
    if "\\boxed{18}" in prompt:
        return ("Error Analysis: The student's final answer of 18 matches the reference answer of 18.\n"
                "Final Verdict: Correct")
    if "\\boxed{16}" in prompt:
        return ("Error Analysis: The student's final answer of 16 does not match the reference answer of 18.\n"
                "Final Verdict: Incorrect")
    return "Hard to say; the student seems unsure."


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    for name in [n for n in os.environ if n.startswith(("OPENAI_", "MATHJUDGE_"))]:
        if name != "OPENAI_API_KEY":
            monkeypatch.delenv(name)
    with ChatCompletionsServer(responder=judge_reply) as srv:
        yield srv


def openai_settings(server, tmp_path, **more):
    return {"backend": "openai", "model": MODEL, "base_url": server.url, "cache_dir": str(tmp_path / "cache"),
            "max_retries": 0, "timeout": 10.0, **more}


ANSWERS = [Answer(QUESTION, RIGHT, "18", SOLUTION), Answer(QUESTION, WRONG, "18", SOLUTION),
           Answer(QUESTION, MUMBLE, "18", SOLUTION)]


def test_many_answers_through_the_real_openai_sdk_then_from_the_cache(server, tmp_path):
    first = judge_answers(ANSWERS, settings=openai_settings(server, tmp_path))
    assert [j.correct for j in first] == [True, False, None]
    assert [j.scores for j in first] == [{"gpt4_exact_match": 1.0, "judge_failed": 0.0},
                                         {"gpt4_exact_match": 0.0, "judge_failed": 0.0},
                                         {"gpt4_exact_match": 0.0, "judge_failed": 1.0}]
    failed = first[2]
    # A judge failure is counted as one, never disguised as an Incorrect verdict.
    assert failed.failed and failed.failure == "unparseable" and failed.verdict is None and not failed.transport
    assert "seems unsure" in failed.raw_reply
    assert {j.judge for j in first} == {f"openai:{MODEL}"} and not any(j.cached for j in first)
    calls = server.call_count
    assert calls == 4  # one each, and the off-contract reply asked again once
    sent = [r.body["messages"][0]["content"] for r in server.requests if r.path == "/v1/chat/completions"]
    assert any(RIGHT in prompt and "9 * 2 = $18" in prompt for prompt in sent)  # the task's own prompt
    assert all(r.headers.get("authorization") == f"Bearer {CANARY}" for r in server.requests)

    again = judge_answers(ANSWERS, settings=openai_settings(server, tmp_path))
    assert server.call_count == calls  # every reply came from the cache
    assert [j.correct for j in again] == [True, False, None] and again[0].cached and again[1].cached
    assert again[2].failure == "unparseable"
    assert all(CANARY not in json.dumps([j.raw_reply, j.error, j.judge]) for j in first + again)


def test_one_answer_with_typed_settings(server, tmp_path):
    settings = JudgeSettings(backend="openai", model=MODEL, base_url=server.url, cache=False, max_retries=0)
    judged = judge_answer(QUESTION, RIGHT, "18", SOLUTION, settings=settings)
    assert isinstance(judged, Judgement) and judged.correct is True and judged.verdict.correct is True
    assert "matches the reference answer of 18" in judged.verdict.analysis


def test_an_unreachable_judge_is_a_transport_failure_not_a_verdict(server, tmp_path):
    server.inject(status=503)  # the one attempt (max_retries=0)
    [judged] = judge_answers(ANSWERS[:1], settings=openai_settings(server, tmp_path))
    assert judged.correct is None and judged.failed and judged.transport
    assert judged.failure == "http_503" and judged.scores["judge_failed"] == 1.0
    assert judge_answers(ANSWERS[:1], settings=openai_settings(server, tmp_path))[0].correct is True  # a rerun


VLM_RIGHT = ("INTERMEDIATE_CORRECT: 1\nFINAL_CORRECT: 1\nACTION_REFLECTION: 0\n"
             "EXPLANATION: The steps match the reference: 9 eggs are left and 9 * 2 = 18.")
VLM_WRONG = ("INTERMEDIATE_CORRECT: 1\nFINAL_CORRECT: 0\nACTION_REFLECTION: 0\n"
             "EXPLANATION: The student subtracted only the breakfast eggs, so 16 is wrong.")


def test_the_vlm_judge_on_gemini_through_the_real_google_genai_sdk(monkeypatch, tmp_path):
    isolate_gemini_sdk(monkeypatch, "AIza-canary-api-0123456789abcdef")
    for name in [n for n in os.environ if n.startswith("MATHJUDGE_")]:
        monkeypatch.delenv(name)

    def grade(body):
        text = body["contents"][0]["parts"][-1].get("text", "")
        return VLM_RIGHT if "boxed{18}" in text else VLM_WRONG

    with GeminiServer(responder=grade) as server:
        settings = {"backend": "gemini", "base_url": server.url, "cache_dir": str(tmp_path), "max_retries": 0}
        right, wrong = judge_answers(ANSWERS[:2], judge="vlm", settings=settings)
    assert (right.correct, wrong.correct) == (True, False)
    assert wrong.scores == {"final_correct": 0.0, "intermediate_correct": 1.0, "action_reflection": 0.0,
                            "judge_failed": 0.0}
    assert right.judge == "gemini:gemini-2.5-pro" and right.verdict.final_correct == 1


def test_settings_that_cannot_work_are_refused_before_any_call(server, tmp_path):
    with pytest.raises(ConfigError, match="unknown judge 'gpt4'"):
        judge_answer(QUESTION, RIGHT, "18", judge="gpt4")
    with pytest.raises(ConfigError, match="vlm judge cannot run on the local backend"):
        judge_answer(QUESTION, RIGHT, "18", judge="vlm", settings={"backend": "local"})
    with pytest.raises(ConfigError, match="takes Answer"):
        judge_answers([{"question": QUESTION, "response": RIGHT, "gold": "18"}], settings={"backend": "local"})
    with pytest.raises(ConfigError, match="Answer.gold must be text, not int"):
        Answer(QUESTION, RIGHT, 18)
    assert judge_answers([], settings=openai_settings(server, tmp_path)) == []
    with pytest.raises(ConfigError, match="unknown judge setting 'modle'"):
        judge_answer(QUESTION, RIGHT, "18", settings={"backend": "openai", "modle": "gpt-4o"})
    with pytest.raises(ConfigError, match="credentials are never read") as refused:
        judge_answer(QUESTION, RIGHT, "18", settings={"backend": "openai", "api_key": CANARY})
    assert CANARY not in str(refused.value)
    server.models = ["some-other-model"]  # the preflight's model lookup now says 404
    with pytest.raises(FatalJudgeError, match="preflight"):
        judge_answer(QUESTION, RIGHT, "18", settings=openai_settings(server, tmp_path, model="no-such-model"))
    assert server.call_count == 0  # no judge call was made for any of them


@pytest.mark.local_judge
def test_the_local_judge_offline_with_its_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MATHJUDGE_CACHE_DIR", str(tmp_path / "cache"))  # a settings layer, as for a task
    answers = [Answer("What is 1/2 + 1/4?", "Adding gives \\boxed{\\frac{3}{4}}.", "\\frac{3}{4}"),
               Answer("What is 1/2 + 1/4?", "Adding gives \\boxed{\\frac{2}{6}}.", "\\frac{3}{4}")]
    first = judge_answers(answers, settings={"backend": "local"})
    assert [j.correct for j in first] == [True, False] and {j.judge for j in first} == {"local:math-verify"}
    assert not any(j.cached for j in first)
    typed = JudgeSettings(backend="local", cache_dir=str(tmp_path / "cache"))  # typed settings are taken as given
    second = judge_answers(answers, settings=typed)
    assert [j.correct for j in second] == [True, False] and all(j.cached for j in second)
    assert os.listdir(tmp_path / "cache")


@pytest.mark.e2e
def test_importing_the_package_and_its_api_names_stays_cheap():
    code = ("import sys, lm_eval_mathjudge\n"
            "from lm_eval_mathjudge import judge_answer, judge_answers, Answer, Judgement, JudgeSettings\n"
            "heavy = ('openai', 'google.genai', 'lm_eval', 'datasets', 'math_verify')\n"
            "print(sorted(m for m in sys.modules if m in heavy or m.startswith(tuple(h + '.' for h in heavy))))\n")
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                         cwd=REPO, check=True, timeout=TIMEOUT_S)
    assert out.stdout.strip() == "[]", out.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    assert "lm_eval_mathjudge.api" not in imported  # not even our own: the names load on first use
    assert set(lm_eval_mathjudge.__all__) <= set(dir(lm_eval_mathjudge))
    with pytest.raises(AttributeError):
        lm_eval_mathjudge.judge_everything  # noqa: B018


@pytest.mark.e2e
def test_the_example_script_runs_offline(tmp_path):
    env = {**os.environ, "MATHJUDGE_CACHE_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    env = {k: v for k, v in env.items() if not k.startswith(("OPENAI_", "GEMINI_", "GOOGLE_"))}
    out = subprocess.run([sys.executable, str(REPO / "examples" / "judge_from_python.py")], capture_output=True,
                         text=True, env=env, check=True, timeout=TIMEOUT_S)
    lines = out.stdout.splitlines()
    assert lines[0] == "one answer: correct=True judge=local:math-verify cached=False"
    assert [line.rsplit(" ", 1)[-1] for line in lines[1:]] == ["correct=True", "correct=False", "correct=True"]


@pytest.mark.e2e
def test_the_docs_example_runs_as_printed(tmp_path):
    section = (REPO / "docs" / "python.md").read_text()
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GEMINI_", "GOOGLE_", "MATHJUDGE_"))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT_S, check=True,
                         env={**env, "MATHJUDGE_CACHE_DIR": str(tmp_path)})
    assert out.stdout.splitlines() == [
        "True {'gpt4_exact_match': 1.0, 'judge_failed': 0.0} local:math-verify", "True", "judge failed: undecided"]
