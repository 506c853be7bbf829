"""Hostile text and errors at our own seams: scrubbing, outcomes from typed errors, the retry summary on the
progress bar, preflight once per judge, and the start-up hook's swallowed errors at debug level."""

from __future__ import annotations

import functools
import logging
import types
from typing import Any

import pytest

import lm_eval_mathjudge_hook
from lm_eval_mathjudge.judging import client as client_module
from lm_eval_mathjudge.judging.cache import ReplyCache, request_key
from lm_eval_mathjudge.judging.client import JudgeClient, outcome_from_error, preflight_once
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.errors import (FatalJudgeError, JudgeRefusal, MediaError, TransientJudgeError,
                                           UnparseableReply)
from lm_eval_mathjudge.core.parsing import parse_exact_match
from lm_eval_mathjudge.core.redact import install_log_filter, redact
from lm_eval_mathjudge.calls.retry import RetryPolicy
from lm_eval_mathjudge.core.types import JudgeRequest, Reply
from tests._helpers import REPLY_CORRECT

KEY = "sk-canary-7f3d9c2b4a1e8f6d"
PLAIN = "plain-configured-value-0042"  # a key with no recognisable shape: only its value gives it away


# ---------------------------------------------------------------------- redact
@pytest.mark.parametrize("text, secret", [
    pytest.param("Authorization: Bearer abcdEFGH1234.xyz", "abcdEFGH1234.xyz", id="bearer"),
    pytest.param("Proxy-Authorization: Basic YWxpY2U6aHVudGVyMg==", "YWxpY2U6aHVudGVyMg==", id="basic"),
    pytest.param('{"x-api-key": "k-9a8b7c6d5e"}', "k-9a8b7c6d5e", id="x-api-key-json"),
    pytest.param("x-goog-api-key: gk_0123456789", "gk_0123456789", id="goog-header"),
    pytest.param("GET https://judge.example/v1/models?key=zz-0123456789 failed", "zz-0123456789", id="query-key"),
    pytest.param("POST /v1?api_key=zz-0123456789&x=1", "zz-0123456789", id="query-api-key"),
    pytest.param(f"the server echoed {PLAIN} back", PLAIN, id="configured-value"),
    pytest.param("token from ANTHROPIC: other-provider-key-77", "other-provider-key-77", id="any-api-key-variable"),
])
def test_redact_scrubs_headers_queries_and_configured_values(monkeypatch, text, secret):
    monkeypatch.setenv("OPENAI_API_KEY", PLAIN)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "other-provider-key-77")
    assert secret not in redact(text) and "***" in redact(text)


def test_redact_keeps_ordinary_text(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")  # too short to be a secret: would scrub ordinary words
    text = ("Error Analysis: the EMPTY set has 0 elements; key insight: 2+2=4. Basic arithmetic, Token counts "
            "and a max token: 1024 budget are not credentials.\nFinal Verdict: Correct")
    assert redact(text) == text


def test_the_log_filter_scrubs_every_module_logger(monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", PLAIN)
    install_log_filter()
    with caplog.at_level(logging.DEBUG, logger="lm_eval_mathjudge"):
        logging.getLogger("lm_eval_mathjudge.judging.client").warning("judge said %s", PLAIN)
    assert PLAIN not in caplog.text and "judge said ***" in caplog.text


# ---------------------------------------------------------------------- outcomes from typed errors
@pytest.mark.parametrize("error, failure, scored", [
    (TransientJudgeError("HTTP 503", kind="http_503"), "http_503", False),
    (FatalJudgeError("HTTP 401", kind="http_401"), "http_401", False),
    (JudgeRefusal("blocked: SAFETY", kind="safety"), "safety", True),
    (MediaError("out.png does not exist"), "media", True),
    (UnparseableReply("no verdict line"), "unparseable", True),
])
def test_one_function_builds_outcomes_and_the_error_says_if_it_is_scored(error, failure, scored):
    outcome = outcome_from_error(error, calls=1)
    assert (outcome.failure, outcome.transport, outcome.verdict, outcome.calls) == (failure, not scored, None, 1)


def test_outcome_errors_are_scrubbed_and_valid_unicode(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    outcome = outcome_from_error(FatalJudgeError(f"Incorrect API key {KEY} \ud800", kind="http_401"))
    assert KEY not in outcome.error and "\ud800" not in outcome.error
    outcome.error.encode("utf-8")


# ---------------------------------------------------------------------- client
class ScriptedBackend:
    def __init__(self, script):
        self.script, self.calls, self.preflights = script, 0, 0

    def identity(self) -> dict[str, Any]:
        return {"backend": "fake", "model": "fake-judge-1"}

    def complete(self, request: JudgeRequest) -> Reply:
        self.calls += 1
        return self.script(request, self.calls)

    def preflight(self) -> None:
        self.preflights += 1

    def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setattr(client_module, "RetryPolicy", functools.partial(RetryPolicy, base_delay=0.001))


def _client(backend, cache=None, progress=False, **overrides) -> JudgeClient:
    settings = JudgeSettings(**{"backend": "openai", "model": "fake-judge-1", "concurrency": 2, **overrides})
    return JudgeClient(backend, parse_exact_match, settings, "exact_match@t", cache, progress=progress)


def test_replies_are_cleaned_and_scrubbed_before_they_are_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    hostile = f"Seen header Authorization: Bearer {KEY} and \ud800.\n{REPLY_CORRECT}"
    cache = ReplyCache(str(tmp_path))
    client = _client(ScriptedBackend(lambda request, n: Reply(text=hostile)), cache)
    request = JudgeRequest(prompt="judge this \ud800 response")  # a lone surrogate in the request too
    [outcome] = client.judge_all([request])
    assert outcome.verdict.correct is True
    key = request_key({**client.identity, **request.key_payload()})
    stored = cache.get(key).text
    assert KEY not in stored and "\ud800" not in stored and "Bearer ***" in stored
    assert outcome.raw_reply == stored
    cache.close()


def test_retries_are_a_summary_on_the_progress_bar_not_a_warning_each(capsys, caplog):
    def flaky(request, n):
        if n <= 3:
            raise TransientJudgeError("HTTP 429", kind="rate_limited", status=429)
        return Reply(text=REPLY_CORRECT)

    client = _client(ScriptedBackend(flaky), progress=True, concurrency=1)
    with caplog.at_level(logging.DEBUG, logger="lm_eval_mathjudge"):
        [outcome] = client.judge_all([JudgeRequest(prompt="p")], desc="judging t")
    assert outcome.verdict.correct is True
    assert (client.stats.retries, client.stats.rate_limited) == (3, 3)
    bar = capsys.readouterr().err
    assert "retries=3" in bar and "rate_limited=3" in bar
    assert client.stats.as_dict()["rate_limited"] == 3
    records = [r for r in caplog.records if r.name == "lm_eval_mathjudge.judging.client"]
    assert len(records) == 3 and all(r.levelno == logging.DEBUG for r in records)


def test_preflight_runs_once_per_judge_and_only_when_enabled(monkeypatch):
    monkeypatch.setattr(client_module, "_PREFLIGHTED", set())
    backend = ScriptedBackend(None)
    on = JudgeSettings(backend="openai", model="fake-judge-1")
    assert preflight_once(backend, on) is True
    assert preflight_once(backend, on) is False
    assert backend.preflights == 1
    other = JudgeSettings(backend="openai", model="fake-judge-1", base_url="http://127.0.0.1:9/v1")
    assert preflight_once(backend, other) is True  # another endpoint is another judge
    assert preflight_once(ScriptedBackend(None), JudgeSettings(preflight=False)) is False

    class NoPreflight:  # the local judge has nothing to look up
        def identity(self):
            return {"backend": "local"}
    assert preflight_once(NoPreflight(), on) is False


def test_a_failing_preflight_is_raised_and_retried_next_time(monkeypatch):
    monkeypatch.setattr(client_module, "_PREFLIGHTED", set())
    backend = ScriptedBackend(None)

    def refuse():
        backend.preflights += 1
        raise FatalJudgeError("model lookup at http://127.0.0.1:9/v1 answered 404", kind="http_404", status=404)
    backend.preflight = refuse
    settings = JudgeSettings(backend="openai", model="fake-judge-1")
    for _ in range(2):
        with pytest.raises(FatalJudgeError, match="127.0.0.1:9"):
            preflight_once(backend, settings)
    assert backend.preflights == 2


# ---------------------------------------------------------------------- start-up hook
def test_the_start_up_hook_logs_what_it_swallows_at_debug_level(caplog):
    class Inner:
        def exec_module(self, module):
            pass

    loader = lm_eval_mathjudge_hook._Loader(Inner())
    with caplog.at_level(logging.DEBUG, logger="lm_eval_mathjudge._startup"):
        loader.exec_module(types.ModuleType("lm_eval.tasks.manager"))  # an lm-eval without TaskManager: no raise
    [record] = [r for r in caplog.records if r.name == "lm_eval_mathjudge._startup"]
    assert record.levelno == logging.DEBUG and "lm_eval.tasks.manager" in record.getMessage()
    assert "TaskManager" in caplog.text
