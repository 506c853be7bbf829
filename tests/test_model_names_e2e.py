"""``--model_args model=NAME`` names a run of our models in lm-eval's results, so reports show NAME.

lm-eval itself reads the name from ``model=`` (before ``path=``); the plugin patches nothing for it.
Two replayed runs of the same file, each named, judged by the local judge, through the real ``lm_eval``
CLI and then ``mathjudge leaderboard``: the leaderboard shows the names (not the file name), and its data
column the data set (a short local label, never the absolute path of the file).
"""

from __future__ import annotations

import json

import pytest

from lm_eval_mathjudge.core.errors import ConfigError
from tests.conftest import REPO
from tests.e2e import run_lm_eval, run_mathjudge

REPLAY = REPO / "examples" / "data" / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl"
DATA = REPO / "examples" / "data"


@pytest.mark.parametrize("model_args, name", [
    ("path=/x/run.jsonl,model=Model A/2", "Model A/2"),
    ({"path": "/x/run.jsonl", "model": "GPT-3 175B"}, "GPT-3 175B"),
    ("path=/x/run.jsonl", "/x/run.jsonl"),  # no name: lm-eval's own choice, the file
])
def test_lm_evals_own_tracker_takes_the_name_from_model(model_args, name):
    from lm_eval.loggers.evaluation_tracker import GeneralConfigTracker

    tracker = GeneralConfigTracker()
    tracker.log_experiment_args(model_source="mathjudge-replay", model_args=model_args,
                                system_instruction=None, chat_template=None, fewshot_as_multiturn=False)
    assert tracker.model_name == name
    assert not hasattr(GeneralConfigTracker.log_experiment_args, "__wrapped__")  # lm-eval's own, unpatched


@pytest.mark.parametrize("model, args", [
    ("mathjudge-replay", {"path": str(REPLAY), "name": "mine"}),
    ("mathjudge-media", {"dir": str(DATA), "name": "painter"}),
    ("mathjudge-openai-image", {"model": "gpt-image-1", "name": "painter"}),
])
def test_the_old_name_argument_is_refused_saying_model(model, args):
    from lm_eval.api.registry import get_model

    with pytest.raises(ConfigError, match=r"name= is no longer read.*model=NAME"):
        get_model(model)(**args)


def test_the_media_model_takes_model_as_the_runs_name():
    from lm_eval.api.registry import get_model

    assert get_model("mathjudge-media")(dir=str(DATA), model="painter") is not None


@pytest.mark.e2e
def test_named_runs_show_their_names_and_the_data_set_in_the_leaderboard(tmp_path):
    env = {"MATHJUDGE_DATA_DIR": str(DATA), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache")}
    for name in ("first-model", "second model"):
        run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={REPLAY},model={name}",
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
