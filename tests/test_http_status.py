"""The one HTTP status table both backends use (backends/_http.py), as a table of real replies.

The wire tests (test_*_backend_wire.py) show each backend reaches this table
through its SDK; here the table itself is checked case by case.
"""

from __future__ import annotations

import pytest

from lm_eval_mathjudge.backends._http import header_retry_after, status_error
from lm_eval_mathjudge.core.errors import FatalJudgeError, JudgeRefusal, TransientJudgeError

KEYS = "OPENAI_API_KEY"
ENDPOINT = "https://api.openai.com/v1"

CASES = [
    # status, message, extra kwargs, class, kind, retry_after, words in the message
    pytest.param(429, "Rate limit reached for gpt-4-turbo in organization org-x on tokens per min.",
                 {"headers": {"retry-after": "7"}}, TransientJudgeError, "rate_limited", 7.0, [],
                 id="429-retry-after"),
    pytest.param(429, "Rate limit reached", {"headers": {"retry-after-ms": "250"}}, TransientJudgeError,
                 "rate_limited", 0.25, [], id="429-retry-after-ms"),
    pytest.param(429, "Resource has been exhausted (e.g. check quota).",
                 {"status_name": "RESOURCE_EXHAUSTED", "retry_after": 1.5}, TransientJudgeError, "rate_limited",
                 1.5, ["RESOURCE_EXHAUSTED"], id="429-retry-info-from-the-body"),
    pytest.param(429, "slow down", {"headers": {"retry-after": "3"}, "retry_after": 1.5}, TransientJudgeError,
                 "rate_limited", 3.0, [], id="header-wins-over-body"),
    pytest.param(408, "Request Timeout", {}, TransientJudgeError, "http_408", None, [], id="408"),
    pytest.param(409, "conflict", {}, TransientJudgeError, "http_409", None, [], id="409"),
    pytest.param(425, "too early", {}, TransientJudgeError, "http_425", None, [], id="425"),
    pytest.param(500, "The server had an error while processing your request.", {}, TransientJudgeError,
                 "http_500", None, [], id="500"),
    pytest.param(529, "Overloaded", {"headers": {"retry-after": "soon"}}, TransientJudgeError, "http_529", None,
                 [], id="529-unparseable-retry-after"),
    pytest.param(302, "redirected", {}, TransientJudgeError, "http_302", None, [], id="odd-code-below-400"),
    pytest.param(401, "Incorrect API key provided: sk-abc1234*****wxyz.", {}, FatalJudgeError, "http_401", None,
                 ["check OPENAI_API_KEY", ENDPOINT, "not retried", "provided: ***."], id="401-key-shape-redacted"),
    pytest.param(403, "Country, region, or territory not supported", {}, FatalJudgeError, "http_403", None,
                 ["lack access", "check OPENAI_API_KEY"], id="403"),
    pytest.param(404, "The model `gpt-4-turbo-2024-04-9` does not exist or you do not have access to it.", {},
                 FatalJudgeError, "http_404", None, ["judge_model", "judge_base_url", ENDPOINT], id="404"),
    pytest.param(422, "Unprocessable Entity", {}, FatalJudgeError, "http_422", None,
                 ["the request was rejected"], id="422"),
    # 5xx that no retry can change (retry.NEVER_TRANSIENT): before, a File API 501 was asked 7 times
    pytest.param(501, "Method not implemented for this endpoint.", {"status_name": "NOT_IMPLEMENTED"},
                 FatalJudgeError, "http_501", None, ["does not implement this request", "File API", "not retried"],
                 id="501-not-implemented"),
    pytest.param(505, "HTTP Version Not Supported", {}, FatalJudgeError, "http_505", None,
                 ["HTTP version", "judge_base_url"], id="505"),
    pytest.param(413, "Request Entity Too Large", {}, FatalJudgeError, "http_413", None,
                 ["larger than the endpoint accepts"], id="413"),
    pytest.param(400, "API key not valid. Please pass a valid API key.", {"status_name": "INVALID_ARGUMENT"},
                 FatalJudgeError, "auth", None, ["check OPENAI_API_KEY", "INVALID_ARGUMENT"], id="400-gemini-bad-key"),
    pytest.param(400, "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                 "'max_completion_tokens' instead.", {"code": "unsupported_parameter"}, FatalJudgeError, "http_400",
                 None, ["reasoning model", "deployment named after the model"], id="400-reasoning-deployment"),
    pytest.param(400, "Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) "
                 "value is supported.", {"code": "unsupported_value"}, FatalJudgeError, "http_400", None,
                 ["reasoning model"], id="400-reasoning-temperature"),
    pytest.param(400, "Invalid value for 'temperature'", {}, FatalJudgeError, "http_400", None,
                 ["the request was rejected"], id="400-bad-request"),
    pytest.param(400, "This model's maximum context length is 8192 tokens. However, you requested 9100 tokens.",
                 {"code": "context_length_exceeded"}, JudgeRefusal, "context_length", None, ["too long"],
                 id="400-context-length"),
    pytest.param(400, "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
                 {"status_name": "INVALID_ARGUMENT"}, JudgeRefusal, "context_length", None, ["too long"],
                 id="400-gemini-input-too-long"),
    pytest.param(400, "The response was filtered due to the prompt triggering Azure OpenAI's content management "
                 "policy.", {"code": "content_filter"}, JudgeRefusal, "content_filter", None, ["content filter"],
                 id="400-azure-content-filter"),
]


@pytest.mark.parametrize("status, message, extra, cls, kind, retry_after, words", CASES)
def test_status_table(status, message, extra, cls, kind, retry_after, words):
    error = status_error(status, message, keys=KEYS, endpoint=ENDPOINT, **extra)
    assert type(error) is cls and error.kind == kind and error.status == status
    assert error.retry_after == (None if retry_after is None else pytest.approx(retry_after))
    text = str(error)
    assert text.startswith(f"judge returned HTTP {status}") and message[:20] in text
    for word in words:
        assert word in text


def test_messages_are_redacted_and_bounded(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-0123456789abcdef")
    error = status_error(401, "Incorrect API key provided: sk-live-0123456789abcdef. " + "x" * 5000, keys=KEYS)
    assert "0123456789abcdef" not in str(error) and len(str(error)) < 800


@pytest.mark.parametrize("headers, expected", [
    ({"retry-after": "2"}, 2.0),
    ({"retry-after-ms": "1500"}, 1.5),
    ({"retry-after": "2", "retry-after-ms": "1500"}, 2.0),
    ({"retry-after": "later"}, None),
    ({}, None),
    (None, None),
])
def test_header_retry_after(headers, expected):
    assert header_retry_after(headers) == expected
