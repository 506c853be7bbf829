"""Our errors end an ``lm_eval`` process with one block and the documented exit code, never a traceback.

Each run is a real ``lm_eval`` process: the exit status and the start-up hook (``_startup``'s
``sys.excepthook`` wrapper) are what is under test. The runs share nothing, so they start side by side.
"""

from __future__ import annotations

import json
import socket

import pytest

from lm_eval_mathjudge.core.errors import EXIT_CODES
from tests._helpers import list_prices
from tests.conftest import REPO

pytestmark = pytest.mark.e2e

REPLAY = REPO / "examples" / "data" / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl"
DATA = str(REPO / "examples" / "data")
PRICES = list_prices("gpt-4-turbo-2024-04-09")  # a loopback judge has no list price: given as a user would


def _closed_port() -> int:
    """A loopback port nothing listens on: a judge or hub there is unreachable (refused at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run(tmp_path, name: str, metadata: dict, env: dict, *, limit: int = 3, args: tuple = ()):
    from tests.e2e import run_lm_eval

    base = {"MATHJUDGE_DATA_DIR": DATA, "MATHJUDGE_CACHE_DIR": str(tmp_path / name / "cache")}
    return run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={REPLAY}", "--tasks", "gsm8k_gpt4em",
                        "--limit", str(limit), "--metadata", json.dumps(metadata), *args],
                       {**base, **env}, tmp_path / name / "out", process=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from tests.e2e import CANARY_KEY, exact_match_judge, run_together
    from tests.loopback import ChatCompletionsServer

    tmp = tmp_path_factory.mktemp("clean_errors")
    down = f"http://127.0.0.1:{_closed_port()}/v1"
    with ChatCompletionsServer(exact_match_judge) as judge:
        cases = {
            "config": lambda: _run(tmp, "config", {"judge_backnd": "local"}, {}),
            "debug": lambda: _run(tmp, "debug", {"judge_backnd": "local"}, {"MATHJUDGE_DEBUG": "1"}),
            "credentials": lambda: _run(tmp, "credentials", {"judge_backend": "openai"}, {}),
            "preflight": lambda: _run(tmp, "preflight", {"judge_base_url": down, "judge_max_retries": 0},
                                      {"OPENAI_API_KEY": CANARY_KEY}),
            "budget": lambda: _run(tmp, "budget", {"judge_base_url": judge.url, "judge_budget_usd": 1e-6,
                                                   "judge_prices": PRICES},
                                   {"OPENAI_API_KEY": CANARY_KEY}),
            # No key and no judge that answers: the dry run needs neither.
            "dry run": lambda: _run(tmp, "dry", {"judge_base_url": down, "judge_dry_run": True,
                                                 "judge_prices": PRICES}, {}),
            # Online (no HF_HUB_OFFLINE), no local data, a hub that does not answer.
            "data": lambda: _run(tmp, "data", {"judge_backend": "local"},
                                 {"MATHJUDGE_DATA_DIR": "", "HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0",
                                  "HF_HOME": str(tmp / "hf"), "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"}),
        }
        done = run_together(*cases.values())
        judge_calls = judge.call_count
    return {**dict(zip(cases, done)), "judge_calls": judge_calls}


# (case, exit family, words the block must hold: what went wrong and what to do)
CASES = [
    ("config", "configuration", ["unknown judge setting judge_backnd (did you mean judge_backend?)",
                                 "what to do:"]),
    ("credentials", "credentials", ["needs credentials, and none of OPENAI_API_KEY is set",
                                    "export OPENAI_API_KEY=", "what to do:"]),
    ("preflight", "preflight", ["what to do:", "judge_preflight=false"]),
    ("budget", "budget", ["the judge estimate is above judge_budget_usd=1e-06", "Nothing was sent",
                          "judge fewer samples (--limit)"]),
    ("data", "data", ["openai/gsm8k is not local and cannot be loaded from the Hugging Face hub",
                      "does not answer", "Set MATHJUDGE_DATA_DIR"]),
]


@pytest.mark.parametrize("case, family, words", CASES, ids=[c[0] for c in CASES])
def test_our_error_ends_lm_eval_with_one_block_and_its_exit_code(runs, case, family, words):
    run = runs[case]
    tail = run.stderr[-4000:]
    assert run.returncode == EXIT_CODES[family], tail
    assert "Traceback" not in run.stderr, tail
    assert f"lm_eval: {family} error (" in tail and f"exit status {EXIT_CODES[family]}" in tail
    for text in words:
        assert text in tail, (text, tail)
    assert "where:           lm_eval_mathjudge/" in tail  # where it happened, package-relative
    assert "Running generate_until" not in run.stderr or case == "budget"  # stopped before generation


def test_the_data_hint_comes_before_the_cause(runs):
    block = runs["data"].stderr.split("what went wrong:", 1)[1]
    assert block.index("MATHJUDGE_DATA_DIR") < block.index("Cause:") < block.index("does not answer")


def test_mathjudge_debug_adds_the_traceback_and_keeps_the_exit_code(runs):
    run = runs["debug"]
    assert run.returncode == EXIT_CODES["configuration"]
    assert "Traceback (most recent call last)" in run.stderr and "ConfigError" in run.stderr
    assert run.stderr.rstrip().endswith("(MATHJUDGE_DEBUG=1 shows the traceback)")  # the block still ends it


def test_budget_refusal_sends_nothing(runs):
    assert runs["judge_calls"] == 0  # the budget run (the only one with a live judge) asked it nothing


def test_the_dry_run_exits_0_with_the_estimate_and_needs_no_key_or_judge(runs):
    run = runs["dry run"]
    assert run.returncode == 0, run.stderr[-4000:]
    assert "Traceback" not in run.stderr and "DryRunDone" not in run.stderr
    lines = run.stderr.splitlines()
    [head] = [line for line in lines if line.startswith("task ") and "USD" in line]
    assert head.split()[-2:] == ["online", "batch"]
    [row] = [line for line in lines if line.startswith("gsm8k_gpt4em ")]
    [total] = [line for line in lines if line.startswith("total ")]
    online, batch = (float(x) for x in row.split()[-2:])
    assert row.split()[3] == "3" and 0 < batch < online  # 3 calls; batch is the cheaper price
    assert total.split()[-2:] == row.split()[-2:]
    assert "note (dry run): the openai judge" in run.stderr and "OPENAI_API_KEY" in run.stderr  # a note, no stop
    assert "lm_eval: dry run (judge_dry_run=true): nothing was sent to any judge" in run.stderr
