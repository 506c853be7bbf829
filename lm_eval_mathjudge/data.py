"""Datasets: offline loading and one normaliser per dataset.

Every task's ``process_docs`` adds the same three fields, so prompts and
judges never need to know which dataset a doc came from:

* ``mj_question``  the problem statement shown to the model and the judge;
* ``mj_reference`` the ground truth given to the judge: the worked solution,
  or, where the dataset has none (AIME 2025), a sentence stating the answer;
* ``mj_answer``    the gold short answer (used by the local judge and as target).

With ``MATHJUDGE_DATA_DIR=DIR`` a task reads ``DIR/<name>/test.jsonl``
instead of the Hugging Face hub (the layout of the project's shared data).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Callable

from .errors import ConfigError

DATA_DIR_ENV = "MATHJUDGE_DATA_DIR"
LOCAL_FILE = "test.jsonl"
_CALCULATOR = re.compile(r"<<[^<>]*>>")  # GSM8K's "<<48/2=24>>" annotations


def local_data_dir() -> str | None:
    return os.environ.get(DATA_DIR_ENV) or None


def load_local(data_dir: str, name: str, split: str):
    """A DatasetDict with one split read from ``data_dir/name/test.jsonl``."""
    import datasets

    path = os.path.join(data_dir, name, LOCAL_FILE)
    if not os.path.isfile(path):
        raise ConfigError(f"{DATA_DIR_ENV}={data_dir} has no {name}/{LOCAL_FILE} (looked for {path}). "
                          f"Point {DATA_DIR_ENV} at a folder laid out as <dataset>/{LOCAL_FILE}, "
                          f"or unset it to load from the Hugging Face hub.")
    with open(path, encoding="utf-8") as fh:
        rows = [_json_row(line, path, n) for n, line in enumerate(fh, 1) if line.strip()]
    return datasets.DatasetDict({split: datasets.Dataset.from_list(rows)})


def _json_row(line: str, path: str, number: int) -> dict[str, Any]:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{number} is not valid JSON ({exc.msg})") from None


def _normalise(fn: Callable[[dict], tuple[str, str, str]]):
    """Wrap a per-doc (question, reference, answer) function as a process_docs."""
    def process_docs(dataset):
        def add_fields(doc):
            question, reference, answer = fn(doc)
            return {"mj_question": question, "mj_reference": reference, "mj_answer": answer}
        return dataset.map(add_fields)
    process_docs.__name__ = fn.__name__
    return process_docs


def gsm8k_answer(solution: str) -> str:
    return solution.split("####")[-1].strip().replace(",", "")


@_normalise
def gsm8k(doc):
    solution = doc["answer"]
    steps, _, _ = solution.rpartition("####")
    reference = f"{_CALCULATOR.sub('', steps).strip()}\nFinal answer: {gsm8k_answer(solution)}"
    return doc["question"], reference, gsm8k_answer(solution)


@_normalise
def with_solution(doc):
    """MATH-500 and Omni-MATH: problem, solution, answer (LaTeX kept as given)."""
    return doc["problem"], doc["solution"], str(doc["answer"]).strip()


@_normalise
def aime_with_solution(doc):
    """AIME 2024: problem, worked solution, integer answer."""
    return doc["problem"], doc["solution"], _aime_number(str(doc["answer"]).strip())


@_normalise
def answer_only(doc):
    """AIME 2025: no worked solution exists in the dataset."""
    answer = _aime_number(str(doc["answer"]).strip())
    return doc["problem"], f"The final answer is {answer}. (No worked solution is available.)", answer


def _aime_number(answer: str) -> str:
    # AIME answers are integers 0-999; some copies keep leading zeros ("025").
    return str(int(answer)) if answer.isdigit() else answer
