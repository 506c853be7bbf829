"""Reports skip what a kill left half-written, naming the file, when a whole one is there; else they refuse.

The runs are the session's real CLI runs (tests/reports_fixtures.py), copied; a rerun of a run is
added beside it the way lm-eval writes one (a newer time stamp) and then left as a kill leaves it:
an empty results file (killed as the output folder appeared), a results file cut mid-JSON, a samples
file that is empty or whose last line has no end. Every report command reads them through one reader
(``reports/runs.py``, ``reports/partial.py``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lm_eval_mathjudge.__main__ import main
from lm_eval_mathjudge.reports import rejudge
from tests.reports_fixtures import three_runs

pytestmark = pytest.mark.e2e

TASK = "gsm8k_gpt4em"
LATER = "2099-01-01T00-00-00.000000"  # the rerun's time stamp: newer than the run's own


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return three_runs(tmp_path_factory)


def _copy(runs, model: str, dest: Path) -> Path:
    shutil.copytree(runs.run_dir(model), dest)
    return dest


def _results(run: Path) -> Path:
    return next(run.rglob("results_*.json"))


def _rerun(run: Path, results: str | None, samples: str | None) -> tuple[Path, Path]:
    """A newer results and samples file beside the run's own, holding ``results`` / ``samples`` (None: the
    run's own content, whole)."""
    old_results = _results(run)
    old_samples = next(run.rglob(f"samples_{TASK}_*.jsonl"))
    new_results = old_results.with_name(f"results_{LATER}.json")
    new_samples = old_samples.with_name(f"samples_{TASK}_{LATER}.jsonl")
    data = json.loads(old_results.read_text())
    data["date"] = 4102444800.0  # 2100: the newest
    whole = json.dumps(data, indent=2)
    new_results.write_text(whole if results is None else results.format(half=whole[: len(whole) // 2]))
    text = old_samples.read_text()
    new_samples.write_text(text if samples is None else samples.format(cut=text[: len(text) * 2 // 3]))
    return new_results, new_samples


RESULTS_DAMAGE = {"empty": "", "cut": "{half}"}
SAMPLES_DAMAGE = {"empty": "", "cut": "{cut}"}
REPORTS = [  # (command, arguments after the two runs) on two runs of different models
    ("leaderboard", ["--out", "{tmp}/board"]),
    ("diff", []),
    ("agreement", []),
    ("drift", []),
]


def _two_runs(runs, tmp_path, command: str = "diff") -> tuple[Path, Path]:
    """Two runs of different models (drift: the same responses, judged twice)."""
    other = "gpt3-verifier" if command == "drift" else "gpt3-fixed"
    return _copy(runs, "gpt3-verifier", tmp_path / "a"), _copy(runs, other, tmp_path / "b")


def _report(command: str, more: list[str], a: Path, b: Path, tmp_path: Path) -> int:
    runs = [str(a)] if command == "leaderboard" else [str(a), str(b)]
    if command == "leaderboard":
        runs.append(str(b))
    return main([command, *runs, *[m.format(tmp=tmp_path) for m in more]])


@pytest.mark.parametrize("damage", RESULTS_DAMAGE)
@pytest.mark.parametrize("command, more", REPORTS, ids=[r[0] for r in REPORTS])
def test_a_half_written_results_file_beside_a_whole_one_is_skipped_by_name(runs, tmp_path, capsys, caplog,
                                                                          command, more, damage):
    a, b = _two_runs(runs, tmp_path, command)
    half, samples = _rerun(a, RESULTS_DAMAGE[damage], None)
    samples.unlink()  # the kill came before lm-eval opened the samples
    assert _report(command, more, a, b, tmp_path) == 0
    warned = caplog.text + capsys.readouterr().err
    assert f"skipped {half}: it is {'empty' if damage == 'empty' else 'not whole JSON'}" in warned
    assert "a run killed while lm-eval wrote it" in warned


@pytest.mark.parametrize("damage", SAMPLES_DAMAGE)
@pytest.mark.parametrize("command, more", REPORTS, ids=[r[0] for r in REPORTS])
def test_a_rerun_whose_samples_a_kill_cut_gives_way_to_the_whole_one(runs, tmp_path, capsys, caplog, command,
                                                                     more, damage):
    a, b = _two_runs(runs, tmp_path, command)
    own = next(a.rglob(f"samples_{TASK}_*.jsonl"))
    _, cut = _rerun(a, None, SAMPLES_DAMAGE[damage])
    assert _report(command, more, a, b, tmp_path) == 0
    warned = caplog.text + capsys.readouterr().err
    assert f"skipped {cut}: it is {'empty' if damage == 'empty' else 'cut short'}" in warned
    assert f"{own} is used for {TASK}" in warned


@pytest.mark.parametrize("damage", RESULTS_DAMAGE)
def test_a_run_with_only_a_half_written_results_file_is_refused_saying_what_to_do(runs, tmp_path, capsys, damage):
    a, b = _two_runs(runs, tmp_path)
    half, _ = _rerun(a, RESULTS_DAMAGE[damage], None)
    for path in a.rglob("results_*.json"):
        if path != half:
            path.unlink()
    assert main(["leaderboard", str(a), str(b), "--out", str(tmp_path / "board")]) == 2
    err = capsys.readouterr().err
    assert f"holds no complete results file: {half}" in err and "Traceback" not in err
    assert "mathjudge resume" in err


@pytest.mark.parametrize("damage", SAMPLES_DAMAGE)
def test_a_paired_report_on_samples_a_kill_cut_is_refused_saying_what_to_do(runs, tmp_path, capsys, damage):
    a, b = _two_runs(runs, tmp_path)
    samples = next(a.rglob(f"samples_{TASK}_*.jsonl"))
    text = samples.read_text()
    samples.write_text(SAMPLES_DAMAGE[damage].format(cut=text[: len(text) // 2]))
    assert main(["diff", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert f"samples file {samples} is {'empty' if damage == 'empty' else 'cut short'}" in err
    assert "mathjudge resume" in err and "Traceback" not in err
    # the leaderboard still ranks it, from its results file, and says why there is no paired test
    assert main(["leaderboard", str(a), str(b), "--out", str(tmp_path / "board")]) == 0


def test_rejudge_passes_over_a_cut_samples_file_when_the_whole_one_is_given_too(runs, tmp_path, caplog):
    a = _copy(runs, "gpt3-verifier", tmp_path / "a")
    own = next(a.rglob(f"samples_{TASK}_*.jsonl"))
    half, cut = _rerun(a, "", "{cut}")
    assert rejudge._whole([str(own), str(cut)]) == [str(own)]
    assert f"skipped {cut}: it is cut short" in caplog.text
    assert rejudge._whole([str(cut)]) == [str(cut)]  # alone, it is read, and reading it says what to do
    with pytest.raises(rejudge.ReportError, match="is cut short .*mathjudge resume"):
        rejudge.read_source(str(cut))
    source = rejudge.read_source(str(own.with_name(own.name)))
    assert source.model == "gpt3-verifier.jsonl"  # from the whole results file beside it
    shutil.copy(own, cut)  # whole samples beside the empty results file of their run: the folder names the model
    assert rejudge.read_source(str(cut)).model == own.parent.name
