"""Judge drift: the model version the judge's API reports is recorded, and the leaderboard refuses to rank
runs whose judges reported different versions (through the real openai SDK and lm_eval CLI)."""

from __future__ import annotations

import json

import pytest

from lm_eval_mathjudge.__main__ import main
from lm_eval_mathjudge.core import docs as data
from lm_eval_mathjudge.core.types import Reply, clean_reply
from tests.conftest import read_jsonl, write_data_slice

TASK = "gsm8k_gpt4em"


def _judged(tmp, root, docs, name, snapshot):
    from tests.e2e import CANARY_KEY, exact_match_judge, run_lm_eval
    from tests.loopback import ChatCompletionsServer

    replay = tmp / f"{name}.jsonl"
    replay.write_text("".join(json.dumps({"question": d["question"],
                                          "response": f"So \\boxed{{{data.gsm8k_answer(d['answer'])}}}"}) + "\n"
                              for d in docs))
    with ChatCompletionsServer(lambda body: {"content": exact_match_judge(body), "model": snapshot}) as judge:
        run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", TASK,
                           "--log_samples", "--metadata",
                           json.dumps({"judge_base_url": judge.url, "judge_preflight": False, "judge_model": "gpt-4o"})],
                          {"MATHJUDGE_DATA_DIR": str(root), "MATHJUDGE_CACHE_DIR": str(tmp / f"cache-{name}"),
                           "OPENAI_API_KEY": CANARY_KEY}, tmp / name)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


def test_reported_snapshots_are_recorded_and_mixed_ones_are_not_ranked(tmp_path, capsys):
    root = write_data_slice(tmp_path / "data", 3)
    docs = read_jsonl(root / "gsm8k" / "test.jsonl")
    a = _judged(tmp_path, root, docs, "a", "gpt-4o-2024-08-06")
    b = _judged(tmp_path, root, docs, "b", "gpt-4o-2024-11-20")
    c = _judged(tmp_path, root, docs, "c", "gpt-4o-2024-08-06")
    meta = a.results()["configs"][TASK]["metadata"]["judge"]
    assert meta["model"] == "gpt-4o" and meta["run"]["reported_models"] == {"gpt-4o-2024-08-06": 3}

    assert main(["leaderboard", str(a.out_dir), str(b.out_dir), "--out", str(tmp_path / "board")]) != 0
    err = capsys.readouterr().err
    assert "judge snapshot" in err and "gpt-4o-2024-08-06" in err and "gpt-4o-2024-11-20" in err
    assert main(["leaderboard", str(a.out_dir), str(b.out_dir), "--out", str(tmp_path / "board"),
                 "--allow-mixed"]) == 0
    assert main(["leaderboard", str(a.out_dir), str(c.out_dir), "--out", str(tmp_path / "board")]) == 0


@pytest.mark.parametrize("reported, kept", [
    ("gpt-4o-2024-08-06", "gpt-4o-2024-08-06"),
    ("x" * 500, "x" * 200),                                   # the provider's text, bounded
    ("sk-proj-abcdefghijklmnopqrstuvwxyz0123456789", None),   # never a credential in the results
])
def test_a_reported_model_version_is_cleaned_like_the_reply(reported, kept):
    cleaned = clean_reply(Reply(text="Final Verdict: Correct", model=reported))
    if kept is None:
        assert "abcdefghijklmnopqrstuvwxyz" not in (cleaned.model or "")
    else:
        assert cleaned.model == kept
