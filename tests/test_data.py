"""Each data set's docs (its registry entry) and offline loading, on the real rows of each test set."""

from __future__ import annotations

import json

import datasets
import pytest

from lm_eval_mathjudge.core import data_sets, docs as data
from lm_eval_mathjudge.core.errors import ConfigError
from tests.conftest import REPO, read_jsonl, write_data_slice


def _normalised(shared_data, name, n=10):
    entry = data_sets.get(name)
    rows = read_jsonl(shared_data / entry.local_name / "test.jsonl")[:n]
    return list(entry.process_docs(datasets.Dataset.from_list(rows)))


def test_gsm8k_reference_drops_calculator_annotations(shared_data):
    doc = _normalised(shared_data, "gsm8k")[0]
    assert doc["mj_answer"] == "18"
    assert "<<" not in doc["mj_reference"] and doc["mj_reference"].endswith("Final answer: 18")
    assert doc["mj_question"].startswith("Janet")


def test_gsm8k_answers_lose_thousands_separators():
    assert data_sets.gsm8k_answer("... so 1,000 + 200 = 1,200\n#### 1,200") == "1200"


def test_math500_keeps_latex_answers(shared_data):
    doc = _normalised(shared_data, "math500")[0]
    assert doc["mj_answer"] == r"\left( 3, \frac{\pi}{2} \right)"
    assert doc["mj_reference"] == doc["solution"]


def test_aime24_answers_lose_leading_zeros(shared_data):
    docs = _normalised(shared_data, "aime24", n=30)
    assert docs[0]["mj_answer"] == "204"
    padded = [d for d in docs if d["answer"].startswith("0")]
    assert padded, "this copy has answers like 025"
    assert all(d["mj_answer"] == str(int(d["answer"])) for d in padded)


def test_aime25_has_no_solution_so_the_reference_states_the_answer(shared_data):
    doc = _normalised(shared_data, "aime25")[0]
    assert doc["mj_answer"] == "70"  # an int in this copy, a string on the hub
    assert doc["mj_reference"].startswith("The final answer is 70.")


def test_omnimath_uses_problem_solution_answer(shared_data):
    doc = _normalised(shared_data, "omnimath")[0]
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


# ------------------------------------------------------------------- provenance and offline hints

def test_local_source_names_the_file_its_hash_and_rows(shared_data):
    import hashlib

    source = data.local_source(str(shared_data), "aime24")
    path = shared_data / "aime24" / "test.jsonl"
    assert source == {"path": str(path.resolve()), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                      "rows": len(read_jsonl(path))}


def test_hub_failure_says_what_to_do():
    error = ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub (OfflineModeIsEnabled)")
    message = data.hub_failure("gsm8k_gpt4em", "gsm8k", "openai/gsm8k", error)
    assert "openai/gsm8k is not local and cannot be loaded" in message and "OfflineModeIsEnabled" in message
    assert "MATHJUDGE_DATA_DIR" in message and "gsm8k/test.jsonl" in message and "HF_HUB_OFFLINE=1" in message
    assert message.index("MATHJUDGE_DATA_DIR") < message.index("OfflineModeIsEnabled")  # the way out first


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("environ, unreachable", [
    ({"HF_ENDPOINT": "http://127.0.0.1:{port}"}, True),  # nothing listens: refused at once
    ({"HF_ENDPOINT": "http://127.0.0.1:{port}", "HF_HUB_OFFLINE": "1"}, False),  # offline: the cache decides
    ({"HF_ENDPOINT": "http://127.0.0.1:{port}", "HTTPS_PROXY": "http://proxy:3128"}, False),  # only the proxy knows
])
def test_hub_unreachable_is_told_by_one_connect(environ, unreachable):
    port = _closed_port()
    environ = {k: v.format(port=port) for k, v in environ.items()}
    reason = data.hub_unreachable(environ, timeout=2.0)
    assert (reason is not None) == unreachable
    if unreachable:
        assert f"127.0.0.1:{port} does not answer" in reason


def test_hub_unreachable_is_none_when_the_hub_answers():
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        assert data.hub_unreachable({"HF_ENDPOINT": f"http://127.0.0.1:{server.getsockname()[1]}"}) is None


# The two CLI runs below run side by side (tests/e2e.py Scenarios); each test checks its own.
def _local_file_run(tmp_path):
    from tests.e2e import CANARY_KEY, exact_match_judge, run_lm_eval
    from tests.loopback import ChatCompletionsServer

    root = write_data_slice(tmp_path / "data", 4)
    answers = tmp_path / "answers.jsonl"  # a replay file: the gold answer for each of the 4 docs
    docs = read_jsonl(root / "gsm8k" / "test.jsonl")
    answers.write_text("".join(json.dumps({"question": d["question"],
                                           "response": f"So \\boxed{{{data_sets.gsm8k_answer(d['answer'])}}}"}) + "\n"
                               for d in docs))
    with ChatCompletionsServer(exact_match_judge) as judge:
        run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={answers}", "--tasks", "gsm8k_gpt4em",
                           "--metadata", json.dumps({"judge_base_url": judge.url, "judge_preflight": False})],
                          {"MATHJUDGE_DATA_DIR": str(root), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
                           "OPENAI_API_KEY": CANARY_KEY}, tmp_path / "out")
        url = judge.url
    return root, url, run


@pytest.mark.e2e
def test_cli_results_record_the_local_file_and_the_judge_endpoint(scenario):
    import hashlib

    root, url, run = scenario()
    assert run.returncode == 0, run.stderr[-3000:]
    config = run.results()["configs"]["gsm8k_gpt4em"]
    local = root / "gsm8k" / "test.jsonl"
    assert config["dataset_path"] == str(local.resolve())  # not KbsdJames/... or openai/gsm8k
    assert config["metadata"]["data_source"] == {"path": str(local.resolve()), "rows": 4,
                                                 "sha256": hashlib.sha256(local.read_bytes()).hexdigest()}
    assert config["metadata"]["judge"]["endpoint"] == url


def _no_data_dir_run(tmp_path):
    from tests.e2e import run_lm_eval

    replay = REPO / "examples" / "data" / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl"
    return run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}",
                        "--tasks", "gsm8k_gpt4em", "--metadata", json.dumps({"judge_backend": "local"})],
                       {"HF_HOME": str(tmp_path / "hf")}, tmp_path / "out")


@pytest.mark.e2e
def test_cli_offline_without_a_data_dir_fails_fast_with_the_hint(scenario):
    run = scenario()
    assert run.returncode != 0 and "Running generate_until" not in run.stderr  # stopped while loading the task
    tail = run.stderr[-3000:]
    assert "openai/gsm8k is not local and cannot be loaded from the Hugging Face hub" in tail, tail
    assert "MATHJUDGE_DATA_DIR" in tail and "gsm8k/test.jsonl" in tail and "HF_HUB_OFFLINE=1" in tail
    assert run.returncode == 6 and "Traceback" not in run.stderr  # the data family's exit code, one block


SCENARIOS = {"test_cli_results_record_the_local_file_and_the_judge_endpoint": _local_file_run,
             "test_cli_offline_without_a_data_dir_fails_fast_with_the_hint": _no_data_dir_run}
