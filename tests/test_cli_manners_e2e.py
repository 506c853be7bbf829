"""The `mathjudge` command's small manners, as a user meets them in a shell: its version, a reader that
stops reading, an option misspelt after a subcommand."""

from __future__ import annotations

import json
import subprocess
from importlib import metadata

import pytest

from tests.e2e import MATHJUDGE, run_env
from tests.reports_fixtures import three_runs

pytestmark = pytest.mark.e2e  # every test runs the mathjudge command as a process


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return three_runs(tmp_path_factory)


@pytest.fixture(scope="module")
def labels(runs, tmp_path_factory):
    path = tmp_path_factory.mktemp("labels") / "labels.jsonl"
    path.write_text("".join(json.dumps({"doc_id": i, "label": i % 3 != 0}) + "\n" for i in range(100)))
    return path


def _mathjudge(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([MATHJUDGE, *args], env=run_env({}), capture_output=True, text=True, timeout=300)


def test_version_is_the_installed_distributions():
    proc = _mathjudge("--version")
    assert proc.returncode == 0 and proc.stdout == f"mathjudge {metadata.version('lm-eval-mathjudge')}\n", proc


def test_a_reader_that_stops_after_one_line_ends_the_command_quietly(runs, labels):
    """`mathjudge calibrate ... --json | head -1` in a shell, as the README's users type it."""
    command = (f"set -o pipefail; {MATHJUDGE} calibrate {runs.run_dir('gpt3-fixed')} --labels {labels} --json "
               "| head -1")
    proc = subprocess.run(["bash", "-c", command], env=run_env({}), capture_output=True, text=True, timeout=300)
    assert proc.stdout == "{\n" and proc.returncode == 0, proc
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("args", [
    ["calibrate", "{gpt3-fixed}", "--labels", "{labels}", "--json"],
    ["calibrate", "{gpt3-fixed}", "--labels", "{labels}"],
    ["diff", "{gpt3-fixed}", "{gpt3-mixed}"],
    ["leaderboard", "{gpt3-fixed}", "{gpt3-mixed}", "--out", "{out}"],
    ["--help"],
    ["--version"],
    ["tasks-dir"],
], ids=lambda a: a[0])
def test_a_pipe_closed_before_the_first_byte_is_not_an_error(args, runs, labels, tmp_path):
    """The reader is gone before anything is written: every write meets a closed pipe, whichever command."""
    names = {"gpt3-fixed": runs.run_dir("gpt3-fixed"), "gpt3-mixed": runs.run_dir("gpt3-mixed"), "labels": labels,
             "out": tmp_path / "board"}
    argv = [a.format(**names) for a in args]
    proc = subprocess.Popen([MATHJUDGE, *argv], env=run_env({}), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0 and "Traceback" not in err and "Broken pipe" not in err, err


@pytest.mark.parametrize("args, usage, hint", [
    (["leaderboard", "runs", "--outptu", "x"], "usage: mathjudge leaderboard ", "(did you mean --out?)"),
    (["calibrate", "run", "--labls", "l.jsonl"], "usage: mathjudge calibrate ", "(did you mean --labels?)"),
    (["diff", "a", "b", "--jsn"], "usage: mathjudge diff ", "(did you mean --json?)"),
    (["diff", "a", "b", "c"], "usage: mathjudge diff ", ""),  # a stray argument: the subcommand's usage too
    (["cache", "--mrege", "a"], "usage: mathjudge cache ", "(did you mean --merge?)"),
    (["--verison"], "usage: mathjudge [-h] [--version] COMMAND", "(did you mean --version?)"),
])
def test_a_typo_after_a_subcommand_shows_that_subcommands_usage(args, usage, hint):
    proc = _mathjudge(*args)
    assert proc.returncode == 2 and proc.stderr.startswith(usage) and hint in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
