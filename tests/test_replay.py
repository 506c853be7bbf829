"""The replay reader: every documented record shape matches, duplicates are named, bad files say file:line.

Shapes (README, "Re-judging recorded generations"): question only, doc_id only, both, with or
without ``task``, and the lines of an lm_eval samples file. Every malformed input is a
``ConfigError`` naming the file and line and what to do, never a raw traceback of another type.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lm_eval_mathjudge.core.errors import ConfigError
from lm_eval_mathjudge.harness.replay import ReplayLM
from tests.conftest import read_jsonl, write_data_slice
from tests.e2e import run_lm_eval

Q0 = "Janet's ducks lay 16 eggs per day. How much does she make every day?"
Q1 = "A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total?"


@dataclass
class Request:
    """What the replay model reads of an lm-eval Instance."""
    task_name: str
    doc_id: int
    question: str | None = None
    doc: dict = field(init=False)

    def __post_init__(self):
        self.doc = {"question": self.question, "answer": "#### 1"} if self.question else {"answer": "#### 1"}


def _file(tmp_path: Path, *lines: str | bytes, name: str = "replay.jsonl") -> str:
    path = tmp_path / name
    path.write_bytes(b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n" for line in lines))
    return str(path)


def _records(*records: dict) -> list[str]:
    return [json.dumps(r) for r in records]


SHAPES = [
    pytest.param(_records({"question": Q0, "response": "A0"}, {"question": Q1, "response": "A1"}), id="question-only"),
    pytest.param(_records({"problem": Q0, "response": "A0"}, {"problem": Q1, "response": "A1"}), id="problem-only"),
    pytest.param(_records({"doc_id": 0, "response": "A0"}, {"doc_id": 1, "response": "A1"}), id="doc-id-only"),
    pytest.param(_records({"task": "gsm8k_gpt4em", "doc_id": 0, "response": "A0"},
                          {"task": "gsm8k_gpt4em", "doc_id": 1, "response": "A1"}), id="doc-id-and-task"),
    pytest.param(_records({"doc_id": 7, "question": Q0, "response": "A0"},  # another slicing: the question decides
                          {"doc_id": 9, "question": Q1, "response": "A1"}), id="both"),
    pytest.param(_records({"task": "gsm8k_gpt4em", "doc_id": 0, "question": Q0, "response": "A0"},
                          {"task": "other_task", "doc_id": 1, "question": Q1, "response": "A1"}),
                 id="saved-generations-any-task"),
    pytest.param(_records(*({"doc_id": i, "doc": {"question": q}, "resps": [[a]], "filter": f}
                            for i, (q, a) in enumerate(((Q0, "A0"), (Q1, "A1"))) for f in ("none", "strict"))),
                 id="samples-file-two-filters"),
]


@pytest.mark.parametrize("lines", SHAPES)
def test_every_documented_record_shape_matches(tmp_path, lines):
    lm = ReplayLM(path=_file(tmp_path, *lines))
    requests = [Request("gsm8k_gpt4em", 0, Q0), Request("gsm8k_gpt4em", 1, Q1)]
    assert lm.generate_until(requests) == ["A0", "A1"]


def test_a_record_of_the_same_task_wins_and_doc_ids_stay_in_their_task(tmp_path):
    lm = ReplayLM(path=_file(tmp_path, *_records(
        {"task": "a", "question": Q0, "response": "from a"}, {"task": "b", "question": Q0, "response": "from b"},
        {"task": "a", "doc_id": 5, "response": "a:5"})))
    assert lm.generate_until([Request("b", 0, Q0), Request("a", 0, Q0)]) == ["from b", "from a"]
    assert lm.generate_until([Request("a", 5)]) == ["a:5"]
    with pytest.raises(ConfigError, match=r"1 of 1 requests have no recorded response .*b:5"):
        lm.generate_until([Request("b", 5)])  # doc 5 of task a is not doc 5 of task b


def test_a_question_asked_twice_by_the_data_is_told_apart_by_doc_id(tmp_path):
    lm = ReplayLM(path=_file(tmp_path, *_records({"doc_id": 3, "question": Q0, "response": "third"},
                                                 {"doc_id": 8, "question": Q0, "response": "eighth"})))
    assert lm.generate_until([Request("t", 8, Q0), Request("t", 3, Q0)]) == ["eighth", "third"]


def test_doc_id_only_records_without_a_task_are_refused_for_a_run_of_several_tasks(tmp_path):
    lm = ReplayLM(path=_file(tmp_path, *_records({"doc_id": 0, "response": "A0"})))
    with pytest.raises(ConfigError, match=r"only a doc_id and no 'task'.*2 tasks \(a, b\).*add \"task\""):
        lm.generate_until([Request("a", 0, Q0), Request("b", 0, Q1)])


def test_identical_duplicates_count_once_and_different_ones_name_both_lines(tmp_path):
    same = ReplayLM(path=_file(tmp_path, *_records({"question": Q0, "response": "A0"},
                                                   {"question": Q1, "response": "A1"},
                                                   {"question": Q0, "response": "A0"})))
    assert same.generate_until([Request("t", 0, Q0)]) == ["A0"]
    for records, what in ((({"question": Q0, "response": "A0"}, {"doc_id": 4, "response": "x"},
                            {"question": "  " + Q0.replace(" ", "  "), "response": "other"}), "the question"),
                          (({"doc_id": 4, "response": "x"}, {"question": Q1, "response": "A1"},
                            {"doc_id": 4, "response": "y"}), "doc_id 4")):
        path = _file(tmp_path, *_records(*records), name="dup.jsonl")
        with pytest.raises(ConfigError) as raised:
            ReplayLM(path=path)
        assert f"{path}:1 and {path}:3 both record {what}" in str(raised.value)
        assert "keep one of the two lines" in str(raised.value)


MALFORMED = [  # (lines, the line named, words of the message)
    pytest.param([b'{"question": "Q", "response": "caf\xe9"}'], 1, "not UTF-8 (byte 0xe9", id="latin-1-bytes"),
    pytest.param(['{"question": "Q", "response": "A"}', '[{"question": "Q2", "response": "A"}]'], 2,
                 "is a JSON array, not an object", id="json-array-line"),
    pytest.param(['"just a string"'], 1, "is a JSON string, not an object", id="json-string-line"),
    pytest.param(['{"doc_id": "3", "response": "A"}'], 1, "'doc_id' must be a whole number", id="string-doc-id"),
    pytest.param(['{"doc_id": 3.5, "response": "A"}'], 1, "not 3.5", id="float-doc-id"),
    pytest.param(['{"doc_id": -1, "response": "A"}'], 1, "not -1", id="negative-doc-id"),
    pytest.param(['{"doc_id": true, "response": "A"}'], 1, "not True", id="boolean-doc-id"),
    pytest.param(['{"question": "Q", "response": "A"}', '{"question": "Q2"}'], 2, "has no response text",
                 id="missing-response"),
    pytest.param(['{"question": "Q", "response": 42}'], 1, "has no response text", id="number-response"),
    pytest.param(['{"question": ["Q"], "response": "A"}'], 1, "'question' must be the question's text",
                 id="question-not-text"),
    pytest.param(['{"task": 7, "question": "Q", "response": "A"}'], 1, "'task' must be a task name",
                 id="task-not-text"),
    pytest.param(['{"response": "A"}'], 1, "neither a question", id="nothing-to-match"),
    pytest.param(['{"question": "Q", "response": "A"}', '{"question": "Q2", "respon'], 2, "is not valid JSON",
                 id="cut-json"),
    pytest.param(['{"question": "Q", "response": "A"} trailing'], 1, "is not valid JSON (Extra data",
                 id="extra-data"),
    pytest.param(["[" * 100_000], 1, "", id="deeply-nested"),
]


@pytest.mark.parametrize("lines, line, words", MALFORMED)
def test_every_malformed_line_is_a_config_error_naming_file_and_line(tmp_path, lines, line, words):
    path = _file(tmp_path, *lines)
    with pytest.raises(ConfigError) as raised:
        ReplayLM(path=path)
    message = str(raised.value)
    assert re.search(re.escape(f"{path}:{line}") + "[ :]", message) and words in message


@pytest.mark.parametrize("make, words", [
    (lambda d: _file(d), "holds no records (it is empty)"),
    (lambda d: _file(d, "", "   "), "holds no records (it is empty)"),
    (lambda d: str(d), "is a folder; pass one .jsonl file"),
    (lambda d: str(d / "missing.jsonl"), "does not exist"),
], ids=["empty-file", "blank-lines", "a-directory", "missing"])
def test_files_that_hold_nothing_to_replay_say_so(tmp_path, make, words):
    with pytest.raises(ConfigError, match=re.escape(words)):
        ReplayLM(path=make(tmp_path))


def test_a_byte_order_mark_is_not_an_error(tmp_path):
    lm = ReplayLM(path=_file(tmp_path, b"\xef\xbb\xbf" + json.dumps({"question": Q0, "response": "A0"}).encode()))
    assert lm.generate_until([Request("t", 0, Q0)]) == ["A0"]


def test_a_last_record_cut_short_by_a_crash_is_skipped_and_one_in_the_middle_is_an_error(tmp_path):
    whole = json.dumps({"question": Q0, "response": "A0"})
    cut = json.dumps({"question": Q1, "response": "A1"})[:-7]
    path = tmp_path / "live.jsonl"
    path.write_text(whole + "\n" + cut)  # a kill while the last record was being written: no newline yet
    lm = ReplayLM(path=str(path))
    assert lm.generate_until([Request("t", 0, Q0)]) == ["A0"]
    with pytest.raises(ConfigError, match=r"replay\.jsonl:2 is not valid JSON"):
        ReplayLM(path=_file(tmp_path, whole, cut, whole))


def test_append_line_adds_whole_private_records(tmp_path):
    from lm_eval_mathjudge.core.files import append_line

    path = tmp_path / "live.jsonl"
    for i in range(3):
        append_line(str(path), json.dumps({"n": i, "text": "é\n"}) + "\n")
    assert [json.loads(line)["n"] for line in path.read_text().splitlines()] == [0, 1, 2]
    assert path.stat().st_mode & 0o777 == 0o600


# ---------------------------------------------------------------------------------------- the real CLI
def _cli(tmp_path: Path, replay: Path, name: str):
    return run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", "gsm8k_gpt4em",
                        "--metadata", json.dumps({"judge_backend": "local"}), "--log_samples"],
                       {"MATHJUDGE_DATA_DIR": str(tmp_path / "data"), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache")},
                       tmp_path / name)


@pytest.mark.e2e
def test_doc_id_only_records_are_judged_through_the_cli_and_a_bad_line_is_one_clean_error(tmp_path):
    rows = read_jsonl(write_data_slice(tmp_path / "data", 5) / "gsm8k" / "test.jsonl")
    gold = [r["answer"].split("####")[-1].strip().replace(",", "") for r in rows]
    replay = tmp_path / "by_doc_id.jsonl"  # a documented shape that used to match nothing
    replay.write_text("".join(json.dumps({"doc_id": i, "response": f"The answer is \\boxed{{{g}}}."}) + "\n"
                              for i, g in enumerate(gold)))
    good = _cli(tmp_path, replay, "out")
    assert good.returncode == 0, good.stderr[-3000:]
    assert good.results()["results"]["gsm8k_gpt4em"]["gpt4_exact_match,none"] == 1.0
    assert sorted(s["doc_id"] for s in good.samples("gsm8k_gpt4em")) == [0, 1, 2, 3, 4]

    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(replay.read_bytes() + b'[{"doc_id": 5, "response": "x"}]\n')
    bad = _cli(tmp_path, broken, "out-bad")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr  # a configuration error: one block (core/errors.py)
    [what] = [line for line in bad.stderr.splitlines() if line.startswith("  what went wrong: ")]
    assert f"{broken}:6 is a JSON array" in what and "lm_eval: configuration error (ConfigError" in bad.stderr
    for raw in ("AttributeError", "KeyError", "TypeError", "UnicodeDecodeError", "JSONDecodeError"):
        assert raw not in bad.stderr
