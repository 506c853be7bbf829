"""lm-eval's own errors about input meant for the plugin, said as ours (core/cli_input.py).

The unit tests raise lm-eval's real errors through lm-eval's real code (its JSON option parser, its task
check), so the translation reads exactly what lm-eval raises; the end-to-end tests run the real `lm_eval`
console script, whose start-up hook reports them.
"""

from __future__ import annotations

import sys

import pytest

from lm_eval_mathjudge._startup import task_names
from lm_eval_mathjudge.core.cli_input import translated
from lm_eval_mathjudge.core.errors import ConfigError
from tests.e2e import run_lm_eval


def _lm_eval_json_error(value: str) -> ValueError:
    from lm_eval._cli.utils import try_parse_json

    with pytest.raises(ValueError) as raised:
        try_parse_json(value)
    return raised.value


@pytest.fixture(scope="module")
def missing_task() -> ValueError:
    """lm-eval's real error for two unknown tasks (indexing lm-eval's tasks takes a while: once)."""
    from lm_eval.config.evaluate_config import EvaluatorConfig

    config = EvaluatorConfig(tasks=["gsm8k_gpt4eem", "arc_easyy"])
    with pytest.raises(ValueError) as raised:
        config.process_tasks()
    return raised.value


def _lm_eval_missing_task(real: ValueError, *names: str) -> ValueError:
    """lm-eval's error as it words it for ``names`` (its wording checked on the real one), raised from its frame."""
    assert str(real) == "Tasks not found: gsm8k_gpt4eem, arc_easyy"
    return ValueError(f"Tasks not found: {', '.join(names)}").with_traceback(real.__traceback__)


@pytest.mark.parametrize("names, says", [
    (["gsm8k_gpt4eem"], ["gsm8k_gpt4eem (did you mean gsm8k_gpt4em?)"]),
    (["math500_vlmjudg"], ["math500_vlmjudg (did you mean math500_vlmjudge"]),
    (["aime_25_gpt4em"], ["aime_25_gpt4em (did you mean aime25_gpt4em"]),
    (["mathjudge_gpt4m"], ["mathjudge_gpt4m (did you mean mathjudge_gpt4em"]),
    (["omnimath_gpt4em_", "gsm8k_vlm_judge"], ["omnimath_gpt4em_ (did you mean omnimath_gpt4em",
                                               "gsm8k_vlm_judge (did you mean gsm8k_vlmjudge"]),
    (["gsm8k_gpt4eem", "arc_easyy"], ["gsm8k_gpt4eem (did you mean gsm8k_gpt4em?); arc_easyy."]),
])
def test_a_near_miss_of_our_task_names_gets_did_you_mean(names, says, missing_task):
    exc = _lm_eval_missing_task(missing_task, *names)
    ours = translated(exc, exc.__traceback__, ["lm_eval", "--tasks", ",".join(names)], task_names())
    assert isinstance(ours, ConfigError) and all(s in str(ours) for s in says), ours


@pytest.mark.parametrize("name", ["arc_easyy", "hellaswag2", "zzzz"])
def test_a_name_close_to_none_of_ours_keeps_lm_evals_own_error(name, missing_task):
    exc = _lm_eval_missing_task(missing_task, name)
    assert translated(exc, exc.__traceback__, ["lm_eval"], task_names()) is None


@pytest.mark.parametrize("argv, value, option, at", [
    (["--metadata", '{"judge_backend": local}'], '{"judge_backend": local}', "--metadata", "character 19"),
    (["--metadata={'judge_backend': 'local'}"], "{'judge_backend': 'local'}", "--metadata", "character 2"),
    (["--model_args", '{"pretrained": "x",}'], '{"pretrained": "x",}', "--model_args", "character 20"),
    (["--gen_kwargs", '{"max_gen_toks": 16384'], '{"max_gen_toks": 16384', "--gen_kwargs", "character 23"),
])
def test_a_json_option_that_does_not_parse_says_which_where_and_how_to_quote(argv, value, option, at):
    exc = _lm_eval_json_error(value)
    ours = translated(exc, exc.__traceback__, ["lm_eval", *argv], task_names())
    assert isinstance(ours, ConfigError) and str(ours).startswith(f"{option} is not valid JSON"), ours
    assert at in str(ours) and f"""{option} '{{"judge_backend": "local"}}'""" in str(ours)


def test_only_lm_evals_own_errors_are_translated(missing_task):
    try:
        raise ValueError("Tasks not found: gsm8k_gpt4eem")  # raised here, not inside lm-eval
    except ValueError as exc:
        assert translated(exc, exc.__traceback__, ["lm_eval"], task_names()) is None
    exc = _lm_eval_missing_task(missing_task, "gsm8k_gpt4eem")
    other = TypeError(str(exc))
    assert translated(other, exc.__traceback__, ["lm_eval"], task_names()) is None


@pytest.mark.parametrize("args, says", [
    (["--tasks", "gsm8k_gpt4eem"], "gsm8k_gpt4eem (did you mean gsm8k_gpt4em?)"),
    (["--tasks", "gsm8k_gpt4em", "--metadata", '{"judge_backend": local}'], "--metadata is not valid JSON"),
])
@pytest.mark.e2e
def test_the_lm_eval_command_reports_them_in_one_block(args, says, tmp_path):
    run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", "path=none.jsonl", *args], {}, tmp_path,
                      process=True)  # the interpreter's own exception hook, as a user's shell sees it
    assert run.returncode == 2 and says in run.stderr, run.stderr[-3000:]
    assert "Traceback" not in run.stderr and run.stderr.startswith("lm_eval: configuration error")


@pytest.mark.e2e
def test_a_task_close_to_none_of_ours_keeps_lm_evals_traceback(tmp_path):
    run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", "path=none.jsonl", "--tasks", "arc_easyy"], {},
                      tmp_path, process=True)
    assert run.returncode == 1 and "ValueError: Tasks not found: arc_easyy" in run.stderr, run.stderr[-2000:]
    assert sys.executable  # the same interpreter ran it (tests/e2e.py's LM_EVAL beside it)
