"""Settings are validated completely before anything runs; defaults come from one (judge, backend) table.

Every call passes ``environ=`` explicitly: the real process environment is never read.
"""

from __future__ import annotations

import pytest

from lm_eval_mathjudge.settings.layers import resolve_settings
from lm_eval_mathjudge.settings.models import DEFAULTS, REASONING_MAX_TOKENS, is_reasoning_model
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.errors import ConfigError

CANARY = "sk-canary-0123456789abcdef"

# Each of these passed validation before, then failed every call after generation (or silently misbehaved).
INVALID = [
    # layer, raw settings, pattern the message must contain
    pytest.param("env", {"MATHJUDGE_TIMEOUT": "nan"}, "timeout", id="env-nan-timeout"),
    pytest.param("env", {"MATHJUDGE_TIMEOUT": "inf"}, "timeout", id="env-inf-timeout"),
    pytest.param("env", {"MATHJUDGE_TEMPERATURE": "NaN"}, "temperature", id="env-nan-temperature"),
    pytest.param("meta", {"judge_temperature": float("inf")}, "temperature", id="meta-inf-temperature"),
    pytest.param("meta", {"judge_temperature": -0.5}, "temperature", id="negative-temperature"),
    pytest.param("meta", {"judge_temperature": 7}, "temperature", id="temperature-above-2"),
    pytest.param("meta", {"judge_rpm": float("nan")}, "rpm", id="nan-rpm"),
    pytest.param("meta", {"judge_model": ""}, "model", id="empty-model"),
    pytest.param("meta", {"judge_model": "   "}, "model", id="blank-model"),
    pytest.param("yaml", {"model": ""}, "model", id="yaml-empty-model"),
    pytest.param("meta", {"judge_concurrency": 2.7}, "concurrency", id="fractional-concurrency"),
    pytest.param("meta", {"judge_concurrency": "2.7"}, "concurrency", id="fractional-concurrency-text"),
    pytest.param("meta", {"judge_concurrency": True}, "concurrency", id="bool-as-concurrency"),
    pytest.param("meta", {"judge_concurrency": 100000}, "concurrency", id="concurrency-too-large"),
    pytest.param("meta", {"judge_max_tokens": "1e9"}, "max_tokens", id="max-tokens-float-text"),
    pytest.param("meta", {"judge_timeout": 86400}, "timeout", id="timeout-a-day"),
    pytest.param("meta", {"judge_cache": "perhaps"}, "cache", id="bool-word"),
    pytest.param("meta", {"judge_cache": 2}, "cache", id="bool-two"),
    pytest.param("meta", {"judge_preflight": "nope"}, "preflight", id="preflight-word"),
    pytest.param("meta", {"judge_thinking_budget": 40000}, "thinking_budget", id="thinking-budget-too-large"),
    pytest.param("meta", {"judge_thinking_budget": -2}, "thinking_budget", id="thinking-budget-negative"),
    pytest.param("env", {"MATHJUDGE_THINKING_BUDGET": "1.5"}, "thinking_budget", id="thinking-budget-fraction"),
    pytest.param("meta", {"judge_reasoning_effort": "max"}, "reasoning_effort", id="reasoning-effort-unknown"),
    pytest.param("meta", {"judge_base_url": "127.0.0.1:8000/v1"}, "base_url", id="base-url-without-scheme"),
    pytest.param("meta", {"judge_model": ["gpt-4o"]}, "model", id="model-as-list"),
    pytest.param("env", {"MATHJUDGE_CONCURENCY": "4"}, "MATHJUDGE_CONCURENCY", id="unknown-env-name"),
]


def _layers(layer: str, raw: dict):
    return ({**raw} if layer == "yaml" else None, raw if layer == "meta" else None, raw if layer == "env" else {})


@pytest.mark.parametrize("layer, raw, pattern", INVALID)
def test_invalid_settings_are_config_errors(layer, raw, pattern):
    yaml_settings, metadata, env = _layers(layer, raw)
    with pytest.raises(ConfigError, match=pattern):
        resolve_settings("exact_match", yaml_settings, metadata, environ=env)


VALID = [
    pytest.param({"judge_preflight": "false"}, "preflight", False, id="preflight-off"),
    pytest.param({"judge_thinking_budget": "-1"}, "thinking_budget", -1, id="thinking-dynamic"),
    pytest.param({"judge_thinking_budget": 0}, "thinking_budget", 0, id="thinking-off"),
    pytest.param({"judge_thinking_budget": "32768"}, "thinking_budget", 32768, id="thinking-max"),
    pytest.param({"judge_thinking_budget": None}, "thinking_budget", None, id="thinking-none"),
    pytest.param({"judge_reasoning_effort": "low"}, "reasoning_effort", "low", id="effort-low"),
    pytest.param({"judge_reasoning_effort": "minimal"}, "reasoning_effort", "minimal", id="effort-minimal"),
    pytest.param({"judge_temperature": "2"}, "temperature", 2.0, id="temperature-2"),
    pytest.param({"judge_concurrency": 4.0}, "concurrency", 4, id="whole-float-concurrency"),
    pytest.param({"judge_cache": 0}, "cache", False, id="bool-from-0"),
]


@pytest.mark.parametrize("metadata, name, expected", VALID)
def test_valid_settings_are_converted_to_their_type(metadata, name, expected):
    value = getattr(resolve_settings("exact_match", None, metadata, environ={}), name)
    assert value == expected and type(value) is type(expected)


def test_direct_construction_is_type_checked_too():
    with pytest.raises(ConfigError, match="concurrency"):
        JudgeSettings(concurrency="4")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="timeout"):
        JudgeSettings(timeout=float("nan"))


# ---------------------------------------------------------------------- defaults table
@pytest.mark.parametrize("judge, backend, model, max_tokens", [
    ("exact_match", "openai", "gpt-4-turbo-2024-04-09", 1024),
    ("exact_match", "azure", "gpt-4-turbo-2024-04-09", 1024),
    ("exact_match", "local", "math-verify", 1024),
    # Gemini 2.5 Pro's thinking counts against max_output_tokens: 1024 would end in max_tokens failures.
    ("exact_match", "gemini", "gemini-2.5-pro", 8192),
    ("vlm", "gemini", "gemini-2.5-pro", 8192),
    ("vlm", "openai", "gpt-4o-2024-08-06", 8192),
])
def test_defaults_per_judge_and_backend(judge, backend, model, max_tokens):
    settings = resolve_settings(judge, None, {"judge_backend": backend}, environ={})
    assert (settings.model, settings.max_tokens) == (model, max_tokens)
    assert DEFAULTS[(judge, backend)]["model"] == model


@pytest.mark.parametrize("model, reasoning", [
    ("o1", True), ("o1-mini", True), ("o3-2025-04-16", True), ("o4-mini", True), ("gpt-5", True),
    ("gpt-5-mini-2025-08-07", True), ("openai/gpt-5", True), ("O3", True),
    ("gpt-4o-2024-08-06", False), ("gpt-4-turbo-2024-04-09", False), ("omni-judge", False),
    ("gemini-2.5-pro", False), ("Qwen/Qwen2.5-72B-Instruct", False), ("o1x", False),
])
def test_is_reasoning_model(model, reasoning):
    assert is_reasoning_model(model) is reasoning


def test_reasoning_judges_get_room_to_think_unless_max_tokens_is_set():
    assert resolve_settings("exact_match", None, {"judge_model": "o4-mini"}, environ={}).max_tokens \
        == REASONING_MAX_TOKENS
    assert resolve_settings("exact_match", None, {"judge_model": "gpt-5", "judge_max_tokens": 2048},
                            environ={}).max_tokens == 2048


# ---------------------------------------------------------------------- credentials
CREDENTIALS = [
    pytest.param({"api_key": CANARY}, "api_key", id="api-key-without-judge-prefix"),
    pytest.param({"openai_api_key": CANARY}, "openai_api_key", id="openai-api-key"),
    pytest.param({"apiKey": CANARY}, "apiKey", id="camel-case"),
    pytest.param({"hf_token": CANARY}, "hf_token", id="token"),
    pytest.param({"judge_base_url": "http://user:hunter2@127.0.0.1:9/v1"}, "judge_base_url", id="url-userinfo"),
    pytest.param({"judge_base_url": f"https://judge.example/v1?api_key={CANARY}"}, "judge_base_url",
                 id="url-api-key-query"),
    pytest.param({"judge_base_url": f"https://judge.example/v1?key={CANARY}"}, "judge_base_url", id="url-key-query"),
    pytest.param({"vlm_judge_base_url": f"https://x.example/v1?foo=1&access_token={CANARY}"}, "vlm_judge_base_url",
                 id="scoped-url-token-query"),
    pytest.param({"base_url": "http://bob:pw@127.0.0.1:8000/v1/chat/completions"}, "base_url",
                 id="model-args-url-with-userinfo"),
]


@pytest.mark.parametrize("metadata, name", CREDENTIALS)
def test_credentials_in_metadata_are_refused_without_echoing_them(metadata, name):
    with pytest.raises(ConfigError) as caught:
        resolve_settings("exact_match", None, metadata, environ={})
    message = str(caught.value)
    assert name in message and "environment variable" in message
    assert CANARY not in message and "hunter2" not in message and ":pw@" not in message


@pytest.mark.parametrize("metadata", [
    pytest.param({"tokenizer": "gpt2", "tokenized_requests": False, "max_gen_toks": 2048,
                  "base_url": "http://127.0.0.1:8000/v1/chat/completions", "num_concurrent": 4}, id="lm-eval-model-args"),
    pytest.param({"judge_max_tokens": 64, "vlm_judge_max_tokens": 128}, id="max-tokens"),
    pytest.param({"judge_base_url": "https://judge.example/v1?api-version=2024-06-01"}, id="harmless-query"),
])
def test_ordinary_model_args_are_not_credentials(metadata):
    resolve_settings("exact_match", None, metadata, environ={})
