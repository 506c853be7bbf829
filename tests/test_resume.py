"""One resume path at every moment, at our own seams: the run's generations file keeps its name, the
resume notice follows each change, and ``mathjudge resume`` finds the run and its command.

Kills of real ``lm_eval`` processes at each moment are in ``test_resume_kill_e2e.py``.
"""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from lm_eval_mathjudge.__main__ import main
from lm_eval_mathjudge.core.errors import ConfigError
from lm_eval_mathjudge.harness import recovery, resume
from tests.inprocess import reset_plugin_state

KEY = "sk-canary-7f3d9c2b4a1e8f6d"
R = "mathjudge-replay"


@pytest.fixture(autouse=True)
def fresh():
    reset_plugin_state()
    yield
    reset_plugin_state()


def _argv(out, *more):
    return ["/venv/bin/lm_eval", "run", "--model", "local-chat-completions", "--model_args",
            "model=m,base_url=http://127.0.0.1:9/v1/chat/completions", "--apply_chat_template", "--tasks", "t",
            "--output_path", str(out), *more]


def _notice(out):
    [path] = out.glob("mathjudge-resume-*.json")
    return path, json.loads(path.read_text())


def test_the_notice_follows_every_change_of_what_a_resume_needs(tmp_path, monkeypatch, capsys):
    out, run_file = tmp_path / "out", tmp_path / "cache" / "generations" / "run-1.jsonl"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", _argv("out"))
    resume.begin()
    resume.begin()  # a second judged task of the same run: one notice, one line
    err = capsys.readouterr().err
    assert err.count(f"should this run die, `mathjudge resume {out}` resumes it") == 1
    path, data = _notice(out)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert (data["stage"], data["cwd"], data["resume"]) == ("started", str(tmp_path), sys.argv[1:])

    run_file.parent.mkdir(parents=True)
    run_file.write_text("{}\n")
    resume.note(str(run_file), complete=False)  # the first generation: the model answers only the others
    _, data = _notice(out)
    assert data["stage"] == "generating" and data["file"] == str(run_file)
    assert data["resume"][data["resume"].index("--model_args") + 1] == (
        f"path={run_file},fallback=local-chat-completions,model=m,base_url=http://127.0.0.1:9/v1/chat/completions")
    assert "--apply_chat_template" in data["resume"]  # the prompts the fallback model sees stay the run's

    resume.note(str(run_file), complete=True)  # every generation saved: no model at all
    _, data = _notice(out)
    assert data["stage"] == "judging"
    assert data["resume"][:5] == ["run", "--model", R, "--model_args", f"path={run_file}"]
    assert "--apply_chat_template" not in data["resume"]
    assert resume.command(data) == (str(tmp_path), data["resume"])

    resume.process_exit(failed=True)  # an error ended the run: the notice stays for mathjudge resume
    assert _notice(out)
    resume.process_exit(failed=False)  # it finished: nothing to resume
    assert not list(out.glob("mathjudge-resume-*.json"))


@pytest.mark.parametrize("argv0, args", [
    ("/venv/bin/lm_eval", ["--model", "hf", "--tasks", "t"]),  # no output folder: the printed commands only
    ("/venv/bin/mathjudge", ["rejudge", "s.jsonl", "--output_path", "o"]),  # its resume: the same command
    ("notebook.py", ["--output_path", "o"]),  # lm-eval from Python
])
def test_only_an_lm_eval_command_with_an_output_folder_keeps_a_notice(tmp_path, monkeypatch, capsys, argv0, args):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [argv0, *args])
    resume.begin()
    assert not list(tmp_path.rglob("mathjudge-resume-*.json")) and "mathjudge resume" not in capsys.readouterr().err


def test_the_resume_runs_with_the_runs_settings_where_this_environment_lacks_them(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", _argv(tmp_path))
    monkeypatch.setenv("MATHJUDGE_CACHE_DIR", str(tmp_path / "cache"))  # where the verdicts paid for are
    monkeypatch.setenv("MATHJUDGE_DATA_DIR", str(tmp_path / "data"))
    resume.begin()
    _, data = _notice(tmp_path)
    assert data["env"] == {"MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"), "MATHJUDGE_DATA_DIR": str(tmp_path / "data")}
    monkeypatch.delenv("MATHJUDGE_CACHE_DIR")  # a new shell; the data folder is set again, elsewhere
    monkeypatch.setenv("MATHJUDGE_DATA_DIR", str(tmp_path / "moved"))
    capsys.readouterr()
    assert main(["resume", "--print", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith(f"MATHJUDGE_CACHE_DIR={tmp_path / 'cache'} lm_eval run --model ")
    resume._restore_settings(data)
    assert os.environ["MATHJUDGE_CACHE_DIR"] == str(tmp_path / "cache")
    assert os.environ["MATHJUDGE_DATA_DIR"] == str(tmp_path / "moved")  # what this environment sets wins


def test_a_key_in_the_command_never_reaches_the_notice_and_the_resume_says_to_put_it_back(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["lm_eval", "--model", "openai-chat-completions", "--model_args",
                                      f"model=gpt-4o,api_key={KEY}", "--tasks", "t", "--output_path", str(tmp_path)])
    resume.begin()
    path, data = _notice(tmp_path)
    assert KEY not in path.read_text()
    with pytest.raises(ConfigError, match=r"held a credential, kept only redacted \(\*\*\*\); run it with the key"):
        resume.command(data)


def test_a_run_that_resumes_another_takes_its_notice_over(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_file = tmp_path / "run-1.jsonl"
    run_file.write_text("{}\n")
    other = tmp_path / "mathjudge-resume-20000101T000000-1.json"  # a different command: left alone
    other.write_text(json.dumps({"version": 1, "cwd": str(tmp_path), "argv": ["--tasks", "x"], "started": 1,
                                 "stage": "started", "file": None, "resume": ["--tasks", "x"]}))
    replay = ["lm_eval", "--model", R, "--model_args", f"path={run_file},fallback=hf", "--tasks", "t",
              "--output_path", str(tmp_path)]
    for argv in (_argv(tmp_path), _argv(tmp_path), replay):  # its own command again, then its printed replay
        before = resume._NOTICE.get("path")
        if before is not None:
            resume.note(str(run_file), complete=False)
        reset_plugin_state()
        monkeypatch.setattr(sys, "argv", argv)
        resume.begin()
        assert before is None or not os.path.exists(before)
        assert os.path.exists(resume._NOTICE["path"]) and other.exists()


def test_mathjudge_resume_finds_the_newest_unfinished_run_and_prints_its_command(tmp_path, monkeypatch, capsys):
    saved = tmp_path / "run-2.jsonl"
    saved.write_text("{}\n")
    for n, (stage, file) in enumerate([("started", None), ("judging", str(saved))]):
        (tmp_path / "out" / "model").mkdir(parents=True, exist_ok=True)
        (tmp_path / "out" / f"mathjudge-resume-{n}.json").write_text(json.dumps(
            {"version": 1, "cwd": str(tmp_path), "argv": ["--tasks", "t"], "started": 100 + n, "stage": stage,
             "file": file, "resume": ["--model", R, "--model_args", f"path={file}", "--tasks", "t"]}))
    monkeypatch.chdir(tmp_path)
    for where in ("out", "out/model"):  # the output folder, or lm-eval's model folder inside it
        assert main(["resume", "--print", where]) == 0
        assert capsys.readouterr().out.strip() == f"lm_eval --model {R} --model_args path={saved} --tasks t"
    assert main(["resume", "--list", "out"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in listed] == [str(tmp_path / "out" / f"mathjudge-resume-{n}.json")
                                                        for n in (1, 0)]
    assert "no model call" in listed[0] and "its own command runs again" in listed[1]
    saved.unlink()  # mathjudge cache --clear-generations: the file to replay is gone
    assert main(["resume", "--print", "out"]) == 2
    assert "is gone" in capsys.readouterr().err


@pytest.mark.parametrize("where, message", [
    ("nowhere", "does not exist; pass the --output_path of the run to resume"),
    (".", "no run to resume in"),
])
def test_mathjudge_resume_without_a_run_says_what_to_do(tmp_path, monkeypatch, capsys, where, message):
    monkeypatch.chdir(tmp_path)
    assert main(["resume", where]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


# ---------------------------------------------------------------------- the run's generations file
def _task(name, n, cache):
    from lm_eval.api.instance import Instance

    instances = [Instance(request_type="generate_until", doc={"question": f"q{i}"},
                          arguments=(f"Problem: q{i}\nSolution:", {"until": ["Problem:"]}), idx=0,
                          metadata=(name, i, 1)) for i in range(n)]
    task = _Task(name, instances)
    recovery.track(task, cache_dir=str(cache))
    return task


class _Task:
    """The parts of a judged task's run entry (harness/entry.py) that recovery reads."""

    def __init__(self, name, instances):
        self.name, self.instances = name, instances


def _generate(task, upto):
    for inst in task.instances[:upto]:
        recovery.note_generation("generate_until", inst.args, f"so \\boxed{{{inst.doc_id}}}")
    for inst in task.instances[:upto]:
        inst.resps.append(f"so \\boxed{{{inst.doc_id}}}")


@pytest.mark.parametrize("link", [True, False], ids=["linked", "copied"])
def test_the_run_file_keeps_its_name_and_holds_every_generation_once_they_are_saved(tmp_path, monkeypatch, capsys,
                                                                                    link):
    monkeypatch.setattr(sys, "argv", ["lm_eval", "--model", "hf", "--tasks", "a", "--output_path", str(tmp_path)])
    if not link:  # a folder where links cannot be made
        monkeypatch.setattr(os, "link", lambda *a: (_ for _ in ()).throw(OSError(1, "Operation not permitted")))
    task = _task("a", 3, tmp_path / "cache")
    _generate(task, 2)
    [run_file] = (tmp_path / "cache" / "generations").glob("run-*.jsonl")
    assert len(run_file.read_text().splitlines()) == 2
    assert f"saved in {run_file} as it finishes" in capsys.readouterr().err
    _generate(task, 3)
    saved = recovery.checkpoint(str(tmp_path / "cache"))
    assert run_file.read_bytes() == open(saved, "rb").read() and len(run_file.read_text().splitlines()) == 3
    assert (os.stat(run_file).st_ino == os.stat(saved).st_ino) == link
    assert stat.S_IMODE(run_file.stat().st_mode) == 0o600
    _, data = _notice(tmp_path)
    assert data["stage"] == "judging" and data["file"] == str(run_file)
    assert sorted(p.name for p in (tmp_path / "cache" / "generations").iterdir()) == sorted(
        [run_file.name, os.path.basename(saved)])  # no temporary file left


def test_a_model_that_reports_no_generation_gets_its_run_file_and_line_at_the_checkpoint(tmp_path, monkeypatch,
                                                                                         capsys):
    monkeypatch.setattr(sys, "argv", ["lm_eval", "--model", "vllm", "--tasks", "a"])
    task = _task("a", 2, tmp_path)
    for inst in task.instances:  # vLLM reports nothing until its batch ends
        inst.resps.append("so \\boxed{1}")
    recovery.checkpoint(str(tmp_path))
    [run_file] = (tmp_path / "generations").glob("run-*.jsonl")
    assert f"every generation of the judged tasks is saved in {run_file}; should this run die, resume with " \
           f"lm_eval --model {R} --model_args path={run_file} --tasks a" in capsys.readouterr().err


def test_a_replay_without_a_model_behind_it_makes_no_second_copy(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["lm_eval", "--model", R, "--model_args", "path=x.jsonl", "--tasks", "a"])
    task = _task("a", 2, tmp_path)
    for inst in task.instances:
        inst.resps.append("so \\boxed{1}")
    recovery.checkpoint(str(tmp_path))
    assert not list((tmp_path / "generations").glob("run-*.jsonl")) and "should this run die" not in \
        capsys.readouterr().err
