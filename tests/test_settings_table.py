"""The settings table: what it derives is what the settings were before it, and every layer reads it.

``settings/schema.py`` declares each setting once, as a row; the dataclasses, their checks, the
coercion, the names in each layer and "did you mean" are derived from the rows. These tests hold
the derived schema to the one the dataclasses declared by hand before the table (names, types,
defaults, limits), and take every row through every spelling of every layer that accepts it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest

from lm_eval_mathjudge.core.errors import ConfigError
from lm_eval_mathjudge.judging import factory
from lm_eval_mathjudge.settings import schema
from lm_eval_mathjudge.settings.credentials import looks_like_credential
from lm_eval_mathjudge.settings.layers import resolve_run_options, resolve_settings

# The judge settings as JudgeSettings declared them by hand: name, type, may be unset, default.
JUDGE_SETTINGS = [
    ("backend", str, False, "openai"), ("model", str, False, "gpt-4-turbo-2024-04-09"), ("base_url", str, True, None),
    ("temperature", float, False, 0.0), ("max_tokens", int, False, 1024), ("concurrency", int, False, 64),
    ("rpm", float, False, 0.0), ("timeout", float, False, 120.0), ("max_retries", int, False, 6),
    ("cache", bool, False, True), ("cache_dir", str, True, None), ("cache_network_fs", str, False, "fallback"),
    ("preflight", bool, False, True), ("thinking_budget", int, True, None), ("reasoning_effort", str, True, None),
    ("tpm", float, False, 0.0), ("adaptive", bool, False, True), ("mode", str, False, "online"),
    ("batch_poll_seconds", float, False, 30.0), ("batch_max_hours", float, False, 26.0),
    ("batch_wait", bool, False, True), ("batch_fallback", str, False, "online"), ("dry_run", bool, False, False),
    ("budget_usd", float, True, None), ("prices", str, True, None), ("max_reply_bytes", int, True, None),
]
# ... and RunOptions.
RUN_OPTIONS = [
    ("panel", tuple, False, ()), ("panel_rule", str, False, "majority"), ("panel_min", int, True, None),
    ("cascade", bool, False, False), ("media_dirs", tuple, False, ()), ("audit", bool, False, False),
    ("audit_limit", int, False, 10), ("stream", bool, False, True), ("pass_at", tuple, False, ()),
    ("counterfactual", bool, False, False),
]  # and dedupe ("off"), retired since: schema.RETIRED
# The limits _problems checked by hand: name, lowest, highest (None: none), lowest excluded.
LIMITS = [
    ("temperature", 0, 2.0, False), ("max_tokens", 1, 1_000_000, False), ("concurrency", 1, 1024, False),
    ("rpm", 0, None, False), ("timeout", 0, 3600, True), ("max_retries", 0, 20, False), ("tpm", 0, None, False),
    ("thinking_budget", -1, 32768, False), ("batch_poll_seconds", 0, 3600, True), ("batch_max_hours", 0, 48, True),
    ("budget_usd", 0, None, False), ("max_reply_bytes", 1024, 1 << 30, False), ("audit_limit", 1, 10_000, False),
]
CHOICES = [
    ("mode", ("online", "batch")), ("batch_fallback", ("online", "fail")),
    ("cache_network_fs", ("fallback", "refuse", "allow")),
    ("reasoning_effort", ("none", "minimal", "low", "medium", "high")),
    ("panel_rule", ("majority", "unanimous")),
]


def _declared(cls) -> list[tuple]:
    out = []
    for f in dataclasses.fields(cls):
        optional = f.type != f.type.__args__[0] if hasattr(f.type, "__args__") else False
        out.append((f.name, f.type.__args__[0] if optional else f.type, optional, f.default))
    return out


def test_the_dataclasses_derived_from_the_table_are_the_ones_declared_before_it():
    assert _declared(schema.JudgeSettings) == JUDGE_SETTINGS
    assert _declared(schema.RunOptions) == RUN_OPTIONS
    assert list(schema.FIELDS) == [n for n, *_ in JUDGE_SETTINGS]
    assert schema.RUN_OPTIONS == tuple(n for n, *_ in RUN_OPTIONS)
    assert {"openai", "azure", "local", "gemini"} <= set(schema.SETTING["backend"].kind.values)


def _resolve(name: str, value: Any, judge: str = "exact_match"):
    """The setting as a task resolves it from --metadata (a run option on a panel, which some need)."""
    if name in schema.FIELDS:
        return getattr(resolve_settings(judge, None, {f"judge_{name}": value}, {}), name)
    panel = [{"backend": "local"}, {"backend": "openai"}] if name.startswith("panel_") else []
    return getattr(resolve_run_options(judge, None, {"judge_panel": panel, f"judge_{name}": value}, {}), name)


def _refused(name: str, value: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        _resolve(name, value)
    return str(caught.value)


@pytest.mark.parametrize("name, lo, hi, above", LIMITS, ids=[row[0] for row in LIMITS])
def test_the_limits_are_the_ones_checked_before_the_table(name, lo, hi, above):
    kind = schema.SETTING[name].kind.py
    step = 1 if kind is int else 1e-6
    if above:
        assert name in _refused(name, kind(lo))
        assert _resolve(name, kind(lo) + step) == kind(lo) + step
    else:
        assert _resolve(name, kind(lo)) == kind(lo)
    assert name in _refused(name, kind(lo) - step)
    if hi is None:
        assert _resolve(name, kind(10 ** 12)) == kind(10 ** 12)
    else:
        assert _resolve(name, kind(hi)) == kind(hi)
        assert name in _refused(name, kind(hi) + step)


@pytest.mark.parametrize("name, values", CHOICES, ids=[row[0] for row in CHOICES])
def test_the_choices_are_the_ones_checked_before_the_table(name, values):
    assert schema.SETTING[name].kind.values == values
    assert all(_resolve(name, v) == v for v in values)
    assert "must be one of " + ", ".join(values) in _refused(name, "no-such-value")


def test_the_panel_and_pass_at_keep_their_limits():
    assert "a panel needs 2 to 9" in _refused("panel", [{"backend": "local"}] * 10)
    assert "must list whole numbers between 1 and 1024" in _refused("pass_at", [1, 1025])
    assert _resolve("pass_at", "[16, 1, 4]") == _resolve("pass_at", "1,4,16") == (1, 4, 16)


# ------------------------------------------------------------------------------------- layers
def _example(row, tmp_path):
    return [str(tmp_path)] if row.name == "media_dirs" else row.example  # an example folder that exists here


def _as_text(value: Any) -> str:
    """How the environment gives the value: text (lists and objects as JSON)."""
    return json.dumps(value) if isinstance(value, (list, dict, bool)) else str(value)


def _spelled(row, tmp_path):
    """(judge, spelling, yaml, metadata, environ) for every spelling of the row in the three layers."""
    value = _example(row, tmp_path)
    base = {"panel": [{"backend": "local"}, {}, {"model": "x"}]} if row.name.startswith("panel_") else {}
    for judge in ("exact_match", "vlm"):
        yield judge, "yaml", {**base, row.name: value}, {}, {}
        env, meta = schema.spellings(row.name, "env", judge), schema.spellings(row.name, "metadata", judge)
        for key in env:
            yield judge, key, base, {}, {key: _as_text(value)}
        for key in meta:
            yield judge, key, base, {key: value}, {}


def _takes(row, judge: str, yaml, metadata, environ):
    if row.judge_setting:
        return getattr(resolve_settings(judge, yaml, metadata, environ), row.name)
    return getattr(resolve_run_options(judge, yaml, metadata, environ), row.name)


def _fits(row, judge: str) -> bool:
    """The example suits this judge (the cascade is GPT4-EM's; local is not a VLM judge)."""
    return judge == "exact_match" or row.name not in ("cascade", "backend", "panel")


@pytest.mark.parametrize("row", schema.SETTINGS, ids=lambda r: r.name)
def test_every_spelling_of_every_setting_takes_its_example(row, tmp_path, monkeypatch):
    for name in [v for v in __import__("os").environ if v.startswith("MATHJUDGE_")]:
        monkeypatch.delenv(name)  # a panel member's settings are resolved over the real environment
    expected = row.read(_example(row, tmp_path))
    assert expected != row.default, "an example shows a value other than the default"
    seen = 0
    for judge, where, yaml, metadata, environ in _spelled(row, tmp_path):
        if _fits(row, judge):
            assert _takes(row, judge, yaml, metadata, environ) == expected, (judge, where)
            seen += 1
    if row.judge_setting:  # and a panel member, under the plain name
        options = resolve_run_options("exact_match", None, {"judge_panel": [{row.name: row.example},
                                                                              {"model": "another"}]}, {})
        member = factory.member_settings("exact_match", options, None, None, {})[0]
        assert getattr(member, row.name) == expected
    assert seen == (10 if _fits(row, "vlm") else 5)  # the YAML, two environment variables, two metadata keys


def test_the_spellings_are_the_table_times_the_layers_and_none_is_shared():
    """Seven names a setting (the plain one in the YAML and a panel member, three environment variables,
    three metadata keys), all from one rule, and no two settings share one."""
    names = [n for s in schema.SETTINGS for layer in ("yaml", "env", "metadata") for n in schema.spellings(s.name, layer)]
    assert len(names) == len(set(names)) == 7 * len(schema.SETTINGS)
    assert schema.spellings("timeout", "env") == ("MATHJUDGE_TIMEOUT", "MATHJUDGE_GPT4EM_TIMEOUT", "MATHJUDGE_VLM_TIMEOUT")
    assert schema.spellings("timeout", "metadata", "vlm") == ("judge_timeout", "vlm_judge_timeout")


def _typo(name: str) -> str:
    """One letter less; one more where that is another setting ("mode") or reads as a credential ("max_token")."""
    cut = name[:-1]
    return name + name[-1] if cut in schema.SETTING or looks_like_credential(cut) else cut


@pytest.mark.parametrize("row", schema.SETTINGS, ids=lambda r: r.name)
def test_a_typo_in_any_layer_names_the_setting_it_is_close_to(row):
    typo = _typo(row.name)
    cases = [("yaml", lambda: resolve_settings("exact_match", {typo: 1}, None, {}), row.name),
             ("env", lambda: resolve_settings("exact_match", None, None, {f"MATHJUDGE_VLM_{typo.upper()}": "1"}),
              f"MATHJUDGE_VLM_{row.name.upper()}"),
             ("metadata", lambda: resolve_settings("exact_match", None, {f"gpt4em_judge_{typo}": 1}, {}),
              f"gpt4em_judge_{row.name}")]
    if row.judge_setting:
        cases.append(("member", lambda: resolve_run_options("exact_match", None, {"judge_panel": [{typo: 1}, {}]}, {}),
                      row.name))
    for layer, resolve, meant in cases:
        with pytest.raises(ConfigError) as caught:
            resolve()
        hint = re.search(r"\(did you mean (.*?)\?\)", str(caught.value))
        assert hint and meant in hint.group(1).split(" or "), (layer, str(caught.value)[:300])


@pytest.mark.parametrize("name", sorted(schema.RETIRED))
def test_a_retired_setting_is_refused_in_every_spelling_as_retired_not_as_a_typo(name):
    """Every spelling the table's rule gives a retired name, in every layer, names it as retired."""
    cases = [(key, {layer: {key: "answer"}}) for layer in ("metadata", "env") for key in schema.spellings(name, layer)]
    cases += [("yaml", {"yaml": {name: "answer"}}),
              ("member", {"metadata": {"judge_panel": [{"backend": "local", name: "answer"}, {}]}})]
    assert len(cases) == 8
    for where, given in cases:
        with pytest.raises(ConfigError) as caught:
            resolve_settings("exact_match", given.get("yaml"), given.get("metadata"), given.get("env", {}))
            resolve_run_options("exact_match", given.get("yaml"), given.get("metadata"), given.get("env", {}))
        text = str(caught.value)
        assert f"judge_{name} was retired" in text and "unknown" in text and "did you mean" not in text, (where, text)


def test_a_run_option_in_a_panel_member_is_refused_with_what_a_member_holds():
    with pytest.raises(ConfigError, match="a member holds judge settings only"):
        resolve_run_options("exact_match", None, {"judge_panel": [{"cascade": True}, {}]}, {})


# ------------------------------------------------------------------------------- wrong values
# Values of the wrong type someone would really write, per kind (a fraction for a count, a word for a
# flag, a list for a name); each is refused, in every layer, naming the setting and what to give instead.
WRONG_TYPES = {
    "Flag": ["perhaps", 2, [True]], "Whole": [2.7, "16 calls", True, [16]], "Real": ["fast", "nan", "inf", True],
    "Choice": [["batch"], {"mode": "batch"}], "Text": [["gpt-4o"], [{"name": "gpt-4o"}]], "Url": [["http://127.0.0.1"]],
    "Members": ["local,openai", [1, 2], {"backend": "local"}], "Folders": [5, {"dir": "/data"}],
    "Counts": ["one,four", [1.5], {"k": 4}],
}
SAYS = {"Members": "list of objects", "Folders": "list of folders", "Counts": "whole numbers such as"}


@pytest.mark.parametrize("row", schema.SETTINGS, ids=lambda r: r.name)
def test_a_value_of_the_wrong_type_is_refused_with_what_to_give(row):
    kind = type(row.kind).__name__
    for value in WRONG_TYPES[kind]:
        message = _refused(row.name, value)
        assert row.name in message and "Traceback" not in message, (value, message)
        if kind in SAYS:
            assert SAYS[kind] in message, (value, message)
        elif kind == "Choice":
            assert message.endswith("give one of " + ", ".join(row.kind.values)), message
        else:
            assert message.endswith(f"give one such as {json.dumps(row.example)}"), message
    resolve = resolve_settings if row.judge_setting else resolve_run_options
    for value in [v for v in WRONG_TYPES[kind] if isinstance(v, str)]:  # the same text from the environment
        with pytest.raises(ConfigError, match=rf"\b{row.name}="):
            resolve("vlm", None, None, {f"MATHJUDGE_VLM_{row.name.upper()}": value})
