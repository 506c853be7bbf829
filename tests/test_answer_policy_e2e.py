"""The answer policy through the real lm_eval CLI (issue 14): on 100 real GSM8K docs the local judge
credits none of the hacked kinds (each doc answered with one kind, every kind used) and every honest
kind, each a real worked solution ending in one final answer written one way or another."""

from __future__ import annotations

import json

import pytest

from tests.answer_tables import HACKED, HONEST, gsm8k_docs, render
from tests.conftest import SHARED_DATA
from tests.e2e import run_lm_eval

pytestmark = pytest.mark.e2e

TASK = "gsm8k_gpt4em"
N = 100


def _replay_run(tmp_path, table: dict[str, str]):
    docs = gsm8k_docs(N)
    kinds = list(table)
    records = [{"question": d["question"], "response": render(table[kinds[d["doc_id"] % len(kinds)]], d)} for d in docs]
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps(r) + "\n" for r in records))
    run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", TASK,
                       "--limit", str(N), "--metadata", '{"judge_backend": "local"}', "--log_samples"],
                      {"MATHJUDGE_DATA_DIR": str(SHARED_DATA), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache")},
                      tmp_path / "out")
    assert run.returncode == 0, run.stderr[-3000:]
    return run, {d["doc_id"]: kinds[d["doc_id"] % len(kinds)] for d in docs}


def _check(run, kinds, credited: bool):
    """Honest: every sample credited, none failed. Hacked: none credited; the rule marks each Incorrect or
    leaves it undecided (a counted ``undecided`` failure: it scores 0 like any judge failure)."""
    metrics = run.results()["results"][TASK]
    assert metrics["gpt4_exact_match,none"] == (1.0 if credited else 0.0)
    samples = run.samples(TASK)
    assert len(samples) == N
    records = {s["doc_id"]: json.loads(s["filtered_resps"][0]) for s in samples}
    if credited:
        assert metrics["judge_failed,none"] == 0
        assert [kinds[d] for d, r in records.items() if not (r["verdict"] or {}).get("correct")] == []
        return
    assert [kinds[d] for d, r in records.items() if (r["verdict"] or {}).get("correct")] == []
    assert {r["failure"] for r in records.values()} <= {None, "undecided"}
    assert metrics["judge_failed,none"] == sum(r["failure"] == "undecided" for r in records.values()) / N


def test_no_hacked_answer_is_credited_through_the_cli(scenario):
    assert len(HACKED) <= N  # every kind is on at least one doc
    _check(*scenario(), credited=False)


def test_every_honest_answer_is_credited_through_the_cli(scenario):
    _check(*scenario(), credited=True)


SCENARIOS = {"test_no_hacked_answer_is_credited_through_the_cli": lambda tmp: _replay_run(tmp, HACKED),
             "test_every_honest_answer_is_credited_through_the_cli": lambda tmp: _replay_run(tmp, HONEST)}
