"""All ten tasks and both groups through the real lm_eval CLI, offline, on small real slices.

The model server answers from the gold answers (every third problem wrongly). The
GPT4-EM judge is a loopback OpenAI-protocol server; the VLM judge a loopback
Gemini server driven by the real google-genai SDK. The scenarios run side by side
(tests/e2e.py Scenarios); each test checks its own.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import DATASETS, data_rows, read_jsonl, write_data_slice
from tests.e2e import CANARY_KEY, boxed, question_of, run_lm_eval
from tests.loopback import ChatCompletionsServer, GeminiServer

pytestmark = pytest.mark.e2e

N = 3  # docs per data set
GEMINI_CANARY = "AIza-canary-gemini-0123456789abcdef"
TASKS = [f"{ds}_{judge}" for ds in DATASETS for judge in ("gpt4em", "vlmjudge")]


def _gold_answers(data_dir) -> dict[str, str]:
    """question -> gold answer, as each data set's registry entry reads them."""
    from lm_eval_mathjudge.core import data_sets

    gold = {}
    for name in DATASETS:
        for row in data_rows(data_dir, name):
            question, _, answer = data_sets.get(name).fields(row)
            gold[question] = answer
    return gold


def _model(gold: dict[str, str]):
    order = {q: i for i, q in enumerate(gold)}

    def respond(body: dict) -> str:
        question = question_of(body)
        answer = gold[question] if order[question] % 3 else f"{gold[question]}+1"
        return f"Working through the problem carefully.\nSo the result is {answer}.\n\\boxed{{{answer}}}"
    return respond


def _vlm_reply():
    def respond(body: dict) -> str:
        parts = body["contents"][0]["parts"]
        reference, output = parts[0]["text"], parts[1]["text"]
        answer = boxed(output)
        correct = answer is not None and answer in reference and "+1" not in answer
        flag = int(correct)
        return (f"INTERMEDIATE_CORRECT: {flag}\nFINAL_CORRECT: {flag}\nACTION_REFLECTION: 0\n"
                f"EXPLANATION: The final answer {answer} {'matches' if correct else 'does not match'} the official one.")
    return respond


def _exact_match_any(body: dict) -> str:
    """Like tests.e2e.exact_match_judge, but for references of any data set."""
    prompt = body["messages"][-1]["content"]
    student = prompt.split("### Student's solution", 1)[1].split("### How to grade", 1)[0]
    reference = prompt.split("### Reference solution", 1)[1].split("### Student's solution", 1)[0]
    answer = boxed(student)
    same = answer is not None and "+1" not in answer and answer in reference
    return (f"Error Analysis: The student's final answer is {answer}; it {'matches' if same else 'does not match'} "
            f"the reference.\nFinal Verdict: {'Correct' if same else 'Incorrect'}")


def _all_tasks_run(tmp_path):
    data_dir = write_data_slice(tmp_path / "data", N)
    gold = _gold_answers(data_dir)
    with ChatCompletionsServer(_model(gold)) as model, ChatCompletionsServer(_exact_match_any) as em_judge, \
            GeminiServer(_vlm_reply()) as vlm_judge:
        metadata = {"gpt4em_judge_base_url": em_judge.url, "vlm_judge_base_url": vlm_judge.url}
        run = run_lm_eval(
            ["--model", "local-chat-completions",
             "--model_args", f"model=loopback-model,base_url={model.chat_url},num_concurrent=8,max_retries=1",
             "--apply_chat_template", "--tasks", "mathjudge_gpt4em,mathjudge_vlmjudge", "--log_samples",
             "--metadata", json.dumps(metadata)],
            {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
             "OPENAI_API_KEY": CANARY_KEY, "GEMINI_API_KEY": GEMINI_CANARY},
            tmp_path / "out")
        assert run.returncode == 0, run.stderr[-4000:]
        assert em_judge.call_count == len(DATASETS) * N and vlm_judge.generate_calls == len(DATASETS) * N
    return tmp_path, run


@pytest.mark.e2e_versions
def test_all_ten_tasks_and_both_groups_run_offline(scenario):
    tmp_path, run = scenario()
    expected = 2 / 3  # with N = 3, per data set: doc 0 wrong, docs 1 and 2 right
    results = run.results()["results"]
    for task in TASKS:
        metric = "gpt4_exact_match" if task.endswith("gpt4em") else "final_correct"
        assert results[task][f"{metric},none"] == pytest.approx(expected), task
        assert results[task]["judge_failed,none"] == 0, task
    assert results["mathjudge_gpt4em"]["gpt4_exact_match,none"] == pytest.approx(expected)
    assert results["mathjudge_vlmjudge"]["final_correct,none"] == pytest.approx(expected)
    assert results["mathjudge_vlmjudge"]["intermediate_correct,none"] == pytest.approx(expected)
    assert results["mathjudge_vlmjudge"]["action_reflection,none"] == 0

    configs = run.results()["configs"]
    assert configs["aime25_vlmjudge"]["metadata"]["judge"]["backend"] == "gemini"
    assert configs["aime25_vlmjudge"]["metadata"]["judge"]["model"] == "gemini-2.5-pro"
    assert configs["aime25_gpt4em"]["metadata"]["judge"]["backend"] == "openai"
    record = json.loads(run.samples("aime25_vlmjudge")[0]["filtered_resps"][0])
    assert set(record["verdict"]) == {"intermediate_correct", "final_correct", "action_reflection", "explanation"}
    for path in tmp_path.rglob("*"):
        if path.is_file():
            blob = path.read_bytes()
            assert CANARY_KEY.encode() not in blob and GEMINI_CANARY.encode() not in blob, path


def _media_judge(body: dict) -> str:
    """Grades 1 when the output arrived as media (inline or uploaded), 0 for text."""
    parts = body["contents"][0]["parts"]
    kinds = [k for p in parts for k in ("inlineData", "inline_data", "fileData", "file_data") if k in p]
    flag = int(bool(kinds))
    return (f"INTERMEDIATE_CORRECT: {flag}\nFINAL_CORRECT: {flag}\nACTION_REFLECTION: 1\n"
            f"EXPLANATION: The video shows the work ({', '.join(kinds) or 'no media'}); I watched it to the end.")


def _media_run(tmp_path):
    from tests import media_fixtures as fx

    data_dir = write_data_slice(tmp_path / "data", 3)
    questions = [r["question"] for r in read_jsonl(data_dir / "gsm8k" / "test.jsonl")]
    image, video, missing = tmp_path / "q0.png", tmp_path / "q1.mp4", tmp_path / "q2.mp4"
    image.write_bytes(fx.png(width=32, height=32))
    video.write_bytes(fx.mp4(payload_bytes=16 * 1024 * 1024))  # over the 15 MB inline limit: File API
    recorded = tmp_path / "generations.jsonl"
    recorded.write_text("".join(json.dumps({"question": q, "response": str(p)}) + "\n"
                                for q, p in zip(questions, (image, video, missing))))

    with GeminiServer(_media_judge) as judge:
        run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={recorded}",
                           "--tasks", "gsm8k_vlmjudge", "--log_samples",
                           # replayed paths come from no generator: the folder is named as a media folder
                           "--metadata", json.dumps({"vlm_judge_base_url": judge.url,
                                                     "judge_media_dirs": [str(tmp_path)]})],
                          {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
                           "GEMINI_API_KEY": GEMINI_CANARY}, tmp_path / "out")
        assert run.returncode == 0, run.stderr[-4000:]
        assert judge.generate_calls == 2
        [(mime, uploaded)] = judge.uploaded.values()
        assert mime == "video/mp4" and uploaded == video.read_bytes()
        assert list(judge.uploaded) == judge.deleted  # the upload was removed after judging
    return missing, run


def test_media_outputs_are_attached_uploaded_and_failed_per_file(scenario):
    """Replayed 'generations' that are an image, a large video and a missing file."""
    missing, run = scenario()
    metrics = run.results()["results"]["gsm8k_vlmjudge"]
    assert metrics["final_correct,none"] == pytest.approx(2 / 3)
    assert metrics["judge_failed,none"] == pytest.approx(1 / 3)
    by_doc = {s["doc_id"]: json.loads(s["filtered_resps"][0]) for s in run.samples("gsm8k_vlmjudge")}
    assert by_doc[2]["failure"] == "media" and str(missing) in by_doc[2]["error"]
    assert "inline_data" in by_doc[0]["verdict"]["explanation"] or "inlineData" in by_doc[0]["verdict"]["explanation"]
    assert "file_data" in by_doc[1]["verdict"]["explanation"] or "fileData" in by_doc[1]["verdict"]["explanation"]
    assert run.results()["configs"]["gsm8k_vlmjudge"]["metadata"]["judge"]["run"]["failures"] == {"media": 1}


def _outage_runs(tmp_path):
    data_dir = write_data_slice(tmp_path / "data", N)
    gold = _gold_answers(data_dir)
    env = {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
           "OPENAI_API_KEY": CANARY_KEY}
    with ChatCompletionsServer(_model(gold)) as model, ChatCompletionsServer(_exact_match_any) as judge:
        judge.inject(status=503, times=10_000)
        metadata = {"judge_base_url": judge.url, "judge_max_retries": 0}
        failed = run_lm_eval(
            ["--model", "local-chat-completions",
             "--model_args", f"model=loopback-model,base_url={model.chat_url},num_concurrent=8,max_retries=1",
             "--apply_chat_template", "--tasks", "mathjudge_gpt4em", "--metadata", json.dumps(metadata)],
            env, tmp_path / "out1")
        assert failed.returncode != 0 and "got no verdict" in failed.stderr
        assert f"The generations of {len(DATASETS)} task(s) are saved in" in failed.stderr
        saved = next((tmp_path / "cache" / "generations").glob("*.jsonl"))
        assert {json.loads(line)["task"] for line in saved.read_text().splitlines()} == {
            f"{ds}_gpt4em" for ds in DATASETS}

        judge.reset()
        model_calls = model.call_count
        replay = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={saved}",
                              "--tasks", "mathjudge_gpt4em", "--metadata", json.dumps({"judge_base_url": judge.url})],
                             env, tmp_path / "out2")
        assert replay.returncode == 0, replay.stderr[-4000:]
        assert model.call_count == model_calls and judge.call_count == len(DATASETS) * N
    return replay


def test_a_judge_outage_in_a_group_keeps_every_tasks_generations(scenario):
    """lm-eval judges a group task by task; the first failure must not lose the others' generations."""
    replay = scenario()
    assert replay.results()["results"]["mathjudge_gpt4em"]["gpt4_exact_match,none"] == pytest.approx(2 / 3)


SCENARIOS = {"test_all_ten_tasks_and_both_groups_run_offline": _all_tasks_run,
             "test_media_outputs_are_attached_uploaded_and_failed_per_file": _media_run,
             "test_a_judge_outage_in_a_group_keeps_every_tasks_generations": _outage_runs}
