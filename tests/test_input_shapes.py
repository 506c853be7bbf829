"""Our inputs never end in a traceback: every setting given any shape, inline JSON of any depth, and
metadata keys close to ours.

Each setting and run option, in each layer that takes values as given (``--metadata`` and the task
YAML; the environment only holds text), gets values of every wrong shape: containers, nesting a
thousand deep (as parsed) and thousands deep (as inline JSON text, which ``json`` cannot even read
without running out of stack), numbers beyond any float, NUL characters, words. The whole path a
judged task takes at load (settings, run options, panel members, price overrides, repeats) must end
each one as a ``ConfigError`` with a bounded message, or accept it. Through the real CLI:
``test_input_errors_e2e.py``.
"""

from __future__ import annotations

import pytest

from lm_eval_mathjudge.core import jsontext
from lm_eval_mathjudge.core.errors import ConfigError
from lm_eval_mathjudge.cost import prices
from lm_eval_mathjudge.harness import commands, ksamples
from lm_eval_mathjudge.judging import factory
from lm_eval_mathjudge.settings.layers import (check_near_misses, metadata_keys, resolve_run_options,
                                               resolve_settings)
from lm_eval_mathjudge.settings.schema import FIELDS, RUN_OPTIONS


def _nested(depth: int, leaf=1, kind=dict):
    value = leaf
    for _ in range(depth):
        value = {"a": value} if kind is dict else [value]
    return value


def _text(depth: int, kind: str) -> str:
    return ('{"a": ' * depth + "1" + "}" * depth) if kind == "object" else ("[" * depth + "1" + "]" * depth)


SHAPES = {
    "list": [1, 2], "object": {"x": 1}, "list-of-objects": [{"backend": [1]}], "null": None, "bool": True,
    "negative": -5, "int-beyond-float": 10 ** 400, "float-max": 1.7e308, "word": "hello", "empty": "", "blank": "  ",
    "nul": "a\x00b", "lone-surrogate": "\udcff", "object-900-deep": _nested(900),
    "list-900-deep": _nested(900, kind=list),
    "object-text-5000-deep": _text(5000, "object"), "list-text-5000-deep": _text(5000, "list"),
    "object-text-900-deep": _text(900, "object"),
}


def _load(judge: str, yaml: dict | None, metadata: dict | None) -> None:
    """What a judged task does with its settings when lm-eval builds it."""
    settings = resolve_settings(judge, yaml, metadata, environ={})
    options = resolve_run_options(judge, yaml, metadata, environ={})
    for member in factory.member_settings(judge, options, settings, yaml, metadata):
        if member.prices is not None:
            prices.load_overrides(member.prices)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", [*FIELDS, *RUN_OPTIONS])
def test_every_setting_of_any_shape_is_taken_or_refused_cleanly(name, shape):
    value = SHAPES[shape]
    for judge in ("exact_match", "vlm"):
        for yaml, metadata in (({name: value}, None), (None, {f"judge_{name}": value})):
            try:
                _load(judge, yaml, metadata)
            except ConfigError as exc:
                assert len(str(exc)) < 2000  # a value is shown short, whatever its size
            # anything else (RecursionError, OverflowError, ValueError, TypeError) fails the test


@pytest.mark.parametrize("value, message", [
    (_text(5000, "object"), f"judge_prices is not valid JSON ({jsontext.TOO_DEEP}"),
    ('{"gpt-4o": ' + _text(5000, "object") + "}", f"judge_prices is not valid JSON ({jsontext.TOO_DEEP}"),
    (_text(5000, "list"), "is neither a JSON object nor a .json/.yaml file"),
    ('{"gpt-4o": ' + _text(900, "object") + "}", "the price of 'gpt-4o' has unknown field(s) a"),
])
def test_inline_price_json_of_any_depth_is_a_clean_error_as_in_a_file(tmp_path, value, message):
    with pytest.raises(ConfigError) as inline:
        prices.load_overrides(value)
    assert message in str(inline.value) and len(str(inline.value)) < 1000
    path = tmp_path / "prices.json"
    path.write_text(value)
    with pytest.raises(ConfigError, match="judge_prices file .* (cannot be parsed|must be|has unknown field)"):
        prices.load_overrides(str(path))  # the same content as a file: as clean


@pytest.mark.parametrize("shape", SHAPES)
def test_repeats_of_any_shape_is_taken_or_refused_cleanly(shape):
    try:
        ksamples._repeats(SHAPES[shape], "gsm8k_gpt4em")
    except ConfigError as exc:
        assert "repeats=" in str(exc) and len(str(exc)) < 400


KNOWN = metadata_keys(ksamples.KEYS)
NEAR_MISSES = [  # (key, the key it is taken for)
    ("repeat", "repeats"), ("Repeats", "repeats"), ("repeets", "repeats"), ("judgebackend", "judge_backend"),
    ("jduge_backend", "judge_backend"), ("judge-model", "judge_model"), ("JUDGE_CONCURRENCY", "judge_concurrency"),
    ("gpt4_judge_model", "gpt4em_judge_model"), ("vlmjudge_model", "vlm_judge_model"),
    ("judge_maxtokens", "judge_max_tokens"), ("judgestream", "judge_stream"), ("judge_pass_a", "judge_pass_at"),
]
LEFT_ALONE = [  # other tasks' keys (RULER's, lm-eval's own), model arguments, bare names a model adapter takes
    "max_seq_lengths", "tokenizer", "pretrained", "version", "num_concurrent", "max_retries", "timeout", "model",
    "base_url", "temperature", "max_gen_toks", "rejudged_from", "data_source", "judge", "seed", "trust_remote_code",
]


@pytest.mark.parametrize("key, meant", NEAR_MISSES)
def test_a_metadata_key_close_to_one_of_ours_stops_the_run_with_did_you_mean(key, meant):
    with pytest.raises(ConfigError, match=rf"{key} .*is read by no task of this plugin \(did you mean {meant}\?\)"):
        check_near_misses({key: 4, "max_seq_lengths": [4096]}, KNOWN)


@pytest.mark.parametrize("key", LEFT_ALONE)
def test_keys_of_other_tasks_and_of_the_model_are_left_alone(key):
    check_near_misses({key: 1, "repeats": 4, "judge_backend": "local"}, KNOWN)


def test_the_models_own_arguments_are_never_taken_for_a_typo():
    names = commands.model_arg_names(["--model", "hf", "--model_args", "pretrained=x,repeat=2", "--tasks", "t"])
    assert names == {"pretrained", "repeat"}
    check_near_misses({"pretrained": "x", "repeat": 2}, KNOWN, ignore=names)  # lm-eval merged them in


def test_shown_is_short_and_never_fails():
    assert jsontext.shown("x" * 500).endswith("...") and len(jsontext.shown("x" * 500)) == 80
    assert "too deep" in jsontext.shown(_nested(100_000, kind=list))
    assert jsontext.shown({"a": 1}) == "{'a': 1}"


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shared_generator_option_of_any_shape_is_taken_or_refused_cleanly(shape):
    from lm_eval_mathjudge.generators.settings import SETTING_TYPES, split_model_args

    for name in SETTING_TYPES:
        try:
            split_model_args("mathjudge-openai-image", {}, {"model": "gpt-image-1", name: SHAPES[shape]})
        except ConfigError as exc:
            assert len(str(exc)) < 1000


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_generator_time_or_rate_that_is_not_finite_is_refused(value):
    from lm_eval_mathjudge.generators.settings import split_model_args

    for name in ("rpm", "timeout", "poll_interval", "poll_timeout"):
        with pytest.raises(ConfigError, match="must be finite numbers|must be at least|positive"):
            split_model_args("mathjudge-openai-image", {}, {"model": "gpt-image-1", name: value})
