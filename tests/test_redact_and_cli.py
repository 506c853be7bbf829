"""Credential scrubbing, and the maintenance commands of ``python -m lm_eval_mathjudge``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lm_eval_mathjudge.judging.cache import FILE_NAME, Reply, ReplyCache
from lm_eval_mathjudge.core.redact import public_url, redact


@pytest.mark.parametrize("text, secret", [
    pytest.param("Incorrect API key provided: sk-proj-abcdefghijklmnop", "sk-proj-abcdefghijklmnop", id="openai-key"),
    pytest.param("Incorrect API key provided: sk-canar****cdef.", "sk-canar****cdef", id="masked-openai-key"),
    pytest.param("API key not valid: AIzaSyA1234567890abcdefghijklmnop", "AIzaSyA1234567890abcdefghijklmnop",
                 id="gemini-key"),
    pytest.param("cannot reach https://bob:hunter2@proxy.internal/v1", "bob:hunter2", id="url-userinfo"),
    pytest.param("server echoed plain-canary-value-42", "plain-canary-value-42", id="value-of-a-key-variable"),
])
def test_redact(monkeypatch, text, secret):
    monkeypatch.setenv("OPENAI_API_KEY", "plain-canary-value-42")
    cleaned = redact(text)
    assert secret not in cleaned and "***" in cleaned


@pytest.mark.parametrize("url, expected", [
    ("https://bob:hunter2@proxy.internal:8443/v1/?api-key=abc#x", "https://proxy.internal:8443/v1"),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
])
def test_public_url_keeps_only_scheme_host_port_and_path(url, expected):
    assert public_url(url) == expected


def _cli(*args: str, cache_dir) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lm_eval_mathjudge", *args, "--cache-dir", str(cache_dir)],
                          capture_output=True, text=True, check=True)


@pytest.mark.e2e
def test_cache_clear_removes_only_the_cache_and_keeps_saved_generations(tmp_path):
    cache = ReplyCache(str(tmp_path))
    cache.put("k", Reply(text="Error Analysis: ok\nFinal Verdict: Correct"), "local:math-verify")
    cache.close()
    (tmp_path / "generations").mkdir()
    (tmp_path / "generations" / "g.jsonl").write_text("{}\n")
    (tmp_path / "unrelated.txt").write_text("not ours")

    assert "1 judge replies" in _cli("cache", cache_dir=tmp_path).stdout
    cleared = _cli("cache", "--clear", cache_dir=tmp_path)
    # Saved generations are paid work that an error message points to: clearing the cache keeps them.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["generations", "unrelated.txt"]
    assert (tmp_path / "generations" / "g.jsonl").read_text() == "{}\n"
    assert "kept the saved generations" in cleared.stdout
    assert "no judge cache yet" in _cli("cache", cache_dir=tmp_path).stdout
    assert not (tmp_path / FILE_NAME).exists()
