"""`mathjudge audit` and `judge_audit=true`, end to end.

The judges are loopback servers speaking the real wire protocols, reached through the real
`openai` and `google-genai` SDKs, and gullible in scripted ways (tests/loopback/scripted.py):
`gullible` credits every master key and fake verdict, half of the hedges and forged references
(by a stable key of the answer), refuses injections and multi-answers, garbles its reply to
truncated answers, and grades the controls honestly. Knowing the script answer by answer, each
test checks that the audit measures exactly the scripted rates, intervals, failures and calls.
The local judge is audited offline and checked against the same backend called directly; a
panel and a cascade combine both. The scenarios run side by side (tests/e2e.py Scenarios).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from lm_eval_mathjudge.backends.local import LocalBackend
from lm_eval_mathjudge.core import counterfactual
from lm_eval_mathjudge.core.prompts import neutralise
from lm_eval_mathjudge.core.stats import wilson_interval
from tests.conftest import SHARED_DATA, read_jsonl
from tests._helpers import rule_outcome
from tests.e2e import _INHERITED_PREFIXES, CANARY_KEY, TIMEOUT_S, fenced, run_lm_eval
from tests.loopback import ChatCompletionsServer, GeminiServer
from tests.loopback.openai_batch_server import OpenAIBatchServer
from tests.loopback.scripted import REPLIES, ScriptedJudge, battery_items, request_text, task_docs

pytestmark = pytest.mark.e2e

MATHJUDGE = str(Path(sys.executable).with_name("mathjudge"))
GEMINI_CANARY = "AIza-canary-0c4f7e19b2d84a6b"
DATA = str(SHARED_DATA)


def stable(item) -> bool:
    """Half of the answers, decided by the answer's text alone (the same in every process)."""
    return hashlib.sha256(item.response.encode()).digest()[0] % 2 == 0


def gullible(item) -> str:
    if item.family in ("master_key", "fake_verdict", "control_right"):
        return "credit"
    if item.family in ("hedge", "forged_reference"):
        return "credit" if stable(item) else "refuse"
    if item.family == "truncated":
        return "garble"
    return "refuse"  # injection, multi_answer, control_wrong


def credulous(item) -> str:
    return "credit"


def _rechecks(items, outcome) -> int:
    """The counterfactual re-checks mathjudge audit makes: one per credited answer with a wrong reference."""
    return sum(outcome(i) == "credit" and counterfactual.wrong_doc(i.doc)[0] is not None for i in items)


def _mathjudge(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(_INHERITED_PREFIXES)}
    return subprocess.run([MATHJUDGE, "audit", *args], capture_output=True, text=True, timeout=TIMEOUT_S,
                          env={**clean, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "MATHJUDGE_DATA_DIR": DATA,
                               **env})


def _key(item) -> tuple:
    return (item.task, item.family, item.template, item.doc_index)


def _expect(items, outcome) -> dict[str, dict[str, dict]]:
    """task -> family -> the block the report must hold, from ``outcome(item)``: credit, refuse or fail:<kind>."""
    blocks: dict[str, dict[str, dict]] = {}
    for task in dict.fromkeys(i.task for i in items):
        for family in dict.fromkeys(i.family for i in items if i.task == task):
            mine = [outcome(i) for i in items if i.task == task and i.family == family]
            kind = next(i.kind for i in items if i.family == family)
            credited, refused = mine.count("credit"), mine.count("refuse")
            k = refused if kind == "wrong" else credited
            rate = "accuracy" if kind != "attack" else "false_positive_rate"
            failures = Counter(o.split(":", 1)[1] for o in mine if o.startswith("fail:"))
            blocks.setdefault(task, {})[family] = {
                "kind": kind, "n": len(mine), "k": k, rate: k / len(mine), "ci95": list(wilson_interval(k, len(mine))),
                "credited": credited, "failed": sum(failures.values()), "failures": dict(failures)}
    return blocks


def _scripted(decide):
    return lambda item: {"garble": "fail:unparseable"}.get(decide(item), decide(item))


def _local_verdicts(items) -> dict[tuple, str]:
    """The local judge's outcome on each answer, asked directly (not through the audit): credit, refuse, or
    fail:undecided (the rule cannot tell: a counted failure, no vote in a panel, the LLM's call in a cascade)."""
    backend = LocalBackend(workers=2)
    outcomes = {"correct": "credit", "incorrect": "refuse", "undecided": "fail:undecided"}
    try:
        return {_key(i): outcomes[rule_outcome(backend, i.doc["mj_answer"], i.response).outcome] for i in items}
    finally:
        backend.close()


def _check(report: dict, items, outcome) -> None:
    for task, families in _expect(items, outcome).items():
        assert report["tasks"][task]["families"] == families, task
    expected_fp = sum(outcome(i) == "credit" for i in items if i.kind == "attack")
    attacks = sum(i.kind == "attack" for i in items)
    assert report["overall"]["attacks"] == {"n": attacks, "k": expected_fp,
                                            "false_positive_rate": expected_fp / attacks,
                                            "ci95": list(wilson_interval(expected_fp, attacks))}
    if "items" in report:  # the command's report lists every answer, in the battery's order
        assert [(d["task"], d["family"], d["template"], d["doc_index"]) for d in report["items"]] == [
            _key(i) for i in items]
        assert [d["credited"] for d in report["items"]] == [outcome(i) == "credit" for i in items]


# ------------------------------------------------------------------------------------------ openai
def _openai_runs(tmp_path):
    items = [*battery_items(DATA, "gsm8k_gpt4em", 6), *battery_items(DATA, "math500_gpt4em", 6)]
    judge = ScriptedJudge(items, gullible)
    env = {"MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": CANARY_KEY}
    with ChatCompletionsServer(judge, models=["gullible-judge"]) as server:
        args = ["--tasks", "gsm8k_gpt4em,math500_gpt4em", "--limit", "6", "--judge", "openai:gullible-judge",
                "--metadata", json.dumps({"judge_base_url": server.url})]
        first = _mathjudge([*args, "--output", str(tmp_path / "audit.json")], env)
        calls = server.call_count
        answered = Counter(judge.answered)
        rerun = _mathjudge([*args, "--json", "--max-false-positive", "1"], env)
        above = _mathjudge([*args, "--max-false-positive", "0.5"], env)
        assert server.call_count == calls, "the reruns are served from the cache"
        sent = [r for r in server.requests if r.method == "POST"]
    return items, first, json.loads((tmp_path / "audit.json").read_text()), rerun, above, calls, answered, sent


def test_the_audit_measures_exactly_the_scripted_rates_through_the_openai_sdk(scenario):
    items, first, report, rerun, above, calls, answered, sent = scenario()
    assert first.returncode == 0, first.stderr[-3000:]
    _check(report, items, _scripted(gullible))
    families = report["tasks"]["gsm8k_gpt4em"]["families"]
    assert families["master_key"]["false_positive_rate"] == families["fake_verdict"]["false_positive_rate"] == 1.0
    assert families["injection"]["false_positive_rate"] == families["multi_answer"]["false_positive_rate"] == 0.0
    assert families["truncated"]["failures"] == {"unparseable": families["truncated"]["n"]}
    assert families["control_right"]["accuracy"] == families["control_wrong"]["accuracy"] == 1.0
    # Every answer was sent once; a garbled reply was asked once more (the client's re-ask), and that is all.
    truncated = [i for i in items if i.family == "truncated"]
    assert answered == Counter({_key(i): 2 if i.family == "truncated" else 1 for i in items})
    # mathjudge audit re-checks each credit once against a wrong reference (judge_counterfactual)
    assert calls == len(items) + len(truncated) + _rechecks(items, _scripted(gullible))
    assert {r.body["model"] for r in sent} == {"gullible-judge"}
    assert all(r.headers.get("authorization") == f"Bearer {CANARY_KEY}" for r in sent)
    assert report["cost"]["total"]["calls"] == calls and report["battery"]["version"] == 2
    assert report["overall"]["judges"] == ["openai:gullible-judge"]
    # The tables print what the JSON holds, and the cost table the calls.
    # each rate without the counterfactual re-check, and with it: the gullible judge credits master keys against
    # any reference, so the re-check withholds every one of those credits
    assert "| master_key | 6 | 6 | 1.000 [0.610, 1.000] | 0.000 [0.000, 0.390] | 0 |" in first.stdout
    assert "false-positive rate [95% CI] | with re-check [95% CI] |" in first.stdout
    assert "audit:gsm8k_gpt4em" in first.stderr and "audit:math500_gpt4em" in first.stderr
    # A rerun pays nothing and measures the same; the threshold decides the exit code.
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    again = json.loads(rerun.stdout)
    assert again["tasks"] == report["tasks"] and again["overall"] == report["overall"]
    assert again["cost"]["total"]["calls"] == 0
    assert again["cost"]["total"]["cached"] == len(items) + _rechecks(items, _scripted(gullible))
    assert above.returncode == 1, above.stderr[-3000:]
    assert "false-positive rate above 0.5" in above.stderr and "gsm8k_gpt4em master_key 1.000" in above.stderr
    assert CANARY_KEY not in first.stdout + first.stderr + json.dumps(report)


# ------------------------------------------------------------------------------------------ gemini
def _gemini_run(tmp_path):
    items = battery_items(DATA, "gsm8k_vlmjudge", 5)
    judge = ScriptedJudge(items, gullible, contract="vlm")
    with GeminiServer(judge) as server:
        run = _mathjudge(["--tasks", "gsm8k_vlmjudge", "--limit", "5", "--judge", "gemini", "--json",
                          "--metadata", json.dumps({"judge_base_url": server.url})],
                         {"MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"), "GEMINI_API_KEY": GEMINI_CANARY})
        bodies = [r.body for r in server.requests if r.method == "POST" and "generateContent" in r.path]
    return items, run, bodies


def test_the_audit_of_a_gemini_vlm_judge_measures_the_scripted_rates(scenario):
    items, run, bodies = scenario()
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout)
    _check(report, items, _scripted(gullible))
    assert report["tasks"]["gsm8k_vlmjudge"]["metric"] == "final_correct"
    truncated = sum(i.family == "truncated" for i in items)
    assert len(bodies) == len(items) + truncated + _rechecks(items, _scripted(gullible))
    # The VLM judge reads the answer as its own text part, after the prompt, as in a run.
    sent = {fenced(b["contents"][0]["parts"][1]["text"]) for b in bodies}  # the fenced answer part
    assert {neutralise(i.response) for i in items} <= sent


# ------------------------------------------------------------------------------------------ local, offline
def _local_run(tmp_path):
    items = [*battery_items(DATA, "gsm8k_gpt4em", 8), *battery_items(DATA, "aime25_gpt4em", 8)]
    run = _mathjudge(["--tasks", "gsm8k_gpt4em,aime25_gpt4em", "--limit", "8", "--judge", "local",
                      "--output", str(tmp_path / "audit.json")], {"MATHJUDGE_CACHE_DIR": str(tmp_path / "cache")})
    report = json.loads((tmp_path / "audit.json").read_text()) if run.returncode == 0 else None
    return items, run, report, _local_verdicts(items)


@pytest.mark.e2e_versions  # the command loads tasks through lm-eval's TaskManager, which differs by version
def test_the_local_judge_is_audited_offline_and_measured_as_it_judges(scenario):
    items, run, report, local = scenario()
    assert run.returncode == 0, run.stderr[-3000:]
    _check(report, items, lambda i: local[_key(i)])
    for task in ("gsm8k_gpt4em", "aime25_gpt4em"):
        families = report["tasks"][task]["families"]
        # Answers that hold no gold answer are never credited by a rule that compares final answers.
        assert all(families[f]["credited"] == 0 for f in
                   ("master_key", "fake_verdict", "injection", "forged_reference", "truncated"))
        assert families["control_right"]["accuracy"] == families["control_wrong"]["accuracy"] == 1.0
    assert report["overall"]["judges"] == ["local:math-verify"] and report["cost"]["total"]["usd"] == 0


# ------------------------------------------------------------------------------------------ panel and cascade
def _two_judges(items):
    scripted = {"gullible-judge": ScriptedJudge(items, gullible), "credulous-judge": ScriptedJudge(items, credulous)}
    return scripted, lambda body: scripted[body["model"]](body)


def _combined_run(tmp_path, metadata_of):
    items = battery_items(DATA, "gsm8k_gpt4em", 6)
    scripted, respond = _two_judges(items)
    with ChatCompletionsServer(respond, models=list(scripted)) as server:
        run = _mathjudge(["--tasks", "gsm8k_gpt4em", "--limit", "6", "--json",
                          "--metadata", json.dumps(metadata_of(server.url))],
                         {"MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": CANARY_KEY})
    return items, run, {name: Counter(j.answered) for name, j in scripted.items()}, _local_verdicts(items)


def _panel_run(tmp_path):
    return _combined_run(tmp_path, lambda url: {"judge_base_url": url, "judge_panel": [
        {"backend": "local"}, {"model": "gullible-judge"}, {"model": "credulous-judge"}]})


def test_a_panel_is_audited_as_its_majority_decides(scenario):
    items, run, answered, local = scenario()
    assert run.returncode == 0, run.stderr[-3000:]

    def majority(item) -> str:  # a member without a verdict does not vote; a strict majority of 3 must vote
        mine = [] if local[_key(item)].startswith("fail:") else [local[_key(item)] == "credit"]
        votes = mine + [True] + ([] if gullible(item) == "garble" else [gullible(item) == "credit"])
        if len(votes) < 2:
            return "fail:panel_quorum"
        if 2 * votes.count(True) > len(votes):
            return "credit"
        return "refuse" if 2 * votes.count(False) > len(votes) else "fail:panel_tie"
    report = json.loads(run.stdout)
    _check(report, items, majority)
    assert report["overall"]["judges"] == [
        "panel(majority: local:math-verify, openai:gullible-judge, openai:credulous-judge)"]
    assert set(answered["credulous-judge"]) == {_key(i) for i in items}  # every member judged every answer
    assert report["tasks"]["gsm8k_gpt4em"]["families"]["truncated"]["failures"] == dict(Counter(
        majority(i).split(":")[1] for i in items if i.family == "truncated" and majority(i).startswith("fail:")))


def _cascade_run(tmp_path):
    return _combined_run(tmp_path, lambda url: {"judge_base_url": url, "judge_model": "gullible-judge",
                                                "judge_cascade": True})


def test_a_cascade_is_audited_with_what_its_rule_stage_credits(scenario):
    items, run, answered, local = scenario()
    assert run.returncode == 0, run.stderr[-3000:]

    def cascade(item) -> str:
        if local[_key(item)] == "credit":
            return "credit"  # decided by the rule stage, never sent to the LLM judge
        return _scripted(gullible)(item)
    report = json.loads(run.stdout)
    _check(report, items, cascade)
    assert set(answered["gullible-judge"]) == {_key(i) for i in items if local[_key(i)] != "credit"}
    assert not answered["credulous-judge"]
    assert report["overall"]["judges"] == ["cascade(local:math-verify → openai:gullible-judge)"]


# ------------------------------------------------------------------------------------------ batch mode
def _batch_run(tmp_path):
    items = battery_items(DATA, "gsm8k_gpt4em", 4)
    judge = ScriptedJudge(items, gullible)
    with OpenAIBatchServer(judge) as server:
        run = _mathjudge(["--tasks", "gsm8k_gpt4em", "--limit", "4", "--json", "--metadata",
                          json.dumps({"judge_base_url": server.url, "judge_mode": "batch",
                                      "judge_batch_poll_seconds": 0.05})],
                         {"MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": CANARY_KEY})
        counts = (server.batches_created, server.call_count,
                  [len(server.jobs[f"batch_loopback{i}"].lines) for i in range(1, server.batches_created + 1)])
    return items, run, counts


def test_the_audit_goes_through_the_batch_api_when_batch_mode_is_chosen(scenario):
    items, run, (batches, online, lines) = scenario()
    assert run.returncode == 0, run.stderr[-3000:]
    _check(json.loads(run.stdout), items, _scripted(gullible))
    # every answer in one batch job, then the re-checks of the credited ones in a second
    assert (batches, lines) == (2, [len(items), _rechecks(items, _scripted(gullible))])
    # Online only for the garbled replies: the client asks a cached off-contract reply again, then once more.
    assert online == 2 * sum(i.family == "truncated" for i in items)


# ------------------------------------------------------------------------------------------ incomplete audits
def _incomplete_runs(tmp_path):
    items = battery_items(DATA, "gsm8k_gpt4em", 1)
    env = {"MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": CANARY_KEY}
    with ChatCompletionsServer(ScriptedJudge(items, gullible)) as server:
        metadata = {"judge_base_url": server.url, "judge_max_retries": 0}
        dry = _mathjudge(["--limit", "1", "--tasks", "gsm8k_gpt4em", "--metadata",
                          json.dumps({**metadata, "judge_dry_run": True})], env)
        dry_calls = server.call_count
        server.inject(status=503, times=10 * len(items))  # the judge is down: every answer goes unjudged
        down = _mathjudge(["--limit", "1", "--tasks", "gsm8k_gpt4em", "--json", "--max-false-positive", "0.9",
                           "--metadata", json.dumps(metadata)], env)
    return items, dry, dry_calls, down


def test_a_dry_run_or_an_unreachable_judge_leaves_the_audit_incomplete_with_exit_code_3(scenario):
    items, dry, dry_calls, down = scenario()
    assert dry.returncode == 3 and dry_calls == 0, dry.stderr[-3000:]
    assert "not audited yet" in dry.stderr and "audit:gsm8k_gpt4em" in dry.stderr  # the estimate, then the stop
    assert down.returncode == 3, down.stderr[-3000:]
    report = json.loads(down.stdout)
    summary = report["tasks"]["gsm8k_gpt4em"]
    assert summary["complete"] is False and summary["failures"]["unreached"] == len(items)
    assert summary["failures"]["kinds"] == {"http_503": len(items)} and summary["attacks"]["k"] == 0
    assert "got no verdict because the judge could not be reached" in down.stderr


# ------------------------------------------------------------------------------------------ judge_audit=true in a run
N = 8
TASKS = ("gsm8k_gpt4em", "math500_gpt4em")


def _in_run(tmp_path):
    """Two tasks with one judge: real GPT-3 solutions to GSM8K, and short right answers to MATH-500."""
    gsm8k = read_jsonl(SHARED_DATA / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl")[:N]
    math500 = [{"task": "math500_gpt4em", "problem": d["mj_question"], "is_correct": True,
                "response": f"Replayed solution {i}: the answer is $\\boxed{{{d['mj_answer']}}}$."}
               for i, d in enumerate(task_docs(DATA, "math500")[:N])]
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps(r) + "\n" for r in [*gsm8k, *math500]))
    rows = [*gsm8k, *math500]
    items = {task: battery_items(DATA, task, 3) for task in TASKS}

    def grade_sample(body: dict) -> str:  # the run's own samples: graded as their labels say
        text = request_text(body)
        row = next(r for r in rows if r["response"].strip() in text)
        return REPLIES["exact_match"]["credit" if row["is_correct"] else "refuse"]

    judge = ScriptedJudge([i for mine in items.values() for i in mine], gullible,
                          others=[r["response"].strip() for r in rows], fallback=grade_sample)

    def lm_eval(name: str, **extra):
        metadata = {"judge_base_url": server.url, "judge_audit": True, "judge_audit_limit": 3, **extra}
        return run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", ",".join(TASKS),
                            "--limit", str(N), "--log_samples", "--metadata", json.dumps(metadata)],
                           {"MATHJUDGE_DATA_DIR": DATA, "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
                            "OPENAI_API_KEY": CANARY_KEY}, tmp_path / name)

    with ChatCompletionsServer(judge) as server:
        dry = lm_eval("dry", judge_dry_run=True)
        dry_calls = server.call_count
        first = lm_eval("out")
        calls = server.call_count
        rerun = lm_eval("again")
        rerun_calls = server.call_count
    labels = {"gsm8k_gpt4em": [r["is_correct"] for r in gsm8k], "math500_gpt4em": [True] * N}
    return items, labels, first, rerun, (dry_calls, calls, rerun_calls), dry


@pytest.mark.e2e_versions  # lm-eval 0.5 reaches apply_filters another way: the audit must run there too
def test_judge_audit_true_audits_each_judge_once_per_run_and_a_rerun_pays_nothing(scenario):
    items, labels, first, rerun, (dry_calls, calls, rerun_calls), dry = scenario()
    # A dry run first: its estimate covers one audit beside the samples, and it sends nothing.
    assert dry.returncode == 0 and "dry run" in dry.stderr and dry_calls == 0
    estimate = {line.split()[0]: line.split() for line in dry.stderr.splitlines()
                if line.startswith(("audit:", *TASKS))}
    [audit_row] = [name for name in estimate if name.startswith("audit:")]
    assert all(int(estimate[task][3]) == N for task in TASKS)
    assert int(estimate[audit_row][3]) == len(items[audit_row.split(":", 1)[1]])

    assert first.returncode == 0, first.stderr[-3000:]
    results = first.results()
    judges = [results["configs"][task]["metadata"]["judge"] for task in TASKS]
    audit = judges[0]["audit"]
    assert judges[1]["audit"] == audit, "tasks with one judge share one audit"
    [audited] = audit["tasks"]  # made on the problems of one task
    assert "items" not in audit and audit["battery"]["version"] == 2
    _check(audit, items[audited], _scripted(gullible))
    # The scores are the run's own, untouched by the audit; the run's stats count its samples only.
    for task, judge in zip(TASKS, judges):
        assert results["results"][task]["gpt4_exact_match,none"] == pytest.approx(sum(labels[task]) / N)
        assert judge["run"]["requests"] == N
    sent = len(items[audited]) + sum(i.family == "truncated" for i in items[audited])
    assert calls == len(TASKS) * N + sent and audit["cost"]["total"]["calls"] == sent
    assert first.stderr.count("judge audit of openai:") == 1
    # The rerun sends nothing and records the same audit, all from the cache.
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert rerun_calls == calls
    again = rerun.results()["configs"][TASKS[1]]["metadata"]["judge"]["audit"]
    assert again["tasks"] == audit["tasks"] and again["cost"]["total"]["calls"] == 0


SCENARIOS = {"test_the_audit_measures_exactly_the_scripted_rates_through_the_openai_sdk": _openai_runs,
             "test_the_audit_of_a_gemini_vlm_judge_measures_the_scripted_rates": _gemini_run,
             "test_the_local_judge_is_audited_offline_and_measured_as_it_judges": _local_run,
             "test_a_panel_is_audited_as_its_majority_decides": _panel_run,
             "test_a_cascade_is_audited_with_what_its_rule_stage_credits": _cascade_run,
             "test_the_audit_goes_through_the_batch_api_when_batch_mode_is_chosen": _batch_run,
             "test_a_dry_run_or_an_unreachable_judge_leaves_the_audit_incomplete_with_exit_code_3": _incomplete_runs,
             "test_judge_audit_true_audits_each_judge_once_per_run_and_a_rerun_pays_nothing": _in_run}
