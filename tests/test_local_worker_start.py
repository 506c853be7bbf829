"""The local judge's worker processes start apart from the working folder, and one that cannot start
says why at once (issue 20): a stray ``inspect.py`` in the folder a run starts from used to break every
worker, and the message blamed a 120 s start-up limit although they had failed within a second."""

from __future__ import annotations

import pytest

from lm_eval_mathjudge.backends.local import LocalBackend
from lm_eval_mathjudge.core.errors import FatalJudgeError
from lm_eval_mathjudge.core.parsing import parse_exact_match
from lm_eval_mathjudge.core.types import JudgeRequest
from tests.conftest import read_jsonl

pytestmark = pytest.mark.e2e

# What a working folder may hold by accident: modules named like the standard library's or this package.
STRAYS = {
    "inspect.py": "raise SystemExit('a stray inspect.py was imported')\n",
    "json.py": "raise SystemExit('a stray json.py was imported')\n",
    "lm_eval_mathjudge/__init__.py": "raise SystemExit('a stray lm_eval_mathjudge folder was imported')\n",
    "math_verify/__init__.py": "raise SystemExit('a stray math_verify folder was imported')\n",
}


def _gsm8k(shared_data, n: int = 3) -> list[tuple[str, str]]:
    """(gold, a response that states it) for real GSM8K rows."""
    rows = read_jsonl(shared_data / "gsm8k" / "test.jsonl")[:n]
    golds = [r["answer"].split("####")[-1].strip().replace(",", "") for r in rows]
    return [(g, f"Working through it step by step, the total is \\boxed{{{g}}}.") for g in golds]


def test_workers_ignore_stray_modules_in_the_working_folder(tmp_path, monkeypatch, shared_data):
    for name, text in STRAYS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    backend = LocalBackend(workers=1)
    try:
        for gold, response in _gsm8k(shared_data):
            reply = backend.complete(JudgeRequest(prompt="", fields={"answer": gold, "response": response}))
            assert parse_exact_match(reply.text).correct, reply.text
            wrong = backend.complete(JudgeRequest(prompt="", fields={"answer": gold, "response": "\\boxed{-1}"}))
            assert parse_exact_match(wrong.text).correct is False
    finally:
        backend.close()


def test_a_worker_that_cannot_start_reports_its_own_error_at_once(tmp_path, monkeypatch):
    broken = tmp_path / "site"
    (broken / "math_verify").mkdir(parents=True)  # a broken install of the library the worker needs
    (broken / "math_verify" / "__init__.py").write_text("raise ImportError('math_verify is half installed here')\n")
    monkeypatch.setenv("PYTHONPATH", str(broken))
    backend = LocalBackend(workers=1)
    try:
        with pytest.raises(FatalJudgeError) as caught:
            backend.complete(JudgeRequest(prompt="", fields={"answer": "18", "response": "\\boxed{18}"}))
    finally:
        backend.close()
    message = str(caught.value)
    assert "math_verify is half installed here" in message  # the worker's own error, from its stderr
    assert "exited while starting" in message and "did not start within" not in message  # not the start-up limit
    assert caught.value.kind == "local_start"
