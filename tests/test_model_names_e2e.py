"""``--model_args name=NAME`` of our models names the model in lm-eval's results, so reports show NAME.

Two replayed runs of the same file, each named, judged by the local judge, through the real ``lm_eval``
CLI and then ``mathjudge leaderboard``: the leaderboard shows the names (not the file name), and its data
column the data set (a short local label, never the absolute path of the file).
"""

from __future__ import annotations

import json

import pytest

from lm_eval_mathjudge._startup import named_model
from tests.conftest import REPO
from tests.e2e import run_lm_eval, run_mathjudge

REPLAY = REPO / "examples" / "data" / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl"
DATA = REPO / "examples" / "data"


@pytest.mark.parametrize("source, args, name", [
    ("mathjudge-replay", "path=a.jsonl,name=my-model", "my-model"),
    ("mathjudge-replay", {"path": "a.jsonl", "name": "GPT-3 175B"}, "GPT-3 175B"),
    ("mathjudge-media", "dir=media,name=painter", "painter"),
    ("mathjudge-veo", "model=veo-3.0,name=veo 3", "veo 3"),
    ("mathjudge-replay", "path=a.jsonl", None),  # no name: lm-eval's own choice (path=) stands
    ("mathjudge-replay", "path=a.jsonl,name=", None),
    ("hf", "pretrained=gpt2,name=x", None),  # not our model: its arguments are its own business
])
def test_named_model_reads_name_only_for_our_models(source, args, name):
    assert named_model(source, args) == name


def test_lm_evals_tracker_records_the_name(tmp_path):
    from lm_eval.loggers.evaluation_tracker import GeneralConfigTracker

    tracker = GeneralConfigTracker()
    tracker.log_experiment_args(model_source="mathjudge-replay", model_args="path=/x/run.jsonl,name=Model A/2",
                                system_instruction=None, chat_template=None, fewshot_as_multiturn=False)
    assert (tracker.model_name, tracker.model_name_sanitized) == ("Model A/2", "Model A__2")
    tracker.log_experiment_args(model_source="mathjudge-replay", model_args="path=/x/run.jsonl",
                                system_instruction=None, chat_template=None, fewshot_as_multiturn=False)
    assert tracker.model_name == "/x/run.jsonl"  # lm-eval's default, untouched


@pytest.mark.e2e
def test_named_runs_show_their_names_and_the_data_set_in_the_leaderboard(tmp_path):
    env = {"MATHJUDGE_DATA_DIR": str(DATA), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache")}
    for name in ("first-model", "second model"):
        run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={REPLAY},name={name}",
                           "--tasks", "gsm8k_gpt4em", "--limit", "8", "--log_samples",
                           "--metadata", json.dumps({"judge_backend": "local"})], env, tmp_path / "out")
        assert run.returncode == 0, run.stderr[-3000:]
    results = sorted(json.loads(p.read_text())["model_name"] for p in (tmp_path / "out").rglob("results_*.json"))
    assert results == ["first-model", "second model"]
    board = run_mathjudge(["leaderboard", str(tmp_path / "out"), "--out", str(tmp_path / "board")], env)
    assert board.returncode == 0, board.stderr[-3000:]
    table = (tmp_path / "board" / "leaderboard.md").read_text()
    assert "first-model" in table and "second model" in table and REPLAY.name not in table
    assert "local:gsm8k@" in table and str(DATA) not in table  # the data set, not where it sits on this disk
    html = (tmp_path / "board" / "leaderboard.html").read_text()
    assert str(DATA) not in html and "first-model" in html
