"""``mathjudge``: its name, help texts, examples, suggestions, error blocks and the saved-generations commands."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from lm_eval_mathjudge.__main__ import build_parser, main
from tests.e2e import TIMEOUT_S


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


COMMANDS = sorted(_subparsers(build_parser()))


def test_every_command_is_there():
    assert COMMANDS == sorted(["tasks-dir", "resume", "cache", "leaderboard", "diff", "agreement", "calibrate",
                                "rejudge", "drift", "audit"])


@pytest.mark.parametrize("command", COMMANDS)
def test_every_argument_has_help_and_the_help_ends_with_an_example(command, capsys):
    parser = _subparsers(build_parser())[command]
    assert parser.prog == f"mathjudge {command}"
    for action in parser._actions:
        assert action.help and action.help != argparse.SUPPRESS, (command, action.dest)
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: mathjudge {command}")
    last = text.rstrip().split("\n\n")[-1].splitlines()
    assert last[0] in ("example:", "examples:") and all(line.startswith("  mathjudge ") or
                                                       line.startswith("  lm_eval ") for line in last[1:])


@pytest.mark.e2e
def test_the_module_and_the_script_are_both_called_mathjudge():
    for argv in ([sys.executable, "-m", "lm_eval_mathjudge", "--help"],
                 [os.path.join(os.path.dirname(sys.executable), "mathjudge"), "--help"]):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
        assert proc.returncode == 0 and proc.stdout.startswith("usage: mathjudge "), proc.stdout[:200]
        assert "examples:" in proc.stdout and "lm_eval_mathjudge [" not in proc.stdout


@pytest.mark.parametrize("argv, suggestion", [
    (["leaderbord", "x", "--out", "o"], "(did you mean leaderboard?)"),
    (["rejudg", "s.jsonl"], "(did you mean rejudge?)"),
    (["cache", "--lst"], "(did you mean --list?)"),
    (["leaderboard", "runs", "--out", "o", "--alow-mixed"], "(did you mean --allow-mixed?)"),
    (["rejudge", "s.jsonl", "--output_path", "o", "--nmae", "x"], "(did you mean --name?)"),
    (["calibrat", "run", "--labels", "l.jsonl"], "(did you mean calibrate?)"),
    (["calibrate", "run", "--labels", "l.jsonl", "--label-feild", "x"], "(did you mean --label-field?)"),
    (["leaderboard", "runs", "--out", "o", "--calibraton", "c.json"], "(did you mean --calibration?)"),
    (["diff", "a", "b", "--alow-mixed"], "(did you mean --allow-mixed?)"),
    (["resme", "out"], "(did you mean resume?)"),
])
def test_a_misspelt_command_or_option_gets_a_suggestion(argv, suggestion, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2 and suggestion in err and err.startswith("usage: mathjudge"), err


def test_a_misspelt_setting_in_metadata_gets_a_suggestion(capsys):
    code = main(["audit", "--metadata", json.dumps({"judge_backnd": "local"}), "--limit", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "judge_backnd (did you mean judge_backend?)" in err, err


def test_our_errors_end_mathjudge_with_one_block_and_the_family_exit_code(tmp_path, capsys):
    code = main(["leaderboard", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.startswith("mathjudge leaderboard: configuration error (ReportError, exit status 2)")
    assert "what went wrong: " in err and "no such file or folder" in err and "what to do:" in err


def test_mathjudge_debug_prints_the_traceback_too(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MATHJUDGE_DEBUG", "1")
    assert main(["leaderboard", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "what went wrong: " in err


# ---------------------------------------------------------------------- saved generations
def _generations(folder):
    where = folder / "generations"
    where.mkdir(parents=True)
    (where / "generations-0123456789abcdef.jsonl").write_text('{"question": "q", "response": "r"}\n' * 3)
    (where / "generations-fedcba9876543210.jsonl").write_text('{"question": "q", "response": "r"}\n')
    (where / "notes.txt").write_text("someone else's file")
    return where


def test_cache_list_shows_each_saved_generations_file(tmp_path, capsys):
    _generations(tmp_path)
    assert main(["cache", "--list", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "2 saved generations file(s)" in out and "--model mathjudge-replay" in out
    lines = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert lines["generations-0123456789abcdef.jsonl"][1] == "3" and lines["generations-fedcba9876543210.jsonl"][1] == "1"
    assert "notes.txt" not in out


def test_cache_clear_generations_deletes_only_saved_generations(tmp_path, capsys):
    where = _generations(tmp_path)
    (tmp_path / "judge_cache.sqlite").write_text("")  # whatever the cache holds stays
    assert main(["cache", "--clear-generations", "--cache-dir", str(tmp_path)]) == 0
    assert "deleted 2 saved generations file(s)" in capsys.readouterr().out
    assert sorted(p.name for p in where.iterdir()) == ["notes.txt"]
    assert (tmp_path / "judge_cache.sqlite").exists()
    assert main(["cache", "--list", "--cache-dir", str(tmp_path)]) == 0
    assert "no saved generations" in capsys.readouterr().out


def test_cache_list_and_clear_cannot_be_combined(capsys):
    with pytest.raises(SystemExit) as done:
        main(["cache", "--list", "--clear"])
    assert done.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_the_default_cache_folder_is_the_configured_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MATHJUDGE_CACHE_DIR", str(tmp_path))
    _generations(tmp_path)
    assert main(["cache", "--list"]) == 0
    assert str(tmp_path / "generations") in capsys.readouterr().out
