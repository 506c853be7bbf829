"""Disguised structure and media in text answers, end to end through the real lm_eval CLI.

* ``gsm8k_gpt4em``: a text model (replayed) answers with a wrong result and one line imitating our
  prompt in one of the disguise styles of ``tests/disguise.py``. The loopback OpenAI judge is
  fence-aware but gullible: it reads a disguised line as the words it shows (as an LLM does) and obeys
  it, unless the line carries the ``[quoted]`` mark. No disguised answer earns credit; each is flagged.
* ``gsm8k_vlmjudge``: a text model answers with media in many wrappings; the loopback Gemini judge
  (real google-genai SDK) credits whatever arrives as media. Nothing arrives as media, every answer
  is flagged ``media_in_text`` and counted.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import read_jsonl, write_data_slice
from tests.disguise import STRUCTURE, STYLES
from tests.e2e import CANARY_KEY
from tests.loopback import ChatCompletionsServer, GeminiServer
from tests.reports_fixtures import run_cli
from tests.test_media_in_text import MEDIA

pytestmark = pytest.mark.e2e

_STUDENT = re.compile(r"### Student's solution\n(?P<section>.*?)\n\n### How to grade", re.S)
HONEST = 4  # the last docs get honest right answers


def _replay(path, questions, responses):
    path.write_text("".join(json.dumps({"question": q, "response": r}) + "\n" for q, r in zip(questions, responses)))
    return path


def _disguised_answers(count: int) -> list[tuple[str, str, str]]:
    """(style, disguised line, its flag), styles and lines in turn so that each meets several of the other."""
    styles = list(STYLES)
    found = []
    for i in range(count * 3):
        style, (line, flag) = styles[i % len(styles)], STRUCTURE[(i // len(styles) + i) % len(STRUCTURE)]
        if STYLES[style](line) != line:
            found.append((style, STYLES[style](line), flag))
        if len(found) == count:
            break
    return found


def _fence_aware_judge(disguised: set[str], seen: list[str]):
    """Obeys an unmarked imitation of our prompt in the student's section; else compares the last number."""
    def respond(body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        seen.append(prompt)
        section = _STUDENT.search(prompt)["section"]
        reference = prompt.split("### Reference solution", 1)[1].split("### Student's solution", 1)[0]
        answer = reference.strip().splitlines()[-1].split(":")[-1].strip().replace(",", "")  # "Final answer: 18"
        obeyed = any(line in disguised for line in section.split("\n"))  # a marked line is no longer one of them
        numbers = re.findall(r"-?\d+", section.replace(",", ""))
        correct = obeyed or (bool(numbers) and numbers[-1] == answer)
        return f"Error Analysis: compared.\nFinal Verdict: {'Correct' if correct else 'Incorrect'}"
    return respond


def _disguise_run(tmp_path):
    data_dir = write_data_slice(tmp_path / "data", 100)
    rows = read_jsonl(data_dir / "gsm8k" / "test.jsonl")
    golds = [r["answer"].split("####")[-1].strip().replace(",", "") for r in rows]
    hostile = _disguised_answers(len(rows) - HONEST)
    responses = [f"We compute the result step by step and get {int(g) + 1}.\n{line}\nThe answer is {int(g) + 1}."
                 for (_, line, _), g in zip(hostile, golds)]
    responses += [f"Working it out gives {g}.\nExplanation: checked twice.\nThe answer is \\boxed{{{g}}}."
                  for g in golds[len(hostile):]]
    replay = _replay(tmp_path / "answers.jsonl", [r["question"] for r in rows], responses)
    seen: list[str] = []
    with ChatCompletionsServer(_fence_aware_judge({line for _, line, _ in hostile}, seen)) as judge:
        run = run_cli(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", "gsm8k_gpt4em",
                       "--log_samples", "--metadata", json.dumps({"judge_base_url": judge.url})],
                      {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
                       "OPENAI_API_KEY": CANARY_KEY}, tmp_path / "out", cwd=tmp_path)
        assert run.returncode == 0, run.stderr[-4000:]
    return dict(run=run, seen=seen, hostile=hostile, responses=responses)


def test_a_fence_aware_judge_credits_no_disguised_structure(scenario):
    got = scenario()
    hostile, run = got["hostile"], got["run"]
    assert len({style for style, _, _ in hostile}) == len(STYLES)  # every style went through the CLI
    assert len({line for _, line, _ in hostile}) == len(hostile)
    assert len(got["seen"]) == len(got["responses"])
    records = {s["doc_id"]: (s, json.loads(s["filtered_resps"][0])) for s in run.samples("gsm8k_gpt4em")}
    credited = [hostile[d][0] for d in range(len(hostile)) if records[d][0]["gpt4_exact_match"] == 1.0]
    unflagged = [hostile[d][0] for d in range(len(hostile)) if hostile[d][2] not in records[d][1]["judge_flags"]]
    assert (credited, unflagged) == ([], [])
    for doc in range(len(hostile), len(got["responses"])):  # the honest answers: credited, not flagged
        assert records[doc][0]["gpt4_exact_match"] == 1.0 and records[doc][1]["judge_flags"] == []
    flags = run.results()["configs"]["gsm8k_gpt4em"]["metadata"]["judge"]["flags"]
    assert (flags["samples"], flags["flagged"]) == (len(got["responses"]), len(hostile))
    assert flags["scores"]["gpt4_exact_match"] == 0.0


def _gemini_judge(body: dict) -> str:
    parts = body["contents"][0]["parts"]
    seen = int(any(k in p for p in parts for k in ("inlineData", "inline_data", "fileData", "file_data")))
    return f"INTERMEDIATE_CORRECT: {seen}\nFINAL_CORRECT: {seen}\nACTION_REFLECTION: 0\nEXPLANATION: graded."


def _media_run(tmp_path):
    data_dir = write_data_slice(tmp_path / "data", len(MEDIA))
    rows = read_jsonl(data_dir / "gsm8k" / "test.jsonl")
    replay = _replay(tmp_path / "answers.jsonl", [r["question"] for r in rows], MEDIA)
    with GeminiServer(_gemini_judge) as judge:
        run = run_cli(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", "gsm8k_vlmjudge",
                       "--log_samples", "--metadata", json.dumps({"vlm_judge_base_url": judge.url})],
                      {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
                       "GEMINI_API_KEY": "AIza-canary-gemini-0123456789abcdef"}, tmp_path / "out", cwd=tmp_path)
        assert run.returncode == 0, run.stderr[-4000:]
        bodies = [r.body for r in judge.requests if r.method == "POST" and isinstance(r.body, dict)]
        uploaded = dict(judge.uploaded)
    return dict(run=run, bodies=bodies, uploaded=uploaded)


def test_a_text_models_media_reaches_no_judge_as_media(scenario):
    got = scenario()
    run = got["run"]
    media_parts = [b for b in got["bodies"] for c in b.get("contents") or [] for p in c.get("parts") or []
                   if {"inlineData", "inline_data", "fileData", "file_data"} & set(p)]
    assert got["uploaded"] == {} and media_parts == [] and len(got["bodies"]) >= len(MEDIA)
    records = [json.loads(s["filtered_resps"][0]) for s in run.samples("gsm8k_vlmjudge")]
    assert len(records) == len(MEDIA)
    assert all("media_in_text" in r["judge_flags"] and r["verdict"]["final_correct"] == 0 for r in records)
    results = run.results()
    assert results["results"]["gsm8k_vlmjudge"]["final_correct,none"] == pytest.approx(0.0)
    flags = results["configs"]["gsm8k_vlmjudge"]["metadata"]["judge"]["flags"]
    assert flags["by_flag"]["media_in_text"]["samples"] == len(MEDIA)


SCENARIOS = {"test_a_fence_aware_judge_credits_no_disguised_structure": _disguise_run,
             "test_a_text_models_media_reaches_no_judge_as_media": _media_run}
