"""``mathjudge drift``: two judgings of the same responses (real lm_eval CLI and openai SDK, loopback judges
that report different snapshots and flip known verdicts), the refusal when the responses differ, sides judged
by different judges said to be a judge comparison, the exact McNemar test against SciPy, k samples per problem
counted by problem, and the canary that re-judges a seeded sample with the judge the run recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lm_eval_mathjudge.__main__ import main
from lm_eval_mathjudge.core.data_sets import gsm8k_answer
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


def _responses(docs: list[dict], changed: tuple[int, ...] = (), k: int = 1) -> list[dict]:
    """Right answers on even docs, wrong (gold + 1) on odd ones; ``changed`` docs get another wrong answer.
    With ``k`` samples per problem, k differently worded answers of the same value."""
    out = []
    for i, d in enumerate(docs):
        gold = int(gsm8k_answer(d["answer"]))
        value = gold if i % 2 == 0 else gold + 1
        if i in changed:
            value = gold + 7
        texts = [f"{'Working it through, ' * j}so the answer is \\boxed{{{value}}}" for j in range(k)]
        out.append({"question": d["question"], **({"response": texts[0]} if k == 1 else {"responses": texts})})
    return out


def _judged(tmp: Path, root: Path, name: str, responses: list[dict], judge, snapshot: str,
            model: str = "gpt-4o", k: int = 1) -> Path:
    from tests.loopback import ChatCompletionsServer

    replay = tmp / f"{name}.jsonl"
    replay.write_text("".join(json.dumps(r) + "\n" for r in responses))
    with ChatCompletionsServer(lambda body: {"content": judge(body), "model": snapshot,
                                             "system_fingerprint": f"fp_{name}"}) as server:
        run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", TASK,
                           "--log_samples", "--metadata",
                           json.dumps({"judge_base_url": server.url, "judge_preflight": False,
                                       "judge_model": model, **({"repeats": k} if k > 1 else {})})],
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
    d = _judged(tmp, root, "d", _responses(docs), _flipping(flipped), "gpt-4o-mini-2024-07-18", model="gpt-4o-mini")
    return {"a": a, "b": b, "c": c, "d": d, "root": root, "docs": docs, "flipped": flipped, "tmp": tmp}


@pytest.mark.e2e
def test_drift_between_two_snapshots_counts_the_three_flipped_verdicts(runs, capsys):
    assert main(["drift", str(runs["a"]), str(runs["b"]), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (task,) = report["tasks"]
    assert task["task"] == TASK and task["responses"] == DOCS and task["only_a"] == task["only_b"] == 0
    assert task["a"]["snapshots"] == [SNAP_A] and task["b"]["snapshots"] == [SNAP_B]
    assert task["a"]["alias"] is True and task["a"]["fingerprints"] == ["fp_a"]
    assert task["a"]["judge"].startswith("openai:gpt-4o") and task["same_judge"] is True and report["same_judge"]
    assert task["judge_changes"] == {} and task["k"] == 1
    metric = {m["metric"]: m for m in task["metrics"]}["gpt4_exact_match"]
    assert (metric["n"], metric["flips"], metric["lost"], metric["gained"]) == (DOCS, 3, 2, 1)
    assert metric["flip_rate"] == pytest.approx(0.5)
    assert (metric["ci_low"], metric["ci_high"]) == pytest.approx(stats.wilson_interval(3, DOCS))
    assert metric["p_value"] == pytest.approx(1.0)  # 2 against 1: no direction
    assert metric["test"] == "mcnemar_exact" and metric["docs"] == DOCS
    assert "3 of 6 verdicts flipped" in task["conclusion"] and SNAP_B in task["conclusion"]

    assert main(["drift", str(runs["a"]), str(runs["b"])]) == 0  # the table, and the one-line conclusion
    table = capsys.readouterr().out
    assert f"snapshots {SNAP_A} (alias)" in table and "| gpt4_exact_match | 6 | 3 | 2 | 1 | 0.500 [" in table
    assert "no evidence that the judge credits more or fewer" in table and "DIFFERENT JUDGES" not in table


@pytest.mark.e2e
def test_two_different_judges_are_said_to_be_a_judge_comparison_not_drift(runs, capsys):
    """gpt-4o against gpt-4o-mini on the same responses: their differences are two judges', not drift."""
    assert main(["drift", str(runs["a"]), str(runs["d"]), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (task,) = report["tasks"]
    assert report["same_judge"] is False and task["same_judge"] is False
    assert task["a"]["judge"].startswith("openai:gpt-4o @") and task["b"]["judge"].startswith("openai:gpt-4o-mini @")
    assert task["conclusion"].startswith(f"{TASK}: DIFFERENT JUDGES: A openai:gpt-4o @")
    assert "mathjudge agreement" in task["conclusion"] and "3 of 6 verdicts flipped" in task["conclusion"]
    assert main(["drift", str(runs["a"]), str(runs["d"])]) == 0
    table = capsys.readouterr().out
    assert "**DIFFERENT JUDGES** (openai:gpt-4o @" in table and "`mathjudge agreement A B`" in table


@pytest.mark.e2e
def test_the_same_judge_twice_shows_no_drift(runs, capsys):
    assert main(["drift", str(runs["a"]), str(runs["a"]), "--json"]) == 0
    (task,) = json.loads(capsys.readouterr().out)["tasks"]
    assert {m["metric"]: m["flips"] for m in task["metrics"]}["gpt4_exact_match"] == 0
    assert "no sign of judge drift" in task["conclusion"] and f"both judged by {SNAP_A}" in task["conclusion"]


@pytest.mark.e2e
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


@pytest.mark.parametrize("docs", [
    # (lost, gained, unchanged) per problem, 4 samples each
    [(4, 0, 0), (4, 0, 0), (0, 4, 0), (0, 0, 4), (0, 0, 4), (0, 0, 4)],  # whole problems flip: 3 units, not 12
    [(1, 0, 3), (1, 0, 3), (2, 0, 2), (1, 1, 2), (1, 0, 3), (2, 0, 2), (0, 0, 4), (1, 0, 3)],  # spread out
    [(3, 0, 1), (0, 0, 4), (0, 2, 2), (4, 0, 0), (1, 0, 3), (0, 0, 4), (2, 1, 1), (0, 0, 4), (3, 0, 1), (1, 0, 3),
     (0, 0, 4), (2, 0, 2), (0, 1, 3), (4, 0, 0), (1, 0, 3), (0, 0, 4), (2, 0, 2), (3, 0, 1)],  # 18 problems
])
def test_with_k_samples_the_interval_and_the_test_count_problems(docs):
    """Pairs of one problem are not independent: a sign-flip permutation test of the per-problem net flips
    (SciPy's exact test) and a Wilson interval on the design effect's sample size."""
    import numpy as np

    scipy = pytest.importorskip("scipy.stats")
    pairs = [pair for d, (lost, gained, same) in enumerate(docs)
             for pair in [(1.0, 0.0, d)] * lost + [(0.0, 1.0, d)] * gained + [(1.0, 1.0, d)] * same]
    found = metric_drift("verdict.correct", pairs, clustered=True)
    assert (found.n, found.docs, found.lost, found.gained) == (len(pairs), len(docs), *map(sum, list(zip(*docs))[:2]))
    assert found.test == "paired_permutation_by_problem"
    credited_a = np.array([lost + same for lost, _, same in docs], dtype=float)
    credited_b = np.array([gained + same for _, gained, same in docs], dtype=float)
    exact = scipy.permutation_test((credited_a, credited_b), lambda x, y, axis: np.mean(x - y, axis=axis),
                                   permutation_type="samples", n_resamples=10**6).pvalue
    assert found.p_value == pytest.approx(exact, rel=0.05 if len(docs) > 16 else 1e-9)
    naive = stats.wilson_interval(found.flips, found.n)
    assert found.ci_low <= naive[0] and found.ci_high >= naive[1]  # never narrower than counting samples
    if all(lost + gained in (0, 4) for lost, gained, _ in docs):  # whole problems flip: one unit per problem
        assert (found.ci_low, found.ci_high) == pytest.approx(
            stats.wilson_interval(sum(lost + gained > 0 for lost, gained, _ in docs), len(docs)))


@pytest.mark.e2e
def test_drift_with_k_samples_per_problem_counts_problems(runs, tmp_path, capsys):
    """4 samples per problem, the 3 flipped problems flipping whole: 12 of 24 verdicts, but 3 of 6 problems."""
    k = 4
    a = _judged(tmp_path, runs["root"], "ka", _responses(runs["docs"], k=k), exact_match_judge, SNAP_A, k=k)
    b = _judged(tmp_path, runs["root"], "kb", _responses(runs["docs"], k=k), _flipping(runs["flipped"]), SNAP_B, k=k)
    assert main(["drift", str(a), str(b), "--json"]) == 0
    (task,) = json.loads(capsys.readouterr().out)["tasks"]
    assert task["k"] == k and task["responses"] == DOCS * k
    metric = {m["metric"]: m for m in task["metrics"]}["verdict.correct"]
    assert (metric["n"], metric["docs"], metric["flips"], metric["lost"], metric["gained"]) == (24, 6, 12, 8, 4)
    assert (metric["ci_low"], metric["ci_high"]) == pytest.approx(stats.wilson_interval(3, DOCS))
    assert metric["p_value"] == pytest.approx(1.0)  # +4, +4, -4 over problems: every sign pattern is as extreme
    assert stats.mcnemar_exact(8, 4) < 0.4  # what counting samples as independent would have said
    assert "over 6 problems" in task["conclusion"]
    assert main(["drift", str(a), str(b)]) == 0
    assert "4 samples per problem: the interval and the test count problems" in capsys.readouterr().out


@pytest.mark.e2e
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


@pytest.mark.e2e
def test_the_canary_judges_with_the_judge_the_run_recorded_unless_told_otherwise(runs):
    """Run A was judged by gpt-4o; the canary must not fall back to the default judge model."""
    from tests.loopback import ChatCompletionsServer

    asked: list[str] = []

    def judge(body: dict) -> dict:
        asked.append(body["model"])
        return {"content": exact_match_judge(body), "model": SNAP_A}

    env = {"MATHJUDGE_DATA_DIR": str(runs["root"]), "MATHJUDGE_CACHE_DIR": str(runs["tmp"] / "cache-canary"),
           "OPENAI_API_KEY": CANARY_KEY}
    with ChatCompletionsServer(judge) as server:
        base = ["drift", "--canary", str(runs["a"]), "--n", "3", "--json"]
        where = {"judge_base_url": server.url, "judge_preflight": False}
        cases = [  # extra arguments, the model asked, same judge, decoding changes
            ([], "gpt-4o", True, {}),
            (["--judge", "openai:gpt-4o-mini"], "gpt-4o-mini", False, {}),
            ([], "gpt-4o", True, {"temperature": [0.0, 0.5]}),
        ]
        for extra, model, same, changes in cases:
            asked.clear()
            metadata = {**where, **({"judge_temperature": 0.5} if changes else {})}
            proc = run_mathjudge([*base, "--metadata", json.dumps(metadata), *extra], env)
            assert proc.returncode == 0, proc.stderr[-3000:]
            (task,) = json.loads(proc.stdout[proc.stdout.index("{"):])["tasks"]
            assert asked and set(asked) == {model}
            assert task["same_judge"] is same and task["judge_changes"] == changes
            assert ("DIFFERENT JUDGES" in task["conclusion"]) is not same
            assert ("the judge settings differ too (temperature 0.0 vs 0.5)" in task["conclusion"]) is bool(changes)


def test_the_recorded_judge_is_read_back_as_settings():
    from lm_eval_mathjudge.reports.drift import recorded_judge
    from lm_eval_mathjudge.reports.runs import TaskResult

    def result(judge: dict) -> TaskResult:
        return TaskResult(TASK, {}, {}, None, judge, "", "", None, False, 0.0)

    single = {"name": "exact_match", "backend": "gemini", "model": "gemini-2.5-pro", "temperature": 0.0,
              "max_tokens": 8192, "thinking_budget": 128, "reasoning_effort": None, "base_url": "http://x",
              "concurrency": 64, "prompt_version": "exact_match-v3", "dedupe": "answer"}  # an earlier run's
    # judge_dedupe is retired: a canary judges every sample on its own, whatever the run recorded
    assert recorded_judge(result(single)) == {"judge_backend": "gemini", "judge_model": "gemini-2.5-pro",
                                              "judge_temperature": 0.0, "judge_max_tokens": 8192,
                                              "judge_thinking_budget": 128}
    panel = {**single, "backend": "openai", "model": "gpt-4o", "thinking_budget": None,
             "panel": {"rule": "unanimous", "min": 3, "members": [
                 {"backend": "local", "model": "math-verify", "temperature": 0.0, "max_tokens": 1024},
                 {"backend": "openai", "model": "gpt-4o-2024-08-06", "temperature": 0.0, "max_tokens": 2048},
                 {"backend": "gemini", "model": "gemini-1.5-pro-002", "temperature": 0.0, "max_tokens": 8192}]}}
    found = recorded_judge(result(panel))
    assert found["judge_panel"][1] == {"backend": "openai", "model": "gpt-4o-2024-08-06", "temperature": 0.0,
                                       "max_tokens": 2048}
    assert (found["judge_panel_rule"], found["judge_panel_min"]) == ("unanimous", 3)
    cascade = {**single, "cascade": {"rule": {"backend": "local"}, "llm": {"backend": "openai"}}}
    assert recorded_judge(result(cascade))["judge_cascade"] is True


@pytest.mark.parametrize("a, b, changes", [
    ({"dedupe": "off"}, {}, {}),  # an earlier run's "off" is how every run judges now
    ({}, {"dedupe": "off"}, {}),
    ({"dedupe": "answer"}, {}, {"dedupe": ["answer", None]}),  # it shared verdicts: a real difference
    ({"dedupe": "off", "temperature": 0.0}, {"temperature": 0.5}, {"temperature": [0.0, 0.5]}),
])
def test_a_retired_setting_at_its_old_default_is_no_judge_change(a, b, changes):
    from lm_eval_mathjudge.reports.drift import judge_changes

    assert judge_changes(a, b) == changes
