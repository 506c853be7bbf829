"""The OpenAI generators through the real openai SDK against the loopback Images/Videos server.

Every fault the issue names, table-driven where the cases share a shape: 429 with
Retry-After and 5xx during create and poll, a content-policy refusal, a failed
job, a download cut short, a dropped connection, a fatal 401, bytes that are not
an image, a poll timeout, and a job the server forgot.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lm_eval_mathjudge import generators
from lm_eval_mathjudge.core.errors import ConfigError, GenerationRunError
from lm_eval_mathjudge.generators.openai_image import OpenAIImageLM
from lm_eval_mathjudge.generators.sora import SoraLM
from tests import media_fixtures as fx
from tests._helpers import Req
from tests.e2e import CANARY_KEY
from tests.loopback.openai_media_server import MODERATION, OpenAIMediaServer

PNG, MP4 = fx.png(rgb=(0, 0, 255)), fx.mp4(payload_bytes=2048)




@pytest.fixture
def openai_env(monkeypatch):
    def point_at(server: OpenAIMediaServer) -> None:
        monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    return point_at


def _image_lm(tmp_path: Path, **args) -> OpenAIImageLM:
    return OpenAIImageLM(model="gpt-image-1", media_dir=str(tmp_path / "media"), **args)


def _sora_lm(tmp_path: Path, **args) -> SoraLM:
    return SoraLM(**{"model": "sora-2", "media_dir": str(tmp_path / "media"), "poll_interval": 0.02, **args})


# name, faults injected on the images route, server calls expected
IMAGE_RECOVERIES = [
    ("429 with Retry-After", [dict(status=429, headers={"Retry-After": "0.3"})], 2),
    ("503 twice", [dict(status=503, headers={"Retry-After": "0"}, times=2)], 3),
    ("dropped connection", [dict(drop=True)], 2),
]


@pytest.mark.parametrize("name,faults,calls", IMAGE_RECOVERIES, ids=[c[0] for c in IMAGE_RECOVERIES])
def test_image_faults_are_retried_until_the_image_arrives(name, faults, calls, tmp_path, openai_env):
    with OpenAIMediaServer(image_responder=lambda body: PNG) as server:
        openai_env(server)
        for fault in faults:
            server.inject(**fault, at="images")
        [answer] = _image_lm(tmp_path).generate_until([Req("What is 2 + 3?")], disable_tqdm=True)
        assert server.count("images") == calls
        times = [r.time for r in server.requests]
    assert Path(answer).read_bytes() == PNG and Path(answer).name.endswith(".png")
    if name == "429 with Retry-After":
        assert times[1] - times[0] >= 0.3  # the server's wait was honoured


def test_image_request_carries_our_prompt_options_and_no_key_in_the_body(tmp_path, openai_env):
    with OpenAIMediaServer(image_responder=lambda body: PNG) as server:
        openai_env(server)
        _image_lm(tmp_path, size="1024x1024", quality="high", output_format="png").generate_until(
            [Req("What is 2 + 3?")], disable_tqdm=True)
        [request] = server.requests
    body = request.body
    assert body["model"] == "gpt-image-1" and body["size"] == "1024x1024" and body["quality"] == "high"
    assert body["prompt"].rstrip().endswith("Problem:\nWhat is 2 + 3?") and "final answer" in body["prompt"]
    assert request.headers["authorization"] == f"Bearer {CANARY_KEY}" and CANARY_KEY not in str(body)


def test_a_content_policy_refusal_is_a_counted_failure_remembered_for_reruns(tmp_path, openai_env):
    respond = lambda body: MODERATION if "forbidden" in body["prompt"] else PNG  # noqa: E731
    with OpenAIMediaServer(image_responder=respond) as server:
        openai_env(server)
        answers = _image_lm(tmp_path).generate_until([Req("forbidden"), Req("fine", doc_id=1)], disable_tqdm=True)
        assert generators.generation_failure(answers[0])[0] == "content_policy"
        assert "safety system" in generators.generation_failure(answers[0])[1]
        assert Path(answers[1]).read_bytes() == PNG
        assert server.count("images") == 2  # a refusal is never retried

        again = _image_lm(tmp_path).generate_until([Req("forbidden"), Req("fine", doc_id=1)], disable_tqdm=True)
        assert again == answers and server.count("images") == 2
        _image_lm(tmp_path, retry_failures=True).generate_until([Req("forbidden")], disable_tqdm=True)
        assert server.count("images") == 3
    run = generators.provenance("gsm8k_vlmjudge")["run"]
    assert run["generation_calls"] == 1 and run["failures"] == {"content_policy": 1}


def test_a_fatal_error_stops_every_call_and_keeps_what_was_made(tmp_path, openai_env):
    with OpenAIMediaServer(image_responder=lambda body: PNG) as server:
        openai_env(server)
        _image_lm(tmp_path).generate_until([Req("q0")], disable_tqdm=True)  # paid for before the key broke
        server.inject(401, at="images")
        with pytest.raises(GenerationRunError) as caught:
            _image_lm(tmp_path, num_concurrent=1).generate_until([Req(f"q{i}") for i in range(4)],
                                                                 disable_tqdm=True)
        assert server.count("images") == 2  # q0 reused; one 401; the other two never sent
        message = str(caught.value)
        assert "3 of 4 prompts got no media" in message and "HTTP 401" in message
        assert "check OPENAI_API_KEY" in message and "rerunning the same command" in message
        assert CANARY_KEY not in message

        answers = _image_lm(tmp_path).generate_until([Req(f"q{i}") for i in range(4)], disable_tqdm=True)
        assert server.count("images") == 2 + 3 and all(Path(a).is_file() for a in answers)


def test_bytes_that_are_no_image_are_retried_then_stop_the_run(tmp_path, openai_env):
    with OpenAIMediaServer(image_responder=lambda body: b"<html>not an image</html>") as server:
        openai_env(server)
        with pytest.raises(GenerationRunError, match="bad_media"):
            _image_lm(tmp_path, max_retries=1).generate_until([Req("q")], disable_tqdm=True)
        assert server.count("images") == 2
    assert not list((tmp_path / "media").glob("*.png"))


def test_concurrency_is_bounded_by_num_concurrent(tmp_path, openai_env):
    with OpenAIMediaServer(image_responder=lambda body: PNG, latency=0.2) as server:
        openai_env(server)
        _image_lm(tmp_path, num_concurrent=3).generate_until([Req(f"q{i}") for i in range(9)], disable_tqdm=True)
        assert server.max_in_flight == 3 and server.count("images") == 9


def test_bad_model_args_are_refused_before_any_call(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
    with pytest.raises(ConfigError, match="unknown --model_args key 'sise'"):
        _image_lm(tmp_path, sise="1024x1024")
    with pytest.raises(ConfigError, match="credentials are never read from model_args"):
        _image_lm(tmp_path, api_key="sk-x")
    with pytest.raises(ConfigError, match="output_format"):
        _image_lm(tmp_path, output_format="gif")
    with pytest.raises(ConfigError, match="needs --model_args model=NAME"):
        OpenAIImageLM(media_dir=str(tmp_path))
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        _image_lm(tmp_path)
    with pytest.raises(ConfigError, match="log-likelihoods"):
        monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
        _image_lm(tmp_path).loglikelihood([])


def test_a_custom_prompt_file_replaces_ours_and_changes_the_key(tmp_path, openai_env):
    custom = tmp_path / "prompt.txt"
    custom.write_text("Draw the solution of {{question}} on a blackboard.")
    with OpenAIMediaServer(image_responder=lambda body: PNG) as server:
        openai_env(server)
        _image_lm(tmp_path).generate_until([Req("2+2")], disable_tqdm=True)
        _image_lm(tmp_path, prompt=str(custom)).generate_until([Req("2+2")], disable_tqdm=True)
        assert server.requests[1].body["prompt"] == "Draw the solution of 2+2 on a blackboard."
        assert server.count("images") == 2
    assert generators.provenance("gsm8k_vlmjudge")["prompt_version"].startswith("custom_image@")
    custom.write_text("no placeholder")
    with pytest.raises(ConfigError, match="question"):
        _image_lm(tmp_path, prompt=str(custom))


# ---------------------------------------------------------------------- video
VIDEO_RECOVERIES = [
    ("429 on create", "create", dict(status=429, headers={"Retry-After": "0"}), (2, 1)),
    ("500 on create", "create", dict(status=500, headers={"Retry-After": "0"}), (2, 1)),
    ("503 on poll", "poll", dict(status=503, headers={"Retry-After": "0"}), (1, 1)),
    ("429 on poll", "poll", dict(status=429, headers={"Retry-After": "0"}), (1, 1)),
    ("download cut short", "download", dict(cut=True), (1, 2)),
]


@pytest.mark.parametrize("name,route,fault,calls", VIDEO_RECOVERIES, ids=[c[0] for c in VIDEO_RECOVERIES])
def test_video_faults_are_retried_without_paying_for_a_second_job(name, route, fault, calls, tmp_path, openai_env):
    with OpenAIMediaServer(video_responder=lambda form: MP4, polls=3) as server:
        openai_env(server)
        server.inject(**fault, at=route)
        lm = _sora_lm(tmp_path)
        [answer] = lm.generate_until([Req("What is 2 + 3?")], disable_tqdm=True)
        assert (server.count("create"), server.count("download")) == calls
        assert len(server.jobs) == 1 and server.count("poll") >= 3  # the job took several polls
    assert Path(answer).read_bytes() == MP4 and answer.endswith(".mp4")
    assert lm.stats["jobs_started"] == 1


def test_a_failed_job_and_a_refused_prompt_are_counted_failures(tmp_path, openai_env):
    def respond(form):
        if "refuse" in form["prompt"]:
            return {**MODERATION, "message": "Your request was blocked by our moderation system."}
        if "fail" in form["prompt"]:
            return {"video": b"", "fail": ("internal_error", "Video generation failed.")}
        return MP4
    with OpenAIMediaServer(video_responder=respond, polls=2) as server:
        openai_env(server)
        answers = _sora_lm(tmp_path).generate_until([Req("refuse"), Req("fail"), Req("ok")], disable_tqdm=True)
        assert server.count("create") == 3 and server.count("download") == 1
    assert [generators.generation_failure(a)[0] for a in answers[:2]] == ["content_policy", "job_failed"]
    assert Path(answers[2]).read_bytes() == MP4


def test_a_poll_timeout_fails_the_sample_and_a_rerun_resumes_the_same_job(tmp_path, openai_env):
    with OpenAIMediaServer(video_responder=lambda form: MP4, polls=10_000) as server:
        openai_env(server)
        [answer] = _sora_lm(tmp_path, poll_timeout=0.3).generate_until([Req("slow")], disable_tqdm=True)
        kind, message = generators.generation_failure(answer)
        assert kind == "timeout" and "resumes polling" in message
        [job] = server.jobs.values()
        job.polls_left = 1  # the render finishes while nobody is looking

        lm = _sora_lm(tmp_path)
        [answer] = lm.generate_until([Req("slow")], disable_tqdm=True)
        assert server.count("create") == 1 and Path(answer).read_bytes() == MP4
        assert lm.stats["jobs_resumed"] == 1 and lm.stats["jobs_started"] == 0


def test_a_job_the_server_forgot_is_started_again(tmp_path, openai_env):
    with OpenAIMediaServer(video_responder=lambda form: MP4, polls=10_000) as server:
        openai_env(server)
        _sora_lm(tmp_path, poll_timeout=0.1).generate_until([Req("q")], disable_tqdm=True)
        server.reset()  # every job is gone
        server.polls = 2
        [answer] = _sora_lm(tmp_path).generate_until([Req("q")], disable_tqdm=True)
        assert server.count("create") == 1 and server.count("download") == 1  # after reset: one new job
    assert Path(answer).read_bytes() == MP4


def test_an_image_cut_short_is_retried_and_never_stored(tmp_path, openai_env):
    replies = iter([PNG[:-12], PNG])  # the first one lacks its IEND chunk
    with OpenAIMediaServer(image_responder=lambda body: next(replies)) as server:
        openai_env(server)
        lm = _image_lm(tmp_path)
        [answer] = lm.generate_until([Req("q")], disable_tqdm=True)
        assert lm.stats["retries"] == 1 and server.count("images") == 2
    assert Path(answer).read_bytes() == PNG and len(list((tmp_path / "media").glob("*.png"))) == 1


def test_a_video_download_short_of_its_boxes_is_fetched_again(tmp_path, openai_env):
    with OpenAIMediaServer(video_responder=lambda form: MP4, polls=1) as server:
        openai_env(server)
        server.inject(200, body=MP4[:-100], at="download")  # a consistent Content-Length, but the mdat is short
        lm = _sora_lm(tmp_path)
        [answer] = lm.generate_until([Req("q")], disable_tqdm=True)
        assert server.count("download") == 2 and server.count("create") == 1
    assert Path(answer).read_bytes() == MP4 and len(list((tmp_path / "media").glob("*.mp4"))) == 1


def test_the_same_prompt_in_two_tasks_is_generated_once_and_counted_per_task(tmp_path, openai_env):
    with OpenAIMediaServer(image_responder=lambda body: PNG) as server:
        openai_env(server)
        answers = _image_lm(tmp_path).generate_until(
            [Req("2+2", task_name="gsm8k_vlmjudge"), Req("2+2", task_name="math500_vlmjudge"), Req("3+3")],
            disable_tqdm=True)
        assert server.count("images") == 2
    assert answers[0] == answers[1] == answers[2]  # same bytes from the server: one file
    assert generators.provenance("gsm8k_vlmjudge")["run"]["unique_prompts"] == 2
    assert generators.provenance("math500_vlmjudge")["run"]["requests"] == 1
