"""Generator downloads within the network bounds, through the real SDKs against the loopback media servers:
an image or a video over ``max_reply_bytes`` (raw or inflated) is that prompt's counted ``reply_too_large``
(a recorded job kept, so a rerun with a larger cap fetches it without paying again), a redirect to another
origin stops generation, and a reply that drips ends at the deadline."""

from __future__ import annotations

from pathlib import Path

import pytest

from lm_eval_mathjudge import generators
from lm_eval_mathjudge.backends.wire import transport
from lm_eval_mathjudge.core.errors import ConfigError, FatalJudgeError, GenerationFailure, TransientJudgeError
from lm_eval_mathjudge.generators.base import Job
from lm_eval_mathjudge.generators.gemini_image import GeminiImageGenerator
from lm_eval_mathjudge.generators.openai_image import OpenAIImageLM
from lm_eval_mathjudge.generators.sora import SoraLM
from lm_eval_mathjudge.generators.store import MediaStore
from lm_eval_mathjudge.generators.veo import VeoGenerator
from tests import media_fixtures as fx
from tests._helpers import Req, generator_settings
from tests.e2e import CANARY_KEY
from tests.loopback import wire_faults as faults
from tests.loopback.google_media_server import GoogleMediaServer
from tests.loopback.openai_media_server import OpenAIMediaServer

MiB = 1 << 20
PNG, MP4 = fx.png(rgb=(0, 0, 255)), fx.mp4(payload_bytes=2048)
PROMPT = "Show the worked solution: 16 - 3 - 4 = 9 eggs, 9 * 2 = 18 dollars."


@pytest.fixture
def env(monkeypatch):
    for name in ("GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE", "GOOGLE_CLOUD_PROJECT",
                 "GOOGLE_CLOUD_LOCATION", "GOOGLE_APPLICATION_CREDENTIALS", "HTTP_PROXY", "HTTPS_PROXY",
                 "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)

    def point_at(server) -> None:
        monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("GEMINI_API_KEY", "AIza-canary-media-0123456789abcdef")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", server.url)
    return point_at


_settings = generator_settings


@pytest.mark.parametrize("fault", ["flood", "gzip-bomb"])
def test_an_image_reply_over_the_cap_is_a_counted_failure_asked_once(tmp_path, env, fault):
    make = {"flood": lambda: faults.flood(100 * MiB, declare=False), "gzip-bomb": lambda: faults.bomb(1 << 30)}
    with OpenAIMediaServer(image_responder=lambda body: PNG) as server:
        env(server)
        server.misbehave("/images/generations", make[fault]())
        lm = OpenAIImageLM(model="gpt-image-1", media_dir=str(tmp_path / "media"), max_reply_bytes=str(MiB))
        [answer] = lm.generate_until([Req("What is 2 + 3?")], disable_tqdm=True)
        assert server.count("images") == 1  # not retried: the same prompt would flood again
    kind, message = generators.generation_failure(answer)
    assert kind == "reply_too_large" and "max_reply_bytes" in message and f"{MiB:,}-byte cap" in message
    assert not list((tmp_path / "media").glob("*.png"))


def test_a_video_download_over_the_cap_keeps_the_job_for_a_rerun_with_a_larger_cap(tmp_path, env):
    with OpenAIMediaServer(video_responder=lambda form: MP4, polls=1) as server:
        env(server)
        server.misbehave("/content", faults.bomb(1 << 30, 2))
        small = SoraLM(model="sora-2", media_dir=str(tmp_path / "media"), poll_interval=0.01,
                       max_reply_bytes=str(MiB))
        [answer] = small.generate_until([Req("q")], disable_tqdm=True)
        assert generators.generation_failure(answer)[0] == "reply_too_large"
        again = SoraLM(model="sora-2", media_dir=str(tmp_path / "media"), poll_interval=0.01)
        [answer] = again.generate_until([Req("q")], disable_tqdm=True)
        assert server.count("create") == 1 and server.count("download") == 2  # the same job, fetched again
    assert Path(answer).read_bytes() == MP4 and again.stats["jobs_resumed"] == 1


def test_a_veo_operation_over_the_cap_fails_the_sample_and_keeps_the_job(tmp_path, env):
    script = lambda kind, model, body: {"video": MP4, "polls": 0}  # noqa: E731
    with GoogleMediaServer(script) as server:
        env(server)
        config = _settings(tmp_path, "veo-3.0-generate-001", max_reply_bytes=MiB)
        gen = VeoGenerator(config, {})
        job = Job(MediaStore(config.media_dir), "k" * 64, "test", config, sleep=lambda s: None)
        server.misbehave(":fetchPredictOperation", faults.flood(100 * MiB))
        with pytest.raises(GenerationFailure) as caught:
            gen.generate(PROMPT, job)
        assert caught.value.kind == "reply_too_large" and not caught.value.remember
        assert job.id is not None  # still recorded: polled again, not paid again
        assert gen.generate(PROMPT, job).data == MP4
        gen.close()


def test_a_redirect_to_another_origin_stops_generation_and_sends_nothing_there(tmp_path, env):
    script = lambda kind, model, body: {"image": PNG}  # noqa: E731
    with GoogleMediaServer(script) as server, GoogleMediaServer(script) as elsewhere:
        env(server)
        server.misbehave(":generateContent", faults.redirect(307, elsewhere.url + "/models/x:generateContent"))
        gen = GeminiImageGenerator(_settings(tmp_path, "gemini-2.5-flash-image"), {})
        with pytest.raises(FatalJudgeError) as caught:
            gen.generate(PROMPT, Job(MediaStore(str(tmp_path / "media")), "k" * 64, "test",
                                     _settings(tmp_path, "gemini-2.5-flash-image"), sleep=lambda s: None))
        gen.close()
        assert elsewhere.requests == []
    assert caught.value.kind == "redirect" and "GOOGLE_GEMINI_BASE_URL" in str(caught.value)


def test_a_dripping_image_reply_ends_at_the_deadline(tmp_path, env, monkeypatch):
    ticks = iter(range(1, 10**9))
    monkeypatch.setattr(transport, "CLOCK", lambda: float(next(ticks)))
    script = lambda kind, model, body: {"image": PNG}  # noqa: E731
    with GoogleMediaServer(script) as server:
        env(server)
        server.misbehave(":generateContent", faults.drip(b'{"candidates": []}' + b" " * 4000, 0.001))
        config = _settings(tmp_path, "gemini-2.5-flash-image", timeout=30.0)
        gen = GeminiImageGenerator(config, {})
        with pytest.raises(TransientJudgeError) as caught:
            gen.generate(PROMPT, Job(MediaStore(config.media_dir), "k" * 64, "test", config, sleep=lambda s: None))
        gen.close()
    assert caught.value.kind == "timeout" and "--model_args timeout" in str(caught.value)


def test_the_cap_is_a_model_arg_with_limits(tmp_path):
    assert _settings(tmp_path, "m").max_reply_bytes == 256 * MiB
    with pytest.raises(ConfigError, match="max_reply_bytes must be between"):
        _settings(tmp_path, "m", max_reply_bytes=1000)
