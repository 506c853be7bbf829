"""k samples per problem through the real lm_eval CLI: repeats 4, the replay model, a loopback judge."""

from __future__ import annotations

import json
import math

import pytest

from lm_eval_mathjudge.core.data_sets import gsm8k_answer
from tests.conftest import read_jsonl, write_data_slice

pytestmark = pytest.mark.e2e

TASK = "gsm8k_gpt4em"


def _replay(tmp_path, docs):
    """Three problems, four recorded answers each (gold g; wrong answers w):
    doc 0: g g g g         (identical: judged once)            avg 1,    pass@2 1,   maj 1
    doc 1: g 7 7.0 g       (7 and 7.0 are one answer: a tie)   avg 1/2,  pass@2 5/6, maj 1/2 (tied)
    doc 2: w w' g v        (w and w' state the same value)      avg 1/4,  pass@2 1/2, maj 0
    """
    golds = [gsm8k_answer(d["answer"]) for d in docs]
    rows = [
        {"question": docs[0]["question"], "responses": [f"So \\boxed{{{golds[0]}}}"] * 4},
        {"question": docs[1]["question"], "responses": [f"Thus \\boxed{{{golds[1]}}}", "So \\boxed{7}",
                                                         "Hence \\boxed{7.0}", f"Thus \\boxed{{{golds[1]}}}"]},
        # a samples file's shape: k answers in resps
        {"doc": {"question": docs[2]["question"]},
         "resps": [["The answer is \\boxed{3}.", "So it is \\boxed{3}", f"\\boxed{{{golds[2]}}}", "\\boxed{9999}"]]},
    ]
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.e2e_versions  # lm-eval 0.5 takes --repeats after the task is built (compat.py)
@pytest.mark.parametrize("how", ["metadata", "cli"])
def test_repeats_4_reports_avg_pass_and_maj_over_problems(tmp_path, how):
    from lm_eval_mathjudge import compat
    from tests.e2e import CANARY_KEY, exact_match_judge, run_lm_eval
    from tests.loopback import ChatCompletionsServer

    if how == "cli" and not compat.has_scorers():
        pytest.skip("--repeats is a flag of lm-eval 0.5's CLI only")
    root = write_data_slice(tmp_path / "data", 3)
    docs = read_jsonl(root / "gsm8k" / "test.jsonl")
    replay = _replay(tmp_path, docs)
    metadata = {"judge_pass_at": [1, 2, 4], "judge_base_url": None, "judge_preflight": False}
    with ChatCompletionsServer(exact_match_judge) as judge:
        metadata["judge_base_url"] = judge.url
        if how == "metadata":
            metadata["repeats"] = 4
        run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", TASK,
                           "--log_samples", "--metadata", json.dumps(metadata),
                           *(["--repeats", "4"] if how == "cli" else [])],
                          {"MATHJUDGE_DATA_DIR": str(root), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
                           "OPENAI_API_KEY": CANARY_KEY}, tmp_path / "out")
        calls = judge.call_count
    assert run.returncode == 0, run.stderr[-3000:]
    results = run.results()["results"][TASK]
    expected = {"gpt4_exact_match_avg@4": (1 + 1 / 2 + 1 / 4) / 3, "gpt4_exact_match_pass@1": (1 + 1 / 2 + 1 / 4) / 3,
                "gpt4_exact_match_pass@2": (1 + 5 / 6 + 1 / 2) / 3, "gpt4_exact_match_pass@4": 1.0,
                "gpt4_exact_match_maj@4": (1 + 1 / 2 + 0) / 3, "judge_failed": 0.0}
    for metric, value in expected.items():
        assert results[f"{metric},none"] == pytest.approx(value), metric
    # the interval is over the three problems' means, not over the twelve samples
    per_problem = [1, 1 / 2, 1 / 4]
    mean = sum(per_problem) / 3
    sd = math.sqrt(sum((v - mean) ** 2 for v in per_problem) / 2)
    assert results["gpt4_exact_match_avg@4_stderr,none"] == pytest.approx(sd / math.sqrt(3))
    assert "gpt4_exact_match_avg@4" in run.stdout  # in lm-eval's own table

    # 12 samples, 8 distinct (doc, response) pairs: identical ones judged once, and counted
    assert calls == 8
    meta = run.results()["configs"][TASK]["metadata"]["judge"]
    assert meta["run"]["requests"] == 12 and meta["run"]["unique_requests"] == 8
    ks = meta["k_samples"]
    assert ks["k"] == 4 and ks["problems"] == 3 and ks["samples"] == 12 and ks["identical_responses"] == 4
    assert ks["maj"]["ties"] == 1 and ks["maj"]["tied_docs"] == [1] and ks["maj"]["no_answer"] == 0

    samples = sorted(run.samples(TASK), key=lambda s: s["doc_id"])
    assert [len(s["resps"][0]) for s in samples] == [4, 4, 4]
    verdicts = [[json.loads(r)["verdict"]["correct"] for r in s["filtered_resps"][0]] for s in samples]
    assert verdicts == [[True] * 4, [True, False, False, True], [False, False, True, False]]
    assert samples[1]["gpt4_exact_match_maj@4"] == 0.5 and samples[2]["gpt4_exact_match_pass@2"] == 0.5


def test_repeats_with_the_cascade_name_the_cascades_metrics(tmp_path):
    """The cascade judges on its own path: its rule stage decides the samples it accepts, k records per doc."""
    from tests.e2e import CANARY_KEY, exact_match_judge, run_lm_eval
    from tests.loopback import ChatCompletionsServer

    root = write_data_slice(tmp_path / "data", 3)
    docs = read_jsonl(root / "gsm8k" / "test.jsonl")
    replay = _replay(tmp_path, docs)
    with ChatCompletionsServer(exact_match_judge) as judge:
        run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", TASK,
                           "--log_samples", "--metadata",
                           json.dumps({"repeats": 4, "judge_cascade": True, "judge_base_url": judge.url,
                                       "judge_preflight": False})],
                          {"MATHJUDGE_DATA_DIR": str(root), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
                           "OPENAI_API_KEY": CANARY_KEY}, tmp_path / "out")
        calls = judge.call_count
    assert run.returncode == 0, run.stderr[-3000:]
    results = run.results()["results"][TASK]
    names = {key.split(",")[0] for key in results if "_stderr" not in key and "," in key}
    avg = next(n for n in names if n.endswith("_avg@4"))
    assert avg != "gpt4_exact_match_avg@4" and f"{avg[:-len('_avg@4')]}_maj@4" in names  # the cascade's own name
    assert results[f"{avg},none"] == pytest.approx((1 + 1 / 2 + 1 / 4) / 3)
    # the rule stage accepts the gold answers (doc 0's four identical ones are one request): only the rest
    # reach the LLM judge, each distinct response once
    assert calls == 5  # 7, 7.0; the two texts stating 3; 9999
    samples = sorted(run.samples(TASK), key=lambda s: s["doc_id"])
    assert [len(s["filtered_resps"][0]) for s in samples] == [4, 4, 4]
