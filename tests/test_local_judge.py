"""The offline math-verify judge: same contract as an LLM judge, on real gold answers."""

from __future__ import annotations

import pytest

from lm_eval_mathjudge.backends.local import LocalBackend
from lm_eval_mathjudge.core import data_sets
from lm_eval_mathjudge.core.errors import ConfigError
from tests._helpers import rule_outcome
from tests.conftest import DATASETS, read_jsonl

pytestmark = pytest.mark.local_judge


@pytest.fixture(scope="module")
def backend():
    judge_backend = LocalBackend(workers=2)
    yield judge_backend
    judge_backend.close()


@pytest.fixture
def judge(backend):
    def run(answer: str, response: str) -> bool | None:
        return rule_outcome(backend, answer, response).correct  # None: undecided
    return run


@pytest.mark.parametrize("answer, response, correct", [
    pytest.param("18", "She makes 9 * 2 = $18 a day.\nA: 18", True, id="gsm8k-style"),
    pytest.param("18", "The answer is \\boxed{18.00}", True, id="decimal-form"),
    pytest.param("18", "So the total is \\boxed{19}", False, id="wrong-number"),
    pytest.param(r"\frac{1}{2}", r"Therefore $\boxed{0.5}$", True, id="fraction-vs-decimal"),
    pytest.param(r"\left( 3, \frac{\pi}{2} \right)", r"\boxed{(3, \pi/2)}", True, id="tuple"),
    pytest.param(r"[-2, 7]", r"The solution set is $\boxed{[-2,7]}$.", True, id="interval"),
    pytest.param(r"[-2, 7]", r"The solution set is $\boxed{(-2,7)}$.", False, id="open-vs-closed-interval"),
    pytest.param("204", "I could not finish the problem.", None, id="no-answer"),
])
def test_verdicts(judge, answer, response, correct):
    assert judge(answer, response) is correct


@pytest.mark.parametrize("name", DATASETS)
def test_a_boxed_gold_answer_is_always_judged_correct(judge, shared_data, name):
    entry = data_sets.get(name)
    for row in read_jsonl(shared_data / entry.local_name / "test.jsonl")[:10]:
        answer = entry.fields(row)[2]  # the gold answer as the task gives it to the judge
        assert judge(answer, f"Final answer: $\\boxed{{{answer}}}$"), answer


def test_agrees_with_upstream_labels_on_real_gsm8k_outputs(judge, shared_data):
    gold = [r["answer"].split("####")[-1].strip().replace(",", "")
            for r in read_jsonl(shared_data / "gsm8k" / "test.jsonl")]
    outputs = read_jsonl(shared_data / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl")
    agree = sum(judge(gold[o["doc_id"]], o["response"]) == o["is_correct"] for o in outputs)
    assert agree == len(outputs) == 100


def test_the_local_judge_refuses_the_vlm_contract():
    from lm_eval_mathjudge.backends import local
    from lm_eval_mathjudge.settings.schema import JudgeSettings

    with pytest.raises(ConfigError, match="exact-match"):
        local.create(JudgeSettings(backend="local"), "vlm")
