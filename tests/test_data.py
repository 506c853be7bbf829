"""Dataset normalisers and offline loading, on the real rows of each test set."""

from __future__ import annotations

import json

import datasets
import pytest

from lm_eval_mathjudge import data
from lm_eval_mathjudge.errors import ConfigError
from tests.conftest import read_jsonl


def _normalised(shared_data, name, process_docs, n=10):
    rows = read_jsonl(shared_data / name / "test.jsonl")[:n]
    return list(process_docs(datasets.Dataset.from_list(rows)))


def test_gsm8k_reference_drops_calculator_annotations(shared_data):
    doc = _normalised(shared_data, "gsm8k", data.gsm8k)[0]
    assert doc["mj_answer"] == "18"
    assert "<<" not in doc["mj_reference"] and doc["mj_reference"].endswith("Final answer: 18")
    assert doc["mj_question"].startswith("Janet")


def test_gsm8k_answers_lose_thousands_separators():
    assert data.gsm8k_answer("... so 1,000 + 200 = 1,200\n#### 1,200") == "1200"


def test_math500_keeps_latex_answers(shared_data):
    doc = _normalised(shared_data, "math500", data.with_solution)[0]
    assert doc["mj_answer"] == r"\left( 3, \frac{\pi}{2} \right)"
    assert doc["mj_reference"] == doc["solution"]


def test_aime24_answers_lose_leading_zeros(shared_data):
    docs = _normalised(shared_data, "aime24", data.aime_with_solution, n=30)
    assert docs[0]["mj_answer"] == "204"
    padded = [d for d in docs if d["answer"].startswith("0")]
    assert padded, "this copy has answers like 025"
    assert all(d["mj_answer"] == str(int(d["answer"])) for d in padded)


def test_aime25_has_no_solution_so_the_reference_states_the_answer(shared_data):
    doc = _normalised(shared_data, "aime25", data.answer_only)[0]
    assert doc["mj_answer"] == "70"  # an int in this copy, a string on the hub
    assert doc["mj_reference"].startswith("The final answer is 70.")


def test_omnimath_uses_problem_solution_answer(shared_data):
    doc = _normalised(shared_data, "omnimath", data.with_solution)[0]
    assert doc["mj_answer"] == "115440" and doc["mj_reference"] == doc["solution"]


def test_load_local_reads_the_layout_into_the_named_split(shared_data):
    dataset = data.load_local(str(shared_data), "aime24", "train")  # the hub copy calls its split train
    assert list(dataset) == ["train"] and dataset["train"][0]["id"] == 60


def test_load_local_names_the_missing_file_and_the_variable(tmp_path):
    with pytest.raises(ConfigError) as error:
        data.load_local(str(tmp_path), "gsm8k", "test")
    message = str(error.value)
    assert str(tmp_path / "gsm8k" / "test.jsonl") in message and "MATHJUDGE_DATA_DIR" in message


def test_load_local_names_the_bad_line(tmp_path):
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "test.jsonl").write_text(json.dumps({"question": "q", "answer": "#### 1"}) + "\n{oops\n")
    with pytest.raises(ConfigError, match=r"test.jsonl:2 is not valid JSON"):
        data.load_local(str(tmp_path), "gsm8k", "test")
