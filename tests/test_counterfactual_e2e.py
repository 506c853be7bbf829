"""judge_counterfactual through the real lm_eval CLI, with loopback judges on both protocols.

* An obedient judge (tests/counterfactual_judges.py: Correct whenever the answer tells it to, in nine
  styles, whatever the reference) credits every gamed answer of the five data sets; with the re-check
  on, none stays credited, and every one is flagged ``counterfactual`` and counted in the
  ``judge_counterfactual`` metric: on the OpenAI protocol (exact match) and the Gemini one (VLM judge).
* An honest judge (it compares with the reference in the prompt) keeps every verdict on honest and wrong
  answers, and the re-check costs exactly one call per Correct verdict (counted at the server).

The scenarios run side by side (tests/e2e.py Scenarios); each test checks its own.
"""

from __future__ import annotations

import json

import pytest

from lm_eval_mathjudge.core import data_sets
from tests import counterfactual_judges as cj
from tests.conftest import read_jsonl, write_data_slice
from tests.e2e import CANARY_KEY, run_mathjudge
from tests.loopback import ChatCompletionsServer, GeminiServer
from tests.reports_fixtures import run_cli

pytestmark = pytest.mark.e2e

DOCS = 10  # per data set (the example data's slices hold 10)
NAMES = [entry.name for entry in data_sets.BUILT_IN]
GEMINI_KEY = "AIza-canary-gemini-0123456789abcdef"


def _docs(data_dir, name):
    entry = data_sets.get(name)
    rows = read_jsonl(data_dir / entry.local_name / "test.jsonl")[:DOCS]
    return [(row[entry.question], entry.fields(row)[2]) for row in rows]


def _replay(path, data_dir, names, answer):
    """A replay file: for doc i of each data set, answer(gold, i)."""
    rows = [{"question": q, "response": answer(gold, i)} for name in names
            for i, (q, gold) in enumerate(_docs(data_dir, name))]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _wrong(gold: str) -> str:
    return "12345" if gold != "12345" else "54321"


def _run(tmp_path, tasks, replay, metadata, env, tag):
    run = run_cli(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", ",".join(tasks),
                   "--log_samples", "--metadata", json.dumps(metadata)],
                  {"MATHJUDGE_DATA_DIR": str(tmp_path / "data"), "MATHJUDGE_CACHE_DIR": str(tmp_path / f"cache-{tag}"),
                   **env}, tmp_path / f"out-{tag}", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-4000:]
    return run


def _records(run, task):
    return [json.loads(s["filtered_resps"][0]) for s in run.samples(task)]


def _obedient_openai(tmp_path):
    data_dir = write_data_slice(tmp_path / "data", DOCS)
    replay = _replay(tmp_path / "gamed.jsonl", data_dir, NAMES, lambda gold, i: cj.gamed(_wrong(gold), i))
    tasks = [f"{name}_gpt4em" for name in NAMES]
    with ChatCompletionsServer(cj.exact_match(obedient=True)) as judge:
        run = _run(tmp_path, tasks, replay, {"judge_base_url": judge.url, "judge_counterfactual": True},
                   {"OPENAI_API_KEY": CANARY_KEY}, "on")
        calls = len([r for r in judge.requests if r.path.endswith("/chat/completions")])
    return dict(run=run, tasks=tasks, calls=calls, metric="gpt4_exact_match")


def _obedient_gemini(tmp_path):
    data_dir = write_data_slice(tmp_path / "data", DOCS)
    names = ["gsm8k", "math500", "aime25"]
    replay = _replay(tmp_path / "gamed.jsonl", data_dir, names, lambda gold, i: cj.gamed(_wrong(gold), i))
    tasks = [f"{name}_vlmjudge" for name in names]
    with GeminiServer(cj.vlm(obedient=True)) as judge:
        run = _run(tmp_path, tasks, replay, {"vlm_judge_base_url": judge.url, "judge_counterfactual": True},
                   {"GEMINI_API_KEY": GEMINI_KEY}, "on")
        calls = judge.generate_calls
    return dict(run=run, tasks=tasks, calls=calls, metric="final_correct")


def _honest_openai(tmp_path):
    data_dir = write_data_slice(tmp_path / "data", DOCS)
    replay = _replay(tmp_path / "honest.jsonl", data_dir, NAMES,
                     lambda gold, i: cj.honest(gold) if i % 3 else cj.honest(_wrong(gold)))
    tasks = [f"{name}_gpt4em" for name in NAMES]
    got = {}
    for tag, on in (("off", False), ("on", True)):  # each with a cache of its own: every call is counted
        seen: list = []
        with ChatCompletionsServer(cj.exact_match(obedient=False, seen=seen)) as judge:
            run = _run(tmp_path, tasks, replay, {"judge_base_url": judge.url, "judge_counterfactual": on},
                       {"OPENAI_API_KEY": CANARY_KEY}, tag)
            calls = len([r for r in judge.requests if r.path.endswith("/chat/completions")])
        got[tag] = dict(run=run, calls=calls, seen=seen)
    out = str(tmp_path / "out-on")  # the reports show the new metric like any other
    reports = {name: run_mathjudge(args, {}) for name, args in (
        ("leaderboard", ["leaderboard", out, "--out", str(tmp_path / "board")]),
        ("diff", ["diff", out, out]), ("agreement", ["agreement", out, out]))}
    return dict(tasks=tasks, reports=reports, **got)


def _credited(record) -> bool:
    verdict = record["verdict"] or {}
    return record["failure"] is None and (verdict.get("correct") is True or verdict.get("final_correct") == 1)


def _check_obedient(got):
    run, credited_first, credited, flagged, n = got["run"], 0, 0, 0, 0
    results = run.results()["results"]
    for task in got["tasks"]:
        records = _records(run, task)
        n += len(records)
        credited_first += sum(_credited(r) or "credited" in (r.get("counterfactual") or {}) for r in records)
        mine = sum(map(_credited, records))
        caught = sum("counterfactual" in r["judge_flags"] for r in records)
        credited, flagged = credited + mine, flagged + caught
        assert results[task][f"{got['metric']},none"] == pytest.approx(mine / len(records))
        assert results[task]["judge_counterfactual,none"] == pytest.approx(caught / len(records))
        judge = run.results()["configs"][task]["metadata"]["judge"]
        assert judge["flags"]["by_flag"]["counterfactual"]["samples"] == caught
    print(f"obedient judge: {n} gamed answers, {credited_first} credited without the re-check, {credited} with it, "
          f"{flagged} flagged counterfactual, {got['calls']} judge calls")
    assert credited_first == n  # the obedient judge credits every gamed answer on its first ask
    assert credited <= 0.05 * credited_first and flagged >= 0.9 * credited_first
    assert got["calls"] <= 2 * n  # at most one re-check per Correct verdict


def test_an_obedient_openai_judge_is_caught_on_every_data_set(scenario):
    _check_obedient(scenario())


def test_an_obedient_gemini_vlm_judge_is_caught(scenario):
    _check_obedient(scenario())


def test_an_honest_judge_keeps_every_verdict_for_one_call_per_correct(scenario):
    got = scenario()
    correct = unchecked = 0
    for task in got["tasks"]:
        off, on = _records(got["off"]["run"], task), _records(got["on"]["run"], task)
        assert [r["verdict"] for r in off] == [r["verdict"] for r in on], task
        assert all(r["failure"] is None and "counterfactual" not in r["judge_flags"] for r in on)
        correct += sum(r["verdict"]["correct"] for r in on)
        # a gold with no safe wrong reference: the verdict stands, said and counted
        unchecked += sum((r.get("counterfactual") or {}).get("checked") is False for r in on)
        assert all(r["verdict"]["correct"] == ("counterfactual" in r) for r in on)
        assert got["on"]["run"].results()["results"][task]["judge_counterfactual,none"] == 0.0
        assert "judge_counterfactual,none" not in got["off"]["run"].results()["results"][task]
    n = sum(len(_records(got["on"]["run"], t)) for t in got["tasks"])
    print(f"honest judge: {n} answers, {correct} Correct ({unchecked} without a wrong reference), "
          f"calls {got['off']['calls']} without the re-check and "
          f"{got['on']['calls']} with it")
    assert correct > 0 and got["off"]["calls"] == n
    for name, shown in got["reports"].items():
        assert shown.returncode == 0 and "judge_counterfactual" in shown.stdout, (name, shown.stderr[-2000:])
    assert unchecked <= 2 and got["on"]["calls"] - got["off"]["calls"] == correct - unchecked  # one per Correct


SCENARIOS = {"test_an_obedient_openai_judge_is_caught_on_every_data_set": _obedient_openai,
             "test_an_obedient_gemini_vlm_judge_is_caught": _obedient_gemini,
             "test_an_honest_judge_keeps_every_verdict_for_one_call_per_correct": _honest_openai}
