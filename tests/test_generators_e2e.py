"""Generation to VLM-judge scores through the real lm_eval CLI, offline.

The generators talk to a loopback OpenAI Images/Videos server through the real
``openai`` SDK; the judge is the loopback Gemini server through the real
``google-genai`` SDK. The media server "solves" a problem by drawing a green
page (a 1024-byte MP4 payload for video) and gets it wrong with a red one
(1000 bytes); the judge grades exactly that, so the expected scores are known.
A rerun of the same command must make no generation call and no judge call.
The four scenarios run side by side (tests/e2e.py Scenarios); each test checks its own.
"""

from __future__ import annotations

import base64
import json

import pytest

from tests import media_fixtures as fx
from tests.conftest import read_jsonl, write_data_slice
from tests.e2e import CANARY_KEY, run_lm_eval
from tests.loopback import GeminiServer
from tests.loopback.openai_media_server import MODERATION, OpenAIMediaServer

pytestmark = pytest.mark.e2e

N = 3
GEMINI_CANARY = "AIza-canary-gemini-0123456789abcdef"
TASK = "gsm8k_vlmjudge"
RIGHT_IMAGE, WRONG_IMAGE = fx.png(rgb=(0, 160, 0)), fx.png(rgb=(200, 0, 0))
RIGHT_VIDEO, WRONG_VIDEO = fx.mp4(payload_bytes=1024), fx.mp4(payload_bytes=1000)


def _judge(body: dict) -> str:
    """Correct iff the attached media is the 'right' picture or clip."""
    parts = body["contents"][0]["parts"]
    inline = [p.get("inlineData") or p.get("inline_data") for p in parts]
    data = [_b64(i["data"]) for i in inline if i]
    flag = int(bool(data) and data[0] in (RIGHT_IMAGE, RIGHT_VIDEO))
    return (f"INTERMEDIATE_CORRECT: {flag}\nFINAL_CORRECT: {flag}\nACTION_REFLECTION: 0\n"
            f"EXPLANATION: {'The page shows the right result.' if flag else 'The result shown is wrong.'}")


def _b64(text: str) -> bytes:
    """google-genai may send URL-safe base64 without padding."""
    text = text.replace("-", "+").replace("_", "/")
    return base64.b64decode(text + "=" * (-len(text) % 4))


def _by_question(questions: list[str], right, wrong, refused):
    """doc 0 wrong, doc 1 right, doc 2 refused (as the media server answers)."""
    def respond(prompt: str):
        if questions[2] in prompt:
            return refused
        return wrong if questions[0] in prompt else right
    return respond


def _env(data_dir, tmp_path, server) -> dict[str, str]:
    return {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
            "OPENAI_API_KEY": CANARY_KEY, "OPENAI_BASE_URL": server.url, "GEMINI_API_KEY": GEMINI_CANARY}


def _run(model: str, model_args: str, judge: GeminiServer, env: dict, out) -> dict:
    run = run_lm_eval(["--model", model, "--model_args", model_args, "--tasks", TASK, "--limit", str(N),
                       "--log_samples", "--metadata", json.dumps({"vlm_judge_base_url": judge.url})], env, out)
    assert run.returncode == 0, run.stderr[-4000:]
    return run


def _check_scores(run, failure_kind: str) -> dict:
    metrics = run.results()["results"][TASK]
    assert metrics["final_correct,none"] == pytest.approx(1 / 3)
    assert metrics["judge_failed,none"] == pytest.approx(1 / 3)
    by_doc = {s["doc_id"]: json.loads(s["filtered_resps"][0]) for s in run.samples(TASK)}
    assert by_doc[0]["verdict"]["final_correct"] == 0 and by_doc[1]["verdict"]["final_correct"] == 1
    assert by_doc[2]["failure"] == failure_kind and by_doc[2]["judge_failed"] is True
    return run.results()["configs"][TASK]["metadata"]


def _no_canary(tmp_path, *runs) -> None:
    for path in tmp_path.rglob("*"):
        if path.is_file():
            blob = path.read_bytes()
            assert CANARY_KEY.encode() not in blob and GEMINI_CANARY.encode() not in blob, path
    for run in runs:
        assert CANARY_KEY not in run.stdout + run.stderr


def _image_runs(tmp_path):
    data_dir = write_data_slice(tmp_path / "data", N)
    questions = [r["question"] for r in read_jsonl(data_dir / "gsm8k" / "test.jsonl")]
    answer = _by_question(questions, RIGHT_IMAGE, WRONG_IMAGE, MODERATION)
    with OpenAIMediaServer(image_responder=lambda body: answer(body["prompt"]), latency=0.05) as media, \
            GeminiServer(_judge) as judge:
        media.inject(429, {"Retry-After": "0"}, at="images")
        env = _env(data_dir, tmp_path, media)
        args = "model=gpt-image-1,quality=low,num_concurrent=4"
        first = _run("mathjudge-openai-image", args, judge, env, tmp_path / "out1")
        assert media.count("images") == N + 1 and judge.generate_calls == 2
        sent = [r.body for r in media.requests]
        assert {b["model"] for b in sent} == {"gpt-image-1"} and {b["quality"] for b in sent} == {"low"}
        assert all("Problem:" in b["prompt"] and "final answer" in b["prompt"] for b in sent)

        second = _run("mathjudge-openai-image", args, judge, env, tmp_path / "out2")
        assert media.count("images") == N + 1 and judge.generate_calls == 2  # nothing new was paid for
    return tmp_path, first, second


def test_image_generator_scores_end_to_end_and_a_rerun_makes_no_call(scenario):
    tmp_path, first, second = scenario()
    meta = _check_scores(first, "content_policy")
    generator = meta["generator"]
    assert generator["adapter"] == "mathjudge-openai-image" and generator["model"] == "gpt-image-1"
    assert generator["options"]["quality"] == "low" and generator["prompt_version"].startswith("generator_image@")
    assert generator["run"]["generation_calls"] == N + 1 and generator["run"]["failures"] == {"content_policy": 1}
    assert meta["judge"]["model"] == "gemini-2.5-pro"
    rerun = _check_scores(second, "content_policy")["generator"]["run"]
    assert rerun["generation_calls"] == 0 and rerun["reused_files"] == 2 and rerun["reused_failures"] == 1
    files = sorted(p.name for p in (tmp_path / "cache" / "media").glob("*.png"))
    assert len(files) == 2 and all(len(name) == 64 + 4 for name in files)
    _no_canary(tmp_path, first, second)


def _video_runs(tmp_path):
    data_dir = write_data_slice(tmp_path / "data", N)
    questions = [r["question"] for r in read_jsonl(data_dir / "gsm8k" / "test.jsonl")]
    failed_job = {"video": b"", "fail": ("video_generation_failed", "The render failed.")}
    answer = _by_question(questions, RIGHT_VIDEO, WRONG_VIDEO, failed_job)
    with OpenAIMediaServer(video_responder=lambda form: answer(form["prompt"]), polls=3) as media, \
            GeminiServer(_judge) as judge:
        media.inject(429, {"Retry-After": "0"}, at="create")
        media.inject(503, {"Retry-After": "0"}, at="poll")
        media.inject(at="download", cut=True)
        env = _env(data_dir, tmp_path, media)
        args = "model=sora-2,seconds=8,size=1280x720,poll_interval=0.05,num_concurrent=3"
        first = _run("mathjudge-sora", args, judge, env, tmp_path / "out1")
        assert media.count("create") == N + 1 and len(media.jobs) == N  # the 429 started no job; no job twice
        assert media.count("download") == 2 + 1  # one download cut short, fetched again
        assert {(j.seconds, j.size, j.model) for j in media.jobs.values()} == {("8", "1280x720", "sora-2")}
        assert judge.generate_calls == 2
        calls = (media.count("create"), media.count("poll"), media.count("download"))

        second = _run("mathjudge-sora", args, judge, env, tmp_path / "out2")
        # the failed job is remembered: no create, poll or download at all, and no judge call
        assert (media.count("create"), media.count("poll"), media.count("download")) == calls
        assert judge.generate_calls == 2
    return tmp_path, first, second


def test_video_generator_scores_end_to_end_through_faults_and_a_rerun_makes_no_call(scenario):
    tmp_path, first, second = scenario()
    meta = _check_scores(first, "job_failed")
    assert meta["generator"]["adapter"] == "mathjudge-sora" and meta["generator"]["options"] == {
        "seconds": "8", "size": "1280x720"}
    assert _check_scores(second, "job_failed")["generator"]["run"]["generation_calls"] == 0
    assert len(list((tmp_path / "cache" / "media").glob("*.mp4"))) == 2
    _no_canary(tmp_path, first, second)


def _folder_runs(tmp_path):
    data_dir = write_data_slice(tmp_path / "data", N)
    folder = tmp_path / "media" / TASK
    folder.mkdir(parents=True)
    (folder / "0.png").write_bytes(WRONG_IMAGE)
    (folder / "1.mp4").write_bytes(RIGHT_VIDEO)  # doc 2 has no file: a counted missing_media
    env = {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
           "GEMINI_API_KEY": GEMINI_CANARY}
    with GeminiServer(_judge) as judge:
        first = _run("mathjudge-media", f"dir={tmp_path / 'media'}", judge, env, tmp_path / "out1")
        assert judge.generate_calls == 2
        second = _run("mathjudge-media", f"dir={tmp_path / 'media'}", judge, env, tmp_path / "out2")
        assert judge.generate_calls == 2
    return first, second


def test_pregenerated_media_folder_scores_end_to_end(scenario):
    first, second = scenario()
    meta = _check_scores(first, "missing_media")
    assert meta["generator"]["run"] == {"requests": 3, "found": 2, "failures": {"missing_media": 1}}
    assert "2.{png,jpg" in json.loads(first.samples(TASK)[2]["filtered_resps"][0])["error"]
    assert "1 samples have no media to judge (missing_media: 1)" in first.stderr
    _check_scores(second, "missing_media")


def _fatal_runs(tmp_path):
    data_dir = write_data_slice(tmp_path / "data", N)
    with OpenAIMediaServer(image_responder=lambda body: RIGHT_IMAGE) as media, GeminiServer(_judge) as judge:
        env = _env(data_dir, tmp_path, media)
        media.inject(None, at="images")  # the first image goes through ...
        media.inject(401, at="images")  # ... then the key is refused
        args = ["--model", "mathjudge-openai-image", "--model_args", "model=gpt-image-1,num_concurrent=1",
                "--tasks", TASK, "--limit", str(N), "--metadata", json.dumps({"vlm_judge_base_url": judge.url})]
        failed = run_lm_eval(args, env, tmp_path / "out1")
        assert failed.returncode != 0 and media.count("images") == 2 and judge.generate_calls == 0
        assert "2 of 3 prompts got no media (aborted: 1, http_401: 1)" in failed.stderr
        assert "check OPENAI_API_KEY" in failed.stderr and "rerunning the same command" in failed.stderr

        rerun = run_lm_eval(args, env, tmp_path / "out2")
        assert rerun.returncode == 0, rerun.stderr[-4000:]
        assert media.count("images") == 2 + 2 and judge.generate_calls == N  # only the two missing images
    return tmp_path, failed, rerun


def test_a_fatal_generator_error_stops_the_run_and_the_rerun_pays_only_for_the_rest(scenario):
    tmp_path, failed, rerun = scenario()
    assert rerun.results()["results"][TASK]["final_correct,none"] == 1.0
    _no_canary(tmp_path, failed, rerun)


SCENARIOS = {"test_image_generator_scores_end_to_end_and_a_rerun_makes_no_call": _image_runs,
             "test_video_generator_scores_end_to_end_through_faults_and_a_rerun_makes_no_call": _video_runs,
             "test_pregenerated_media_folder_scores_end_to_end": _folder_runs,
             "test_a_fatal_generator_error_stops_the_run_and_the_rerun_pays_only_for_the_rest": _fatal_runs}
