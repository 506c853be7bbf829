"""Judge panels and the cascade through the real lm_eval CLI.

Real GPT-3 solutions to GSM8K are replayed (no model server); the panel is the
offline math-verify judge plus loopback OpenAI-protocol judges, reached through
the real ``openai`` SDK, or judges of three vendors (OpenAI, Gemini, Anthropic)
each through its own SDK. The math-verify judge agrees with the upstream labels
of the replayed file on every sample (tests/test_e2e_gsm8k.py), so each
member's verdict, and each combination, is known in advance. The scenarios run side by
side (tests/e2e.py Scenarios); each test checks its own.
"""

from __future__ import annotations

import itertools
import json

import pytest

from tests._helpers import list_prices
from tests.conftest import SHARED_DATA, read_jsonl
from tests.e2e import CANARY_KEY, run_lm_eval
from tests.loopback import ChatCompletionsServer

pytestmark = pytest.mark.e2e

N = 16
TASK = "gsm8k_gpt4em"
GEMINI_CANARY = "AIza-canary-panel-0123456789abcdef"
ANTHROPIC_CANARY = "sk-ant-canary-panel-0123456789abcdef"
PANEL_LABEL = "panel(majority: local:math-verify, openai:judge-yes, openai:judge-even)"


def _replayed():
    outputs = SHARED_DATA / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl"
    rows = read_jsonl(outputs)[:N]
    return SHARED_DATA, outputs, {r["doc_id"]: bool(r["is_correct"]) for r in rows}, rows


@pytest.fixture
def replayed(shared_data):
    return _replayed()


def _doc_of(body: dict, rows: list[dict]) -> int:
    prompt = body["messages"][-1]["content"]
    problem = prompt.split("### Problem", 1)[1].split("### Reference solution", 1)[0]
    return next(r["doc_id"] for r in rows if r["question"].strip() in problem)


def _verdict(correct: bool) -> str:
    return (f"Error Analysis: The student's final answer {'matches' if correct else 'differs from'} the "
            f"reference answer.\nFinal Verdict: {'Correct' if correct else 'Incorrect'}")


def _judges(rows):
    """judge-yes says Correct to everything; judge-even says Correct to even doc ids only."""
    def respond(body: dict):
        doc = _doc_of(body, rows)
        return _verdict(True if body["model"] == "judge-yes" else doc % 2 == 0)
    return respond


def _run(outputs, data_dir, tmp_path, name, metadata):
    return run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={outputs}", "--tasks", TASK,
                        "--limit", str(N), "--log_samples", "--metadata", json.dumps(metadata)],
                       {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
                        "OPENAI_API_KEY": CANARY_KEY}, tmp_path / name)


def _records(run) -> dict[int, dict]:
    return {s["doc_id"]: {**json.loads(s["filtered_resps"][0]), "_sample": s} for s in run.samples(TASK)}


def _majority_run(tmp_path):
    data_dir, outputs, labels, rows = _replayed()
    with ChatCompletionsServer(_judges(rows), models=["judge-yes", "judge-even"]) as judge:
        metadata = {"judge_base_url": judge.url, "judge_panel": [
            {"backend": "local"}, {"model": "judge-yes"}, {"model": "judge-even"}]}
        run = _run(outputs, data_dir, tmp_path, "out", metadata)
        assert run.returncode == 0, run.stderr[-3000:]
        assert judge.call_count == 2 * N  # each LLM member judged every sample once
        assert {r.body["model"] for r in judge.requests if r.method == "POST"} == {"judge-yes", "judge-even"}
    return tmp_path, run


def test_panel_majority_keeps_every_member_verdict_and_reports_agreement(replayed, scenario):
    _, _, labels, _ = replayed
    tmp_path, run = scenario()
    votes = {d: [labels[d], True, d % 2 == 0] for d in labels}
    expected = {d: sum(v) >= 2 for d, v in votes.items()}
    records = _records(run)
    assert sorted(records) == sorted(labels)
    for doc, record in records.items():
        members = record["panel"]
        assert [m["judge"] for m in members] == ["local:math-verify", "openai:judge-yes", "openai:judge-even"]
        assert [m["verdict"]["correct"] for m in members] == votes[doc]
        assert record["verdict"]["correct"] is expected[doc] and record["judge"] == PANEL_LABEL
        assert record["_sample"]["gpt4_exact_match"] == float(expected[doc])

    results = run.results()
    metrics = results["results"][TASK]
    assert metrics["gpt4_exact_match,none"] == pytest.approx(sum(expected.values()) / N)
    assert metrics["judge_failed,none"] == 0
    judge_meta = results["configs"][TASK]["metadata"]["judge"]
    assert judge_meta["pipeline"] == PANEL_LABEL  # the label the reports show
    assert judge_meta["panel"]["rule"] == "majority" and judge_meta["panel"]["min"] == 2
    assert [m["model"] for m in judge_meta["panel"]["members"]] == ["math-verify", "judge-yes", "judge-even"]
    report = judge_meta["run"]["panel"]["agreement"]["correct"]
    sklearn = pytest.importorskip("sklearn.metrics")
    columns = [[votes[d][i] for d in sorted(votes)] for i in range(3)]
    for pair, (a, b) in zip(report["pairs"], itertools.combinations(columns, 2)):
        assert pair["n"] == N
        assert pair["agreement"] == pytest.approx(sum(x == y for x, y in zip(a, b)) / N)
        if len(set(a)) > 1 and len(set(b)) > 1:
            assert pair["kappa"] == pytest.approx(sklearn.cohen_kappa_score(a, b))
        else:  # judge-yes never varies: kappa with it is 0 (chance explains all agreement)
            assert pair["kappa"] == pytest.approx(0.0)
    assert report["fleiss_n"] == N and report["fleiss_kappa"] is not None
    assert [m["judge_calls"] for m in judge_meta["run"]["panel"]["members"]] == [N, N, N]
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert CANARY_KEY.encode() not in path.read_bytes(), path


def _tie_and_down_runs(tmp_path):
    data_dir, outputs, labels, rows = _replayed()
    with ChatCompletionsServer(_judges(rows), models=["judge-even"]) as judge:
        tie = _run(outputs, data_dir, tmp_path, "tie", {
            "judge_base_url": judge.url, "judge_panel": [{"backend": "local"}, {"model": "judge-even"}]})
        assert tie.returncode == 0, tie.stderr[-3000:]

        judge.inject(status=503, times=N)  # the LLM member is down for the whole run
        down = _run(outputs, data_dir, tmp_path / "down", "out", {
            "judge_base_url": judge.url, "judge_max_retries": 0,
            "judge_panel": [{"backend": "local"}, {"model": "judge-even"}]})
        assert down.returncode == 0, down.stderr[-3000:]
    return tie, down


def test_panel_ties_and_a_member_that_is_down_are_counted_failures(replayed, scenario):
    _, _, labels, _ = replayed
    tie, down = scenario()
    # Two members: agreeing samples are decided, disagreeing ones are ties (never a guess).
    disagree = {d for d in labels if labels[d] != (d % 2 == 0)}
    assert disagree and len(disagree) < N
    records = _records(tie)
    for doc, record in records.items():
        if doc in disagree:
            assert record["failure"] == "panel_tie" and record["judge_failed"] and record["verdict"] is None
            assert record["_sample"]["gpt4_exact_match"] == 0 and record["_sample"]["judge_failed"] == 1
        else:
            assert record["failure"] is None and record["verdict"]["correct"] is labels[doc]
    metrics = tie.results()["results"][TASK]
    assert metrics["judge_failed,none"] == pytest.approx(len(disagree) / N)
    assert tie.results()["configs"][TASK]["metadata"]["judge"]["run"]["failures"] == {"panel_tie": len(disagree)}

    # The LLM member is down: with the default quorum (2 of 2) every sample is a panel_quorum failure,
    # and each record keeps the local member's verdict and the other member's transport failure.
    metrics = down.results()["results"][TASK]
    assert metrics["judge_failed,none"] == 1.0 and metrics["gpt4_exact_match,none"] == 0
    for doc, record in _records(down).items():
        assert record["failure"] == "panel_quorum"
        local, remote = record["panel"]
        assert local["verdict"]["correct"] is labels[doc] and remote["verdict"] is None
        assert remote["failure"] and "503" in remote["error"]
    assert "could not be reached for" in down.stderr


def _min_one_run(tmp_path):
    data_dir, outputs, labels, rows = _replayed()
    with ChatCompletionsServer(_judges(rows), models=["judge-even"]) as judge:
        judge.inject(status=503, times=N)
        return _run(outputs, data_dir, tmp_path, "out", {
            "judge_base_url": judge.url, "judge_max_retries": 0, "judge_panel_min": 1,
            "judge_panel": [{"backend": "local"}, {"model": "judge-even"}]})


def test_panel_min_one_tolerates_a_member_that_is_down(replayed, scenario):
    _, _, labels, _ = replayed
    run = scenario()
    assert run.returncode == 0, run.stderr[-3000:]
    metrics = run.results()["results"][TASK]
    assert metrics["gpt4_exact_match,none"] == pytest.approx(sum(labels.values()) / N)
    assert metrics["judge_failed,none"] == 0


def _cascade_runs(tmp_path):
    data_dir, outputs, labels, rows = _replayed()
    with ChatCompletionsServer(_judges(rows), models=["judge-even"]) as judge:
        run = _run(outputs, data_dir, tmp_path, "out", {"judge_base_url": judge.url, "judge_model": "judge-even",
                                                        "judge_cascade": True})
        assert run.returncode == 0, run.stderr[-3000:]
        asked = sorted(_doc_of(r.body, rows) for r in judge.requests if r.method == "POST")
        rerun = _run(outputs, data_dir, tmp_path, "again", {"judge_base_url": judge.url,
                                                            "judge_model": "judge-even", "judge_cascade": True})
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        assert judge.call_count == len(asked), "the rerun is served from the cache"
    return run, asked


def test_cascade_sends_only_rejected_samples_to_the_llm_judge(replayed, scenario):
    _, _, labels, _ = replayed
    run, asked = scenario()
    rejected = sorted(d for d, ok in labels.items() if not ok)
    assert asked == rejected  # the LLM judge saw exactly the samples the rule did not accept
    expected = {d: ok or d % 2 == 0 for d, ok in labels.items()}
    results = run.results()
    metrics = results["results"][TASK]
    assert metrics["cascade_exact_match,none"] == pytest.approx(sum(expected.values()) / N)
    assert "gpt4_exact_match,none" not in metrics and metrics["judge_failed,none"] == 0
    assert results["configs"][TASK]["metadata"]["judge"]["pipeline"] == "cascade(local:math-verify → openai:judge-even)"
    summary = results["configs"][TASK]["metadata"]["judge"]["run"]["cascade"]
    assert summary["decided_by_rule"] == sum(labels.values()) == summary["llm_requests_saved"]
    assert summary["decided_by_llm"] == len(rejected) == summary["llm"]["judge_calls"]
    for doc, record in _records(run).items():
        assert record["stage"] == ("rule" if labels[doc] else "llm")
        assert record["verdict"]["correct"] is expected[doc]
        assert record["_sample"]["cascade_exact_match"] == float(expected[doc])
        if not labels[doc]:
            assert record["rule"]["verdict"]["correct"] is False and record["judge"] == "openai:judge-even"
    assert "cascade_exact_match" in run.stdout  # lm-eval's own table names the cascade metric


@pytest.mark.parametrize("metadata, message", [
    ({"judge_backend": "local", "judge_cascade": True}, "the judge backend is local"),
    ({"judge_panel": [{"backend": "local"}, {"backend": "local"}]}, "names the same judge twice"),
    ({"judge_panel": [{"backend": "local"}, {"backend": "openai"}], "judge_panel_rule": "most"},
     "judge_panel_rule='most' must be one of majority, unanimous"),
])
def test_bad_panel_or_cascade_settings_are_refused_before_anything_runs(scenario, metadata, message):
    tmp_path, run = scenario()
    assert run.returncode != 0 and message in run.stderr
    assert not list((tmp_path / "out").rglob("results_*.json"))


def _bad_settings_run(tmp_path, metadata, message):
    data_dir, outputs, _, _ = _replayed()
    return tmp_path, _run(outputs, data_dir, tmp_path, "out", metadata)


def _texts(body: dict) -> str:
    parts = []
    for message in body["messages"]:
        content = message["content"]
        parts.extend([content] if isinstance(content, str) else [p.get("text") or "" for p in content])
    return "\n".join(parts)


def _vlm_panel_run(tmp_path):
    data_dir, outputs, labels, rows = _replayed()

    def respond(body: dict) -> str:
        text = _texts(body)
        doc = next(r["doc_id"] for r in rows if r["response"].strip()[:120] in text)
        label, even = int(labels[doc]), int(doc % 2 == 0)
        votes = {"v-a": (label, label, 0), "v-b": (1, even, 1), "v-c": (even, 0, int(doc % 3 == 0))}
        final, inter, action = votes[body["model"]]
        return (f"INTERMEDIATE_CORRECT: {inter}\nFINAL_CORRECT: {final}\nACTION_REFLECTION: {action}\n"
                "EXPLANATION: compared the final answer with the reference solution.")

    with ChatCompletionsServer(respond, models=["v-a", "v-b", "v-c"]) as judge:
        run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={outputs}",
                           "--tasks", "gsm8k_vlmjudge", "--limit", str(N), "--log_samples", "--metadata",
                           json.dumps({"judge_base_url": judge.url, "vlm_judge_panel": [
                               {"backend": "openai", "model": m} for m in ("v-a", "v-b", "v-c")]})],
                          {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
                           "OPENAI_API_KEY": CANARY_KEY}, tmp_path / "out")
        assert run.returncode == 0, run.stderr[-3000:]
        assert judge.call_count == 3 * N
    return run


def test_vlm_panel_takes_the_majority_of_each_score_separately(replayed, scenario):
    _, _, labels, _ = replayed
    run = scenario()
    final = {d: (int(ok) + 1 + (d % 2 == 0)) >= 2 for d, ok in labels.items()}
    inter = {d: ok and d % 2 == 0 for d, ok in labels.items()}
    action = {d: d % 3 == 0 for d in labels}
    metrics = run.results()["results"]["gsm8k_vlmjudge"]
    assert metrics["final_correct,none"] == pytest.approx(sum(final.values()) / N)
    assert metrics["intermediate_correct,none"] == pytest.approx(sum(inter.values()) / N)
    assert metrics["action_reflection,none"] == pytest.approx(sum(action.values()) / N)
    for sample in run.samples("gsm8k_vlmjudge"):
        record, doc = json.loads(sample["filtered_resps"][0]), sample["doc_id"]
        assert [m["judge"] for m in record["panel"]] == ["openai:v-a", "openai:v-b", "openai:v-c"]
        assert record["verdict"]["final_correct"] == int(final[doc])
        assert record["panel"][1]["verdict"]["action_reflection"] == 1
    agreement = run.results()["configs"]["gsm8k_vlmjudge"]["metadata"]["judge"]["run"]["panel"]["agreement"]
    assert set(agreement) == {"intermediate_correct", "final_correct", "action_reflection"}


def _prompt(body: dict) -> str:
    """The judge prompt of a chat-completions, Messages or generateContent request."""
    if "contents" in body:
        return body["contents"][0]["parts"][0]["text"]
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else content[0]["text"]


VENDOR_PANEL = [{"backend": "openai", "model": "judge-yes"}, {"backend": "gemini", "model": "gemini-2.5-pro"},
                {"backend": "anthropic", "model": "claude-sonnet-4-6"}]
# The invented model's price, and the others' list prices: a loopback server stands in for each vendor, and a
# judge served elsewhere than its vendor's own service has no list price unless judge_prices gives one.
PRICE = json.dumps({"judge-yes": {"input": 1.0, "output": 2.0},
                    **json.loads(list_prices("gemini-2.5-pro", "claude-sonnet-4-6"))})
VENDOR_LABEL = "panel(majority: openai:judge-yes, gemini:gemini-2.5-pro, anthropic:claude-sonnet-4-6)"


def _vendor_panel_runs(tmp_path):
    """A panel of three vendors' judges, each through its own SDK and loopback server: judge-yes says Correct,
    Gemini follows the upstream labels, Claude says Correct to even doc ids; then a dry run and a budget."""
    from tests.loopback import AnthropicServer, GeminiServer

    data_dir, outputs, labels, rows = _replayed()

    def verdict_of(rule):
        def respond(body: dict) -> str:
            problem = _prompt(body).split("### Problem", 1)[1].split("### Reference solution", 1)[0]
            return _verdict(rule(next(r["doc_id"] for r in rows if r["question"].strip() in problem)))
        return respond

    with ChatCompletionsServer(verdict_of(lambda d: True), models=["judge-yes"]) as openai_judge, \
            GeminiServer(verdict_of(lambda d: labels[d])) as gemini_judge, \
            AnthropicServer(verdict_of(lambda d: d % 2 == 0), models=["claude-sonnet-4-6"]) as claude:
        urls = [openai_judge.url, gemini_judge.origin, claude.url]
        panel = [{**member, "base_url": url} for member, url in zip(VENDOR_PANEL, urls)]
        env = {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
               "OPENAI_API_KEY": CANARY_KEY, "GEMINI_API_KEY": GEMINI_CANARY, "ANTHROPIC_API_KEY": ANTHROPIC_CANARY}

        def lm_eval(name, **metadata):
            return run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={outputs}", "--tasks", TASK,
                                "--limit", str(N), "--log_samples", "--metadata",
                                json.dumps({"judge_panel": panel, "judge_prices": PRICE, **metadata})], env,
                               tmp_path / name)

        dry, poor = lm_eval("dry", judge_dry_run=True), lm_eval("poor", judge_budget_usd=0.0001)
        def calls_made():
            return [openai_judge.call_count, gemini_judge.generate_calls, claude.call_count]

        sent_before = calls_made()
        run = lm_eval("out")
        calls = calls_made()
        bodies = [r.body for r in claude.requests if r.method == "POST"]
    return tmp_path, dry, poor, sent_before, run, calls, bodies


def test_a_panel_of_openai_gemini_and_anthropic_judges_runs_end_to_end(replayed, scenario):
    _, _, labels, _ = replayed
    tmp_path, dry, poor, sent_before, run, calls, bodies = scenario()
    # The dry run prices all three judges (Claude's row included) and sends nothing; the budget refuses.
    assert dry.returncode == 0 and sent_before == [0, 0, 0], dry.stderr[-3000:]
    assert "anthropic:claude-sonnet-4-6" in dry.stderr and "no price for" not in dry.stderr
    assert poor.returncode != 0 and "the judge estimate is above judge_budget_usd=0.0001" in poor.stderr
    # The run: every member judged every sample once, each through its own SDK.
    assert run.returncode == 0, run.stderr[-3000:]
    assert calls == [N, N, N]
    assert all(b["model"] == "claude-sonnet-4-6" and b["temperature"] == 0 for b in bodies)
    votes = {d: [True, labels[d], d % 2 == 0] for d in labels}
    for doc, record in _records(run).items():
        assert [m["judge"] for m in record["panel"]] == [f"{m['backend']}:{m['model']}" for m in VENDOR_PANEL]
        assert [m["verdict"]["correct"] for m in record["panel"]] == votes[doc]
        assert record["verdict"]["correct"] is (sum(votes[doc]) >= 2) and record["judge"] == VENDOR_LABEL
    judge_meta = run.results()["configs"][TASK]["metadata"]["judge"]
    assert judge_meta["pipeline"] == VENDOR_LABEL
    claude_member = judge_meta["panel"]["members"][2]
    assert claude_member["backend"] == "anthropic" and claude_member["endpoint"].startswith("http://127.0.0.1:")
    claude_cost = judge_meta["cost"]["judges"]["anthropic:claude-sonnet-4-6"]
    assert claude_cost["price"]["input"] == 3.0 and claude_cost["usd"] > 0  # its usage, at the list price given
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(k.encode() in data for k in (CANARY_KEY, GEMINI_CANARY, ANTHROPIC_CANARY)), path


SCENARIOS = {"test_a_panel_of_openai_gemini_and_anthropic_judges_runs_end_to_end": _vendor_panel_runs,
             "test_panel_majority_keeps_every_member_verdict_and_reports_agreement": _majority_run,
             "test_panel_ties_and_a_member_that_is_down_are_counted_failures": _tie_and_down_runs,
             "test_panel_min_one_tolerates_a_member_that_is_down": _min_one_run,
             "test_cascade_sends_only_rejected_samples_to_the_llm_judge": _cascade_runs,
             "test_bad_panel_or_cascade_settings_are_refused_before_anything_runs": _bad_settings_run,
             "test_vlm_panel_takes_the_majority_of_each_score_separately": _vlm_panel_run}
