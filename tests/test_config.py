"""resolve_settings: four layers, coercion of strings, and the rejections that protect a run.

Every call passes ``environ=`` explicitly: the real process environment is never read.
"""

from __future__ import annotations

import json
import re

import pytest

from lm_eval_mathjudge.settings.layers import resolve_settings
from lm_eval_mathjudge.settings.models import DEFAULT_EXACT_MATCH_MODEL, DEFAULT_VLM_MODEL
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.errors import ConfigError

CANARY = "sk-canary-0123456789abcdef"

# ---------------------------------------------------------------------- precedence

PRECEDENCE = [
    # judge, yaml settings, env, metadata, expected attributes
    pytest.param("exact_match", None, {}, None,
                 {"backend": "openai", "model": DEFAULT_EXACT_MATCH_MODEL, "concurrency": 64,
                  "max_tokens": 1024, "max_retries": 6, "cache": True, "base_url": None},
                 id="built-in-defaults"),
    pytest.param("vlm", None, {}, None,
                 {"backend": "gemini", "model": DEFAULT_VLM_MODEL, "max_tokens": 8192},
                 id="vlm-defaults"),
    pytest.param("exact_match", {"concurrency": 8, "model": "gpt-4o-2024-08-06"}, {}, None,
                 {"concurrency": 8, "model": "gpt-4o-2024-08-06"},
                 id="yaml-over-defaults"),
    pytest.param("vlm", {"max_tokens": 4096}, {}, None, {"max_tokens": 4096},
                 id="yaml-over-judge-default"),
    pytest.param("exact_match", {"concurrency": 8}, {"MATHJUDGE_CONCURRENCY": "32"}, None,
                 {"concurrency": 32},
                 id="env-over-yaml"),
    pytest.param("exact_match", {"concurrency": 8}, {"MATHJUDGE_CONCURRENCY": "32"},
                 {"judge_concurrency": 4}, {"concurrency": 4},
                 id="metadata-over-env"),
    pytest.param("exact_match", None, {"MATHJUDGE_MODEL": "gpt-4o-mini"},
                 {"judge_model": "gpt-4.1-2025-04-14"}, {"model": "gpt-4.1-2025-04-14"},
                 id="metadata-model-over-env-model"),
    pytest.param("exact_match", {"timeout": 30}, {"MATHJUDGE_CONCURRENCY": ""}, None,
                 {"concurrency": 64, "timeout": 30.0},
                 id="empty-env-value-ignored"),
    pytest.param("exact_match", {"rpm": 500},
                 {"MATHJUDGE_RPM": "100", "MATHJUDGE_BASE_URL": "http://127.0.0.1:8000/v1"},
                 {"judge_max_retries": 2},
                 {"rpm": 100.0, "base_url": "http://127.0.0.1:8000/v1", "max_retries": 2,
                  "model": DEFAULT_EXACT_MATCH_MODEL},
                 id="layers-mix-per-field"),
    pytest.param("exact_match", None, {"MATHJUDGE_CACHE_DIR": "/tmp/judge-cache"}, None,
                 {"cache_dir": "/tmp/judge-cache"}, id="env-cache-dir"),
    pytest.param("exact_match", None, {"OPENAI_MODEL": "x", "MATHJUDGE": "y", "concurrency": "2"},
                 {"pretrained": "Qwen/Qwen2.5-Math-7B", "max_gen_toks": 2048},
                 {"concurrency": 64, "model": DEFAULT_EXACT_MATCH_MODEL},
                 id="unrelated-env-and-metadata-ignored"),
    pytest.param("exact_match", None, {}, {"judge_base_url": None}, {"base_url": None},
                 id="metadata-none-base-url"),
]


@pytest.mark.parametrize("judge, yaml_settings, env, metadata, expected", PRECEDENCE)
def test_precedence(judge, yaml_settings, env, metadata, expected):
    settings = resolve_settings(judge, yaml_settings, metadata, environ=env)
    assert {name: getattr(settings, name) for name in expected} == expected


# ------------------------------------------------------------------------ coercion

COERCION = [
    # layer, name, raw value, expected value (and type)
    pytest.param("env", "concurrency", "32", 32, id="env-int"),
    pytest.param("env", "cache", "false", False, id="env-false"),
    pytest.param("env", "cache", "0", False, id="env-zero-false"),
    pytest.param("env", "cache", " Off ", False, id="env-off-padded"),
    pytest.param("env", "cache", "TRUE", True, id="env-true-upper"),
    pytest.param("env", "timeout", "0.5", 0.5, id="env-float"),
    pytest.param("env", "temperature", "0", 0.0, id="env-float-from-int-text"),
    pytest.param("meta", "max_retries", "2", 2, id="meta-int-from-model-args"),
    pytest.param("meta", "cache", "false", False, id="meta-false"),
    pytest.param("meta", "cache", "yes", True, id="meta-yes"),
    pytest.param("meta", "cache", False, False, id="meta-real-bool"),
    pytest.param("meta", "rpm", 600, 600.0, id="meta-int-into-float"),
    pytest.param("meta", "max_tokens", 512, 512, id="meta-real-int"),
    pytest.param("yaml", "temperature", 1, 1.0, id="yaml-int-into-float"),
    pytest.param("yaml", "base_url", "http://localhost:8000/v1", "http://localhost:8000/v1", id="yaml-str"),
]


def layered(layer: str, name: str, value):
    yaml_settings = {name: value} if layer == "yaml" else None
    env = {f"MATHJUDGE_{name.upper()}": value} if layer == "env" else {}
    metadata = {f"judge_{name}": value} if layer == "meta" else None
    return yaml_settings, metadata, env


@pytest.mark.parametrize("layer, name, raw, expected", COERCION)
def test_coercion(layer, name, raw, expected):
    yaml_settings, metadata, env = layered(layer, name, raw)
    value = getattr(resolve_settings("exact_match", yaml_settings, metadata, environ=env), name)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize("layer, name, raw", [
    pytest.param("env", "concurrency", "many", id="env-int-word"),
    pytest.param("env", "concurrency", "32.5", id="env-int-fraction"),
    pytest.param("env", "cache", "maybe", id="env-bool-word"),
    pytest.param("meta", "timeout", "fast", id="meta-float-word"),
    pytest.param("meta", "cache", "2", id="meta-bool-two"),
])
def test_uncoercible_value_is_a_config_error(layer, name, raw):
    yaml_settings, metadata, env = layered(layer, name, raw)
    with pytest.raises(ConfigError, match=name):
        resolve_settings("exact_match", yaml_settings, metadata, environ=env)


# -------------------------------------------------------------------- local backend

@pytest.mark.parametrize("yaml_settings, env, metadata", [
    pytest.param(None, {}, {"judge_backend": "local"}, id="metadata"),
    pytest.param(None, {"MATHJUDGE_BACKEND": "local"}, None, id="env"),
    pytest.param({"backend": "local"}, {}, None, id="yaml"),
    pytest.param(None, {"MATHJUDGE_MODEL": "gpt-4o"}, {"judge_backend": "local", "judge_model": "gpt-4o"},
                 id="explicit-model-overridden"),
])
def test_local_backend_forces_math_verify(yaml_settings, env, metadata):
    settings = resolve_settings("exact_match", yaml_settings, metadata, environ=env)
    assert (settings.backend, settings.model) == ("local", "math-verify")


def test_metadata_can_switch_a_local_yaml_back_to_openai():
    settings = resolve_settings("exact_match", {"backend": "local"}, {"judge_backend": "openai"}, environ={})
    assert (settings.backend, settings.model) == ("openai", DEFAULT_EXACT_MATCH_MODEL)


# ----------------------------------------------------------------------- rejections

def test_unknown_metadata_key_is_rejected_with_the_known_names():
    with pytest.raises(ConfigError) as caught:
        resolve_settings("exact_match", None, {"judge_concurency": 4}, environ={})
    message = str(caught.value)
    assert "judge_concurency" in message
    assert "--metadata" in message
    assert "judge_concurrency" in message  # the list of known names shows the right spelling


def test_unknown_yaml_key_is_rejected():
    with pytest.raises(ConfigError, match=r"mathjudge\.settings.*retries"):
        resolve_settings("exact_match", {"retries": 3}, None, environ={})


CREDENTIAL_KEYS = [
    pytest.param(None, {"judge_api_key": CANARY}, "judge_api_key", id="meta-api-key"),
    pytest.param(None, {"judge_openai_api_key": CANARY}, "judge_openai_api_key", id="meta-openai-api-key"),
    pytest.param(None, {"judge_token": CANARY}, "judge_token", id="meta-token"),
    pytest.param(None, {"judge_client_secret": CANARY}, "judge_client_secret", id="meta-secret"),
    pytest.param(None, {"judge_password": CANARY}, "judge_password", id="meta-password"),
    pytest.param(None, {"judge_API_KEY": CANARY}, "judge_API_KEY", id="meta-upper-case"),
    pytest.param({"api_key": CANARY}, None, "api_key", id="yaml-api-key"),
    pytest.param({"credentials": CANARY}, None, "credentials", id="yaml-credentials"),
]


@pytest.mark.parametrize("yaml_settings, metadata, key", CREDENTIAL_KEYS)
def test_credential_keys_are_rejected_without_echoing_the_value(yaml_settings, metadata, key):
    with pytest.raises(ConfigError) as caught:
        resolve_settings("exact_match", yaml_settings, metadata, environ={})
    message = str(caught.value)
    assert key in message
    assert "OPENAI_API_KEY" in message  # says where the key belongs instead
    assert CANARY not in message
    assert "canary" not in message


def test_credential_key_rejected_even_next_to_valid_settings():
    with pytest.raises(ConfigError) as caught:
        resolve_settings("exact_match", {"concurrency": 4}, {"judge_model": "gpt-4o", "judge_api_key": CANARY},
                         environ={"MATHJUDGE_CONCURRENCY": "8"})
    assert CANARY not in str(caught.value)


REJECTED_VALUES = [
    pytest.param({"judge_backend": "mistral"}, {}, r"backend 'mistral' is unknown.*openai", id="bad-backend"),
    pytest.param(None, {"MATHJUDGE_BACKEND": "OpenAI"}, r"unknown", id="backend-is-case-sensitive"),
    pytest.param({"judge_concurrency": 0}, {}, r"concurrency must be at least 1", id="concurrency-zero"),
    pytest.param(None, {"MATHJUDGE_CONCURRENCY": "0"}, r"concurrency must be at least 1", id="env-concurrency-zero"),
    pytest.param({"judge_concurrency": "-3"}, {}, r"concurrency", id="concurrency-negative"),
    pytest.param({"judge_max_retries": -1}, {}, r"max_retries", id="negative-retries"),
    pytest.param({"judge_timeout": 0}, {}, r"timeout", id="zero-timeout"),
    pytest.param({"judge_max_tokens": 0}, {}, r"max_tokens", id="zero-max-tokens"),
    pytest.param({"judge_rpm": -60}, {}, r"rpm", id="negative-rpm"),
]


@pytest.mark.parametrize("metadata, env, pattern", REJECTED_VALUES)
def test_invalid_values_are_rejected(metadata, env, pattern):
    with pytest.raises(ConfigError, match=pattern):
        resolve_settings("exact_match", None, metadata, environ=env)


@pytest.mark.parametrize("layer, name", [
    pytest.param("meta", "max_tokens", id="meta"),
    pytest.param("yaml", "max_tokens", id="yaml"),
])
def test_max_tokens_is_not_mistaken_for_a_credential(layer, name):
    # Regression: "max_tokens" contains "token", one of the credential hints.
    yaml_settings, metadata, env = layered(layer, name, 2048)
    assert resolve_settings("vlm", yaml_settings, metadata, environ=env).max_tokens == 2048


@pytest.mark.parametrize("yaml_settings", [
    pytest.param({"concurrency": None}, id="int"),
    pytest.param({"cache": None}, id="bool"),
    pytest.param({"timeout": None}, id="float"),
    pytest.param({"model": None}, id="str"),
])
def test_empty_yaml_value_for_a_required_setting_is_a_config_error(yaml_settings):
    # `concurrency:` with nothing after it loads as None; it must not become a TypeError
    # later, nor cache=None (silently off).
    (name,) = yaml_settings
    with pytest.raises(ConfigError, match=f"{name} has no value"):
        resolve_settings("exact_match", yaml_settings, None, environ={})


def test_config_error_is_also_a_value_error():
    with pytest.raises(ValueError):
        JudgeSettings(concurrency=0)


def test_settings_are_frozen_and_public_has_every_field():
    settings = resolve_settings("exact_match", None, None, environ={})
    with pytest.raises(AttributeError):
        settings.concurrency = 2  # type: ignore[misc]
    assert set(settings.public()) == {
        "backend", "model", "base_url", "temperature", "max_tokens", "concurrency", "rpm",
        "timeout", "max_retries", "cache", "cache_dir", "preflight", "thinking_budget", "reasoning_effort",
        "cache_network_fs", "tpm", "adaptive", "mode", "batch_poll_seconds", "batch_max_hours", "batch_wait", "batch_fallback",
        "dry_run", "budget_usd", "prices", "max_reply_bytes"}


@pytest.mark.parametrize("metadata, message", [
    ({"judge_mode": "offline"}, "mode='offline' must be one of online, batch"),
    ({"judge_batch_fallback": "retry"}, "batch_fallback='retry' must be one of online, fail"),
    ({"judge_batch_poll_seconds": "0"}, "batch_poll_seconds=0.0 must be more than 0"),
    ({"judge_batch_max_hours": "100"}, "batch_max_hours=100.0 must be more than 0 and at most 48"),
    ({"judge_tpm": "-5"}, "tpm=-5.0 must be positive"),
    ({"judge_budget_usd": "-1"}, "budget_usd=-1.0 must be a finite amount"),
    ({"judge_budget_usd": "nan"}, "budget_usd='nan' is not a valid float"),
    ({"judge_dry_run": "maybe"}, "dry_run='maybe' is not a valid bool"),
])
def test_scale_settings_are_checked(metadata, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        resolve_settings("exact_match", None, metadata, environ={})


def test_scale_settings_resolve_per_judge():
    meta = {"gpt4em_judge_mode": "batch", "judge_budget_usd": "2.5", "judge_tpm": "90000"}
    em = resolve_settings("exact_match", None, meta, environ={})
    vlm = resolve_settings("vlm", None, meta, environ={})
    assert (em.mode, em.budget_usd, em.tpm) == ("batch", 2.5, 90000.0)
    assert (vlm.mode, vlm.budget_usd) == ("online", 2.5)


# ---------------------------------------------------------------- judge-scoped settings
@pytest.mark.parametrize("judge, metadata, environ, expected", [
    pytest.param("vlm", {"judge_model": "generic", "vlm_judge_model": "scoped"}, {}, ("gemini", "scoped"),
                 id="scoped-metadata-beats-generic"),
    pytest.param("exact_match", {"judge_model": "generic", "vlm_judge_model": "scoped"}, {}, ("openai", "generic"),
                 id="other-judges-scope-ignored"),
    pytest.param("vlm", {}, {"MATHJUDGE_MODEL": "generic", "MATHJUDGE_VLM_MODEL": "scoped"}, ("gemini", "scoped"),
                 id="scoped-env-beats-generic-env"),
    pytest.param("exact_match", {"judge_model": "meta"}, {"MATHJUDGE_GPT4EM_MODEL": "env"}, ("openai", "meta"),
                 id="metadata-beats-scoped-env"),
    pytest.param("vlm", {"vlm_judge_backend": "openai"}, {}, ("openai", "gpt-4o-2024-08-06"),
                 id="switching-backend-switches-the-default-model"),
    pytest.param("exact_match", {"judge_backend": "gemini"}, {}, ("gemini", "gemini-2.5-pro"),
                 id="gpt4em-on-gemini-gets-a-gemini-model"),
    pytest.param("vlm", {"vlm_judge_backend": "openai", "vlm_judge_model": "Qwen/Qwen2.5-VL-72B-Instruct"}, {},
                 ("openai", "Qwen/Qwen2.5-VL-72B-Instruct"), id="an-explicit-model-wins"),
])
def test_judge_scoped_settings(judge, metadata, environ, expected):
    settings = resolve_settings(judge, None, metadata, environ=environ)
    assert (settings.backend, settings.model) == expected


def test_scoped_typos_are_rejected_even_for_the_other_judge():
    with pytest.raises(ConfigError, match="vlm_judge_modle"):
        resolve_settings("exact_match", None, {"vlm_judge_modle": "x"}, environ={})


def test_unknown_mathjudge_variables_are_errors():
    # The README says unknown names are errors: a typo must not silently fall back to a default.
    with pytest.raises(ConfigError, match="MATHJUDGE_CONCURENCY"):
        resolve_settings("exact_match", None, None, environ={"MATHJUDGE_CONCURENCY": "4"})


def test_the_vlm_judge_cannot_run_locally():
    with pytest.raises(ConfigError, match="cannot run on the local backend"):
        resolve_settings("vlm", None, {"judge_backend": "local"}, environ={})


# ---------------------------------------------------------------------- media folders and labels
@pytest.mark.parametrize("layer", ["metadata-list", "metadata-json-string", "env-pathsep", "yaml"])
def test_media_dirs_come_from_every_layer_resolved(tmp_path, layer):
    import os

    from lm_eval_mathjudge.settings.layers import resolve_run_options

    one, two = tmp_path / "a", tmp_path / "b"
    one.mkdir()
    two.mkdir()
    (tmp_path / "link").symlink_to(two)
    given = [str(one), str(tmp_path / "link")]
    yaml, metadata, environ = None, {}, {}
    if layer == "metadata-list":
        metadata = {"vlm_judge_media_dirs": given}
    elif layer == "metadata-json-string":
        metadata = {"judge_media_dirs": json.dumps(given)}
    elif layer == "env-pathsep":
        environ = {"MATHJUDGE_VLM_MEDIA_DIRS": os.pathsep.join(given)}
    else:
        yaml = {"media_dirs": given}
    options = resolve_run_options("vlm", yaml, metadata, environ)
    assert options.media_dirs == (os.path.realpath(one), os.path.realpath(two))  # symlinks resolved
    assert resolve_settings("vlm", yaml, metadata, environ).backend == "gemini"  # not a judge setting


@pytest.mark.parametrize("value, message", [
    ("/no/such/folder", "names '/no/such/folder', which is not a folder"),
    ([1, 2], "must be a list of folders"),
    ("[not json", "must be a list of folders"),
])
def test_bad_media_dirs_are_refused_before_anything_runs(value, message):
    from lm_eval_mathjudge.settings.layers import resolve_run_options

    with pytest.raises(ConfigError, match=re.escape(message)):
        resolve_run_options("vlm", None, {"judge_media_dirs": value}, {})


@pytest.mark.parametrize("judge, label", [
    ({"backend": "openai", "model": "gpt-4o"}, "openai:gpt-4o"),
    ({"backend": "openai", "model": "m", "cascade": {"rule": {"backend": "local", "model": "math-verify"},
                                                    "llm": {"backend": "openai", "model": "m"}}},
     "cascade(local:math-verify → openai:m)"),
    ({"backend": "openai", "model": "m", "panel": {"rule": "majority", "min": 2, "members": [
        {"backend": "local", "model": "math-verify"}, {"backend": "openai", "model": "a"},
        {"backend": "gemini", "model": "b"}]}}, "panel(majority: local:math-verify, openai:a, gemini:b)"),
    ({"backend": "openai", "model": "m", "panel": {"rule": "majority", "min": 1, "members": [
        {"backend": "openai", "model": "a"}, {"backend": "openai", "model": "b"}, {"backend": "openai", "model": "c"}]}},
     "panel(majority, min 1: openai:a, openai:b, openai:c)"),
    ({"backend": "openai", "model": "m", "panel": {"rule": "unanimous", "min": 2, "members": [
        {"backend": "openai", "model": "a"}, {"backend": "openai", "model": "b"}]}},
     "panel(unanimous: openai:a, openai:b)"),
])
def test_the_pipeline_label_names_every_judge_of_the_pipeline(judge, label):
    from lm_eval_mathjudge.settings.schema import judge_label, pipeline_label

    assert pipeline_label(judge) == label
    assert judge_label(JudgeSettings(backend="azure", model="dep")) == "azure:dep" == judge_label(
        {"backend": "azure", "model": "dep"})
