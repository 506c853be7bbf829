"""``mathjudge drift``: two judgings of the same responses (real lm_eval CLI and openai SDK, loopback judges
that report different snapshots and flip known verdicts), the refusal when the responses differ, the exact
McNemar test against SciPy, and the canary that re-judges a seeded sample against a loopback judge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lm_eval_mathjudge.__main__ import main
from lm_eval_mathjudge.core import docs as data
from lm_eval_mathjudge.core import stats
from lm_eval_mathjudge.reports.drift import metric_drift
from tests.conftest import read_jsonl, write_data_slice
from tests.e2e import CANARY_KEY, exact_match_judge, run_lm_eval, run_mathjudge

TASK = "gsm8k_gpt4em"
DOCS = 6
FLIPPED = (0, 1, 2)  # docs judge B grades the other way: 0 and 2 are right (lost), 1 is wrong (gained)
SNAP_A, SNAP_B = "gpt-4o-2024-08-06", "gpt-4o-2024-11-20"


def _flipping(questions: set[str]):
    """A judge that grades like exact_match_judge, except on ``questions``, where it says the opposite."""
    def judge(body: dict) -> str:
        reply = exact_match_judge(body)
        prompt = " ".join(body["messages"][-1]["content"].split())
        if any(question in prompt for question in questions):
            reply = (reply.replace("Final Verdict: Correct", "Final Verdict: X").replace(
                "Final Verdict: Incorrect", "Final Verdict: Correct").replace("Final Verdict: X", "Final Verdict: Incorrect"))
        return reply
    return judge


def _responses(docs: list[dict], changed: tuple[int, ...] = ()) -> list[dict]:
    """Right answers on even docs, wrong (gold + 1) on odd ones; ``changed`` docs get another wrong answer."""
    out = []
    for i, d in enumerate(docs):
        gold = int(data.gsm8k_answer(d["answer"]))
        value = gold if i % 2 == 0 else gold + 1
        if i in changed:
            value = gold + 7
        out.append({"question": d["question"], "response": f"So the answer is \\boxed{{{value}}}"})
    return out


def _judged(tmp: Path, root: Path, name: str, responses: list[dict], judge, snapshot: str) -> Path:
    from tests.loopback import ChatCompletionsServer

    replay = tmp / f"{name}.jsonl"
    replay.write_text("".join(json.dumps(r) + "\n" for r in responses))
    with ChatCompletionsServer(lambda body: {"content": judge(body), "model": snapshot,
                                             "system_fingerprint": f"fp_{name}"}) as server:
        run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", TASK,
                           "--log_samples", "--metadata",
                           json.dumps({"judge_base_url": server.url, "judge_preflight": False,
                                       "judge_model": "gpt-4o"})],
                          {"MATHJUDGE_DATA_DIR": str(root), "MATHJUDGE_CACHE_DIR": str(tmp / f"cache-{name}"),
                           "OPENAI_API_KEY": CANARY_KEY}, tmp / name)
    assert run.returncode == 0, run.stderr[-3000:]
    return tmp / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("drift")
    root = write_data_slice(tmp / "data", DOCS)
    docs = read_jsonl(root / "gsm8k" / "test.jsonl")
    flipped = {" ".join(docs[i]["question"].split()) for i in FLIPPED}
    a = _judged(tmp, root, "a", _responses(docs), exact_match_judge, SNAP_A)
    b = _judged(tmp, root, "b", _responses(docs), _flipping(flipped), SNAP_B)
    c = _judged(tmp, root, "c", _responses(docs, changed=(3, 5)), exact_match_judge, SNAP_A)
    return {"a": a, "b": b, "c": c, "root": root, "docs": docs, "flipped": flipped, "tmp": tmp}


def test_drift_between_two_snapshots_counts_the_three_flipped_verdicts(runs, capsys):
    assert main(["drift", str(runs["a"]), str(runs["b"]), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (task,) = report["tasks"]
    assert task["task"] == TASK and task["responses"] == DOCS and task["only_a"] == task["only_b"] == 0
    assert task["a"]["snapshots"] == [SNAP_A] and task["b"]["snapshots"] == [SNAP_B]
    assert task["a"]["alias"] is True and task["a"]["fingerprints"] == ["fp_a"]
    assert task["a"]["judge"].startswith("openai:gpt-4o")
    metric = {m["metric"]: m for m in task["metrics"]}["gpt4_exact_match"]
    assert (metric["n"], metric["flips"], metric["lost"], metric["gained"]) == (DOCS, 3, 2, 1)
    assert metric["flip_rate"] == pytest.approx(0.5)
    assert (metric["ci_low"], metric["ci_high"]) == pytest.approx(stats.wilson_interval(3, DOCS))
    assert metric["p_value"] == pytest.approx(1.0)  # 2 against 1: no direction
    assert "3 of 6 verdicts flipped" in task["conclusion"] and SNAP_B in task["conclusion"]

    assert main(["drift", str(runs["a"]), str(runs["b"])]) == 0  # the table, and the one-line conclusion
    table = capsys.readouterr().out
    assert f"snapshots {SNAP_A} (alias)" in table and "| gpt4_exact_match | 6 | 3 | 2 | 1 | 0.500 [" in table
    assert "no evidence that the judge credits more or fewer" in table


def test_the_same_judge_twice_shows_no_drift(runs, capsys):
    assert main(["drift", str(runs["a"]), str(runs["a"]), "--json"]) == 0
    (task,) = json.loads(capsys.readouterr().out)["tasks"]
    assert {m["metric"]: m["flips"] for m in task["metrics"]}["gpt4_exact_match"] == 0
    assert "no sign of judge drift" in task["conclusion"] and f"both judged by {SNAP_A}" in task["conclusion"]


def test_runs_of_different_responses_are_refused_as_a_model_diff(runs, capsys):
    assert main(["drift", str(runs["a"]), str(runs["c"])]) == 2
    err = capsys.readouterr().err
    assert "2 of 6 responses differ" in err and "mathjudge diff" in err and "not judge drift" in err
    assert main(["drift", str(runs["a"])]) == 2  # neither a second run nor --canary
    assert "--canary" in capsys.readouterr().err


@pytest.mark.parametrize("lost, gained", [(0, 0), (2, 1), (0, 6), (3, 12), (25, 5), (40, 41), (1, 150)])
def test_mcnemar_exact_is_scipys_two_sided_binomial_test(lost, gained):
    from scipy.stats import binomtest

    pairs = [(1.0, 0.0)] * lost + [(0.0, 1.0)] * gained + [(1.0, 1.0)] * 7 + [(0.0, 0.0)] * 4
    found = metric_drift("gpt4_exact_match,none", pairs)
    assert (found.lost, found.gained, found.n) == (lost, gained, len(pairs))
    expected = 1.0 if lost + gained == 0 else binomtest(lost, lost + gained, 0.5).pvalue
    assert found.p_value == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_the_canary_rejudges_a_seeded_sample_against_a_judge_that_now_differs(runs):
    from tests.loopback import ChatCompletionsServer

    with ChatCompletionsServer(lambda body: {"content": _flipping(runs["flipped"])(body), "model": SNAP_B}) as server:
        args = ["drift", "--canary", str(runs["a"]), "--n", str(DOCS), "--seed", "3", "--json", "--metadata",
                json.dumps({"judge_base_url": server.url, "judge_preflight": False, "judge_model": "gpt-4o"})]
        env = {"MATHJUDGE_DATA_DIR": str(runs["root"]), "MATHJUDGE_CACHE_DIR": str(runs["tmp"] / "cache-a"),
               "OPENAI_API_KEY": CANARY_KEY}
        proc = run_mathjudge(args, env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert server.call_count == DOCS  # asked now: the cache of run A was not read
        report = json.loads(proc.stdout[proc.stdout.index("{"):])
        (task,) = report["tasks"]
        metric = {m["metric"]: m for m in task["metrics"]}["gpt4_exact_match"]
        assert (metric["flips"], metric["lost"], metric["gained"]) == (3, 2, 1)
        assert task["a"]["snapshots"] == [SNAP_A] and task["b"]["snapshots"] == [SNAP_B]
        assert task["b"]["run"].endswith("(canary)") and report["seed"] == 3

        small = run_mathjudge([*args[:4], "2", *args[5:]], env)  # a sample of 2 docs, the same for the same seed
        again = run_mathjudge([*args[:4], "2", *args[5:]], env)
        first, second = (json.loads(p.stdout[p.stdout.index("{"):])["tasks"][0] for p in (small, again))
        assert first["responses"] == second["responses"] == 2 and first["metrics"] == second["metrics"]
