"""A sixth data set added from outside the package, as docs/development.md says: its two task YAMLs, its data
and one registry entry (an entry point of an installed distribution), nothing else.

The data set is real: the first rows of AIME 1983-2024 (examples/data/aime_1983_2024), answers only, with
field names of its own (``Question``, ``Answer``). It runs through the real ``lm_eval`` CLI with the local
judge, then ``mathjudge rejudge`` (its own samples, and samples of lm-eval's built-in ``aime`` task, which
may hold its docs) and ``mathjudge audit`` take it like a built-in data set.
"""

from __future__ import annotations

import json
import shutil

import pytest

from lm_eval_mathjudge._startup import tasks_dir
from lm_eval_mathjudge.core.data_sets import NO_SOLUTION, aime_number
from tests._helpers import install_aime_history, write_plugin_tasks
from tests.conftest import SHARED_DATA, read_jsonl
from tests.e2e import run_lm_eval, run_mathjudge

pytestmark = pytest.mark.e2e

NAME = "aime_1983_2024"
TASK = f"{NAME}_gpt4em"
N = 6  # docs 0 and 3 answered wrongly


@pytest.fixture
def sixth(site, tmp_path):
    """The data set's folder, tasks and entry point; the answers to replay; the run's environment."""
    data = tmp_path / "data" / NAME
    data.mkdir(parents=True)
    rows = read_jsonl(SHARED_DATA / NAME / "test.jsonl")[:N]
    (data / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for built_in in ("aime24", "aime25"):  # rejudge of lm-eval's `aime` looks in every AIME set
        shutil.copytree(SHARED_DATA / built_in, tmp_path / "data" / built_in)
    write_plugin_tasks(tmp_path / "tasks", NAME, tasks_dir())
    install_aime_history(site, tmp_path / "tasks")
    answers = [aime_number(r["Answer"]) if i % 3 else f"{int(r['Answer']) + 1}" for i, r in enumerate(rows)]
    responses = [f"Working through it carefully.\nThe answer is $\\boxed{{{a}}}$." for a in answers]
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps({"question": r["Question"], "response": t}) + "\n"
                              for r, t in zip(rows, responses)))
    env = {"MATHJUDGE_DATA_DIR": str(tmp_path / "data"), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache")}
    return rows, responses, replay, env


def _lm_eval(tmp_path, replay, env):
    return run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", TASK,
                        "--include_path", str(tmp_path / "tasks"), "--metadata", '{"judge_backend": "local"}',
                        "--log_samples"], env, tmp_path / "out")


def test_a_data_set_from_outside_the_package_runs_rejudges_and_audits(sixth, tmp_path):
    rows, responses, replay, env = sixth
    run = _lm_eval(tmp_path, replay, env)
    assert run.returncode == 0, run.stderr[-3000:]
    scores = run.results()["results"][TASK]
    assert scores["gpt4_exact_match,none"] == pytest.approx(4 / N) and scores["judge_failed,none"] == 0
    config = run.results()["configs"][TASK]
    assert config["dataset_path"] == str((tmp_path / "data" / NAME / "test.jsonl").resolve())
    assert config["generation_kwargs"]["max_gen_toks"] == 32768 and config["test_split"] == "train"
    doc = run.samples(TASK)[0]["doc"]
    assert doc["mj_reference"] == f"The final answer is 60. {NO_SOLUTION}" and doc["mj_answer"] == "60"

    # rejudge: its own samples, and the same answers as samples of lm-eval's built-in `aime` task
    own = next((tmp_path / "out").rglob(f"samples_{TASK}_*.jsonl"))
    builtin = tmp_path / "builtin" / "some-model" / "samples_aime_2026-01-01T00-00-00.000000.jsonl"
    builtin.parent.mkdir(parents=True)
    builtin.write_text("".join(json.dumps({"doc_id": i, "doc": row, "filter": "none", "resps": [[text]],
                                           "filtered_resps": [text], "metrics": ["exact_match"], "exact_match": 0})
                               + "\n" for i, (row, text) in enumerate(zip(rows, responses))))
    rejudged = run_mathjudge(["rejudge", str(own), str(builtin), "--output_path", str(tmp_path / "rejudged"),
                              "--judge", "local"], env)
    assert rejudged.returncode == 0, rejudged.stderr[-3000:]
    results = [json.loads(p.read_text()) for p in sorted((tmp_path / "rejudged").rglob("results_*.json"))]
    assert len(results) == 2  # one per model
    for result in results:
        assert list(result["results"]) == [TASK]  # no doc of AIME 2024 or 2025 matched
        assert result["results"][TASK]["gpt4_exact_match,none"] == pytest.approx(4 / N)

    audit = run_mathjudge(["audit", "--tasks", TASK, "--judge", "local", "--limit", "2", "--json"], env)
    assert audit.returncode == 0, audit.stderr[-3000:]
    report = json.loads(audit.stdout)
    assert list(report["tasks"]) == [TASK] and report["overall"]["complete"]
    assert report["items"] and all(item["task"] == TASK and 0 <= item["doc_index"] < N for item in report["items"])
