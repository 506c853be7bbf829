"""Google generators from generation to VLM-judge scores through the real lm_eval CLI, offline.

The generators reach GoogleMediaServer through the real google-genai SDK: the
Gemini image model over the Gemini API (GOOGLE_GEMINI_BASE_URL), Imagen and Veo
over Vertex AI express mode (GOOGLE_VERTEX_BASE_URL, key in GEMINI_API_KEY).
The VLM judge is the loopback Gemini server on the Gemini API in the same run,
so the Vertex AI generators must not switch the judge to Vertex AI.

Doc 0 gets the "wrong" picture or clip, doc 1 the "right" one, doc 2 a refusal
of the kind each service sends; the judge grades by the attached bytes, so the
scores are known: final_correct 1/3, judge_failed 1/3. The scenarios run side by side
(tests/e2e.py Scenarios); each test checks its own.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time

import pytest

from tests import media_fixtures as fx
from tests.conftest import read_jsonl, write_data_slice
from tests.e2e import _INHERITED_PREFIXES, LM_EVAL, TIMEOUT_S, run_lm_eval
from tests.loopback import GeminiServer
from tests.loopback.google_media_server import GoogleMediaServer

pytestmark = pytest.mark.e2e

N = 3
TASK = "gsm8k_vlmjudge"
CANARY = "AIza-canary-google-media-0123456789"
RIGHT_IMAGE, WRONG_IMAGE = fx.png(width=12, rgb=(0, 160, 0)), fx.png(width=12, rgb=(200, 0, 0))
RIGHT_VIDEO, WRONG_VIDEO = fx.mp4(payload_bytes=2048), fx.mp4(payload_bytes=2000)

# model, media-server route, the refusal doc 2 gets, its failure kind, extra model_args
CASES = [
    pytest.param("gemini-2.5-flash-image", "content", {"finish_reason": "IMAGE_SAFETY"}, "image_safety",
                 "aspect_ratio=1:1", id="gemini-2.5-flash-image"),
    pytest.param("imagen-4.0-generate-001", "imagen", {"rai_reason": "filtered by the safety settings"},
                 "rai_filtered", "aspect_ratio=1:1,seed=3", id="imagen-4"),
]
VEO_ARGS = "model=veo-3.0-generate-001,duration_seconds=4,poll_interval=0.05"


def _judge(body: dict) -> str:
    """Correct iff the attached media is the right picture or clip (the SDK sends URL-safe base64)."""
    inline = [p.get("inlineData") or p.get("inline_data") for p in body["contents"][0]["parts"]]
    data = [base64.urlsafe_b64decode(i["data"]) for i in inline if i]
    flag = int(bool(data) and data[0] in (RIGHT_IMAGE, RIGHT_VIDEO))
    return (f"INTERMEDIATE_CORRECT: {flag}\nFINAL_CORRECT: {flag}\nACTION_REFLECTION: 0\n"
            f"EXPLANATION: {'The written result is right.' if flag else 'The written result is wrong.'}")


def _media(questions: list[str], refusal: dict, polls: int = 2):
    """Answers each generation by the question inside its prompt."""
    def respond(kind: str, model: str, body: dict) -> dict:
        prompt = body["contents"][0]["parts"][0]["text"] if kind == "content" else body["instances"][0]["prompt"]
        if questions[2] in prompt:
            return dict(refusal)
        right = questions[1] in prompt
        if kind == "veo":
            return {"video": RIGHT_VIDEO if right else WRONG_VIDEO, "polls": polls}
        return {"image": RIGHT_IMAGE if right else WRONG_IMAGE}
    return respond


def _env(data_dir, tmp_path, media: GoogleMediaServer) -> dict[str, str]:
    return {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
            "GEMINI_API_KEY": CANARY, "GOOGLE_GEMINI_BASE_URL": media.url, "GOOGLE_VERTEX_BASE_URL": media.url}


def _args(adapter: str, model_args: str, judge: GeminiServer) -> list[str]:
    return ["--model", adapter, "--model_args", model_args, "--tasks", TASK, "--limit", str(N), "--log_samples",
            "--metadata", json.dumps({"vlm_judge_base_url": judge.url})]


def _questions(data_dir) -> list[str]:
    return [row["question"] for row in read_jsonl(data_dir / "gsm8k" / "test.jsonl")[:N]]


def _check(run, failure_kind: str) -> dict:
    assert run.returncode == 0, run.stderr[-4000:]
    metrics = run.results()["results"][TASK]
    assert metrics["final_correct,none"] == pytest.approx(1 / 3)
    assert metrics["judge_failed,none"] == pytest.approx(1 / 3)
    by_doc = {s["doc_id"]: json.loads(s["filtered_resps"][0]) for s in run.samples(TASK)}
    assert by_doc[0]["verdict"]["final_correct"] == 0 and by_doc[1]["verdict"]["final_correct"] == 1
    assert by_doc[2]["failure"] == failure_kind and by_doc[2]["judge_failed"] is True
    return run.results()["configs"][TASK]["metadata"]["generator"]


def _generation_runs(tmp_path, model, route, refusal, kind, extra):
    data_dir = write_data_slice(tmp_path / "data", N)
    adapter = "mathjudge-gemini-image"
    with GoogleMediaServer(_media(_questions(data_dir), refusal)) as media, GeminiServer(_judge) as judge:
        env = _env(data_dir, tmp_path, media)
        media.inject(status=429, headers={"Retry-After": "0"})  # the first create is rate limited, then retried
        first = run_lm_eval(_args(adapter, f"model={model},{extra}", judge), env, tmp_path / "out1")
        generator = _check(first, kind)
        creates = len(media.calls(route))
        assert creates == N + 1  # three prompts plus the one rate-limited attempt
        assert judge.generate_calls == 2  # the refused doc never reaches the judge
        assert generator["adapter"] == adapter and generator["model"] == model
        assert generator["run"]["failures"] == {kind: 1} and generator["run"]["generated_files"] == 2

        before = len(media.requests)
        second = run_lm_eval(_args(adapter, f"model={model},{extra}", judge), env, tmp_path / "out2")
        generator = _check(second, kind)
        assert len(media.requests) == before and judge.generate_calls == 2  # nothing paid twice
        assert generator["run"]["generation_calls"] == 0 and generator["run"]["reused_files"] == 2
    return tmp_path, first, second


@pytest.mark.parametrize("model, route, refusal, kind, extra", CASES)
def test_generation_to_scores_and_a_free_rerun(scenario, model, route, refusal, kind, extra):
    tmp_path, first, second = scenario()
    _no_canary(tmp_path, first, second)


def _veo_runs(tmp_path):
    data_dir = write_data_slice(tmp_path / "data", N)
    refusal = {"error": {"code": 3, "message": "The prompt violates Vertex AI's usage guidelines."}, "polls": 10_000}
    with GoogleMediaServer(_media(_questions(data_dir), refusal, polls=10_000)) as media, \
            GeminiServer(_judge) as judge:
        env = _env(data_dir, tmp_path, media)
        media.inject(status=429, headers={"Retry-After": "0"})  # the first create is rate limited, then retried
        media.inject_poll(503, headers={"Retry-After": "0"})  # and so is one poll
        _kill_once_polling(_args("mathjudge-veo", VEO_ARGS, judge), env, tmp_path / "out0", media)
        started = media.operation_names()
        assert len(media.calls("veo")) == N + 1
        media.finish_operations()  # the jobs finish while nobody is polling

        resumed = run_lm_eval(_args("mathjudge-veo", VEO_ARGS, judge), env, tmp_path / "out1")
        generator = _check(resumed, "content_policy")
        assert len(media.calls("veo")) == N + 1 and media.operation_names() == started  # no job paid twice
        assert judge.generate_calls == 2
        assert generator["run"]["generation_calls"] == N and generator["run"]["failures"] == {"content_policy": 1}
        assert generator["options"]["duration_seconds"] == 4 and generator["options"]["generate_audio"] is False

        before = len(media.requests)
        again = run_lm_eval(_args("mathjudge-veo", VEO_ARGS, judge), env, tmp_path / "out2")
        generator = _check(again, "content_policy")
        assert len(media.requests) == before and judge.generate_calls == 2
        assert generator["run"]["generation_calls"] == 0 and generator["run"]["reused_files"] == 2
    return tmp_path, resumed, again


def test_veo_killed_while_polling_resumes_the_same_operations_then_reruns_free(scenario):
    """SIGKILL mid-poll, rerun (polls the recorded operations, scores), rerun again (no call at all)."""
    tmp_path, resumed, again = scenario()
    _no_canary(tmp_path, resumed, again)


def _kill_once_polling(args: list[str], env: dict, out, media: GoogleMediaServer) -> None:
    """Start lm_eval, SIGKILL it once every operation has been polled at least twice."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(_INHERITED_PREFIXES)}
    proc = subprocess.Popen([LM_EVAL, *args, "--output_path", str(out)],
                            env={**clean, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not (len(media.operation_names()) == N and all(media.fetches(n) >= 2 for n in media.operation_names())):
            assert proc.poll() is None and time.monotonic() < deadline, "lm_eval never got to polling"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=TIMEOUT_S)


def _no_canary(tmp_path, *runs) -> None:
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path
    for run in runs:
        assert CANARY not in run.stdout + run.stderr


SCENARIOS = {"test_generation_to_scores_and_a_free_rerun": _generation_runs,
             "test_veo_killed_while_polling_resumes_the_same_operations_then_reruns_free": _veo_runs}
