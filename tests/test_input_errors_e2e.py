"""Through the real CLI, our inputs end in one clean block before generation, never a traceback.

The model is a loopback ``local-chat-completions`` server that counts its calls: each refused run
asked it for nothing. The judge is the offline local judge. Cases: a price table given inline as
JSON nested thousands deep (the same content as a file was already a clean error); task YAML
overrides of our tasks whose ``doc_to_target`` or ``doc_to_text`` name a column the docs do not
have, on the first doc or only on a later one; a metadata key one letter off ours. Keys that are
not ours (another task's, the model's arguments) keep running.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lm_eval_mathjudge._startup import tasks_dir
from tests.conftest import SHARED_DATA
from tests.e2e import question_of, run_lm_eval
from tests.loopback import ChatCompletionsServer

pytestmark = pytest.mark.e2e

TASK = "gsm8k_gpt4em"


def _model(body: dict) -> str:
    return f"Working it out.\n\\boxed{{{len(question_of(body)) % 7}}}"


def _run(tmp_path: Path, server: ChatCompletionsServer, metadata: dict, *, tasks: str = TASK,
         include: Path | None = None, model_args: str = ""):
    args = ["--model", "local-chat-completions", "--model_args",
            f"model=m,base_url={server.chat_url},num_concurrent=2,max_retries=1{model_args}", "--apply_chat_template",
            "--tasks", tasks, "--limit", "3", "--metadata", json.dumps({"judge_backend": "local", **metadata})]
    if include is not None:
        args += ["--include_path", str(include)]
    env = {"MATHJUDGE_DATA_DIR": str(SHARED_DATA), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache")}
    return run_lm_eval(args, env, tmp_path / "out")


def _override(tmp_path: Path, **fields: str) -> Path:
    folder = tmp_path / "tasks"
    folder.mkdir()
    lines = [f"include: {Path(tasks_dir()) / f'{TASK}.yaml'}", "task: my_gsm8k",
             *(f"{name}: {json.dumps(value)}" for name, value in fields.items())]
    (folder / "my_gsm8k.yaml").write_text("\n".join(lines) + "\n")
    return folder


def _refused(run, *words: str) -> None:
    assert run.returncode == 2, run.stderr[-3000:]
    assert "Traceback" not in run.stderr and "configuration error (ConfigError, exit status 2)" in run.stderr
    for word in words:
        assert word in run.stderr, (word, run.stderr[-3000:])


DEEP = '{"gpt-4o": ' + '{"a": ' * 5000 + "1" + "}" * 5001


@pytest.mark.parametrize("case", ["inline-prices", "missing-column", "missing-column-in-a-later-doc",
                                  "prompt-missing-column-in-a-later-doc", "near-miss-key"])
def test_our_inputs_end_in_one_block_before_generation(tmp_path, case):
    with ChatCompletionsServer(_model) as server:
        if case == "inline-prices":
            run = _run(tmp_path, server, {"judge_prices": DEEP})
            _refused(run, "judge_prices is not valid JSON (nested too deeply to read")
        elif case == "missing-column":
            run = _run(tmp_path, server, {}, tasks="my_gsm8k", include=_override(tmp_path, doc_to_target="{{answr}}"))
            _refused(run, "task my_gsm8k: doc_to_target '{{answr}}' cannot be rendered for doc 0",
                     "'answr' is undefined", "The docs have the columns answer, mj_answer, mj_question",
                     "remove doc_to_target from the YAML override")
        elif case == "missing-column-in-a-later-doc":  # doc 0's answer (18) is even, doc 1's (3) is not
            template = "{{ mj_answer if (mj_answer|int) % 2 == 0 else answr }}"
            run = _run(tmp_path, server, {}, tasks="my_gsm8k", include=_override(tmp_path, doc_to_target=template))
            _refused(run, "doc_to_target", "cannot be rendered for doc 1", "'answr' is undefined")
        elif case == "prompt-missing-column-in-a-later-doc":
            template = "Problem: {{ mj_question if (mj_answer|int) % 2 == 0 else qestion }}\n\nSolution:"
            run = _run(tmp_path, server, {}, tasks="my_gsm8k", include=_override(tmp_path, doc_to_text=template))
            _refused(run, "doc_to_text", "cannot be rendered for doc 1", "'qestion' is undefined")
        else:
            run = _run(tmp_path, server, {"repeat": 4})
            _refused(run, "the metadata key repeat", "is read by no task of this plugin (did you mean repeats?)")
        assert server.call_count == 0  # nothing was generated


def test_keys_that_are_not_ours_keep_running(tmp_path):
    with ChatCompletionsServer(_model) as server:  # another task's keys, and the model's own arguments
        run = _run(tmp_path, server, {"max_seq_lengths": [4096], "tokenizer": "gpt2", "rejudged_from": []},
                   model_args=",timeout=30")
        assert run.returncode == 0, run.stderr[-3000:]
        assert server.call_count == 3
    assert run.results()["results"][TASK]["judge_failed,none"] == 0
