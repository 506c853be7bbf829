"""Wire-level: the Google generators drive the real google-genai SDK against GoogleMediaServer.

Gemini image models over the Gemini API (generateContent with image parts),
Imagen over Vertex AI express mode (:predict), Veo over Vertex AI
(:predictLongRunning + :fetchPredictOperation). Each reply below is what the
service sends; the table checks how each one ends: media, a counted failure
with a named kind, a transient error for the retry layer, or a fatal error.
"""

from __future__ import annotations

import base64
import functools
import os

import pytest

from lm_eval_mathjudge.core.errors import (ConfigError, FatalJudgeError, GenerationFailure, GenerationRunError,
                                           TransientJudgeError)
from lm_eval_mathjudge.generators.base import GeneratorSettings, Job
from lm_eval_mathjudge.generators.gemini_image import GeminiImageGenerator
from lm_eval_mathjudge.generators.store import MediaStore
from lm_eval_mathjudge.generators.veo import VeoGenerator
from lm_eval_mathjudge.calls.retry import RetryPolicy
from tests import media_fixtures as fx
from tests._helpers import Req, generator_settings
from tests.loopback.google_media_server import ACCESS_TOKEN, PROJECT, GoogleMediaServer

CANARY = "AIza-canary-media-0123456789abcdef"
PROMPT = "Show the worked solution: 16 - 3 - 4 = 9 eggs, 9 * 2 = 18 dollars."
PNG = fx.png(width=24, height=12, rgb=(10, 200, 30))
MP4 = fx.mp4(payload_bytes=4096)


class Script:
    """Responder that answers every generation with ``spec`` (tests change it)."""

    def __init__(self, spec: dict):
        self.spec = spec
        self.bodies: list[tuple[str, dict]] = []

    def __call__(self, kind: str, model: str, body: dict) -> dict:
        self.bodies.append((kind, body))
        return dict(self.spec)


@pytest.fixture(autouse=True)
def google_env(monkeypatch):
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE",
                 "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL",
                 "GOOGLE_GENAI_API_VERSION", "GOOGLE_APPLICATION_CREDENTIALS", "HTTP_PROXY", "HTTPS_PROXY",
                 "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", CANARY)


@pytest.fixture
def script():
    return Script({"image": PNG})


@pytest.fixture
def server(script, monkeypatch):
    with GoogleMediaServer(script) as srv:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", srv.url)
        monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", srv.url)
        yield srv


settings = generator_settings


def job_for(tmp_path, config: GeneratorSettings, key: str = "k" * 64) -> Job:
    return Job(MediaStore(config.media_dir), key, "test", config, sleep=lambda s: None)


def image_generator(tmp_path, model="gemini-2.5-flash-image", **options):
    return GeminiImageGenerator(settings(tmp_path, model), options)


# ----------------------------------------------------------------------- Gemini image models

def test_gemini_image_model_on_the_gemini_api(server, script, tmp_path):
    script.spec = {"text": "Here is the worked solution.", "image": PNG}
    gen = image_generator(tmp_path, aspect_ratio="3:4", seed=7)
    media = gen.generate(PROMPT, None)  # an image is one call: no job
    gen.close()
    assert media.data == PNG and media.mime_type == "image/png"
    [request] = server.requests
    assert request.path == "/v1/models/gemini-2.5-flash-image:generateContent"
    assert request.headers["x-goog-api-key"] == CANARY
    config = request.body["generationConfig"]
    assert config["responseModalities"] == ["IMAGE"] and config["imageConfig"] == {"aspectRatio": "3:4"}
    assert config["seed"] == 7 and request.body["contents"][0]["parts"] == [{"text": PROMPT}]
    assert gen.options() == {"api": "gemini", "number_of_images": 1, "aspect_ratio": "3:4", "seed": 7,
                             "response_modalities": ["IMAGE"]}


def test_gemini_image_model_on_vertex_when_asked(server, tmp_path):
    gen = image_generator(tmp_path, vertexai=True, with_text=True, image_size="2K")
    assert gen.generate(PROMPT, None).data == PNG
    [request] = server.requests
    assert request.path == "/v1beta1/publishers/google/models/gemini-2.5-flash-image:generateContent"
    assert request.body["generationConfig"]["responseModalities"] == ["TEXT", "IMAGE"]
    assert request.body["generationConfig"]["imageConfig"] == {"imageSize": "2K"}


def test_the_sdk_switch_moves_gemini_image_models_to_vertex(server, tmp_path, monkeypatch):
    """vertexai=auto follows GOOGLE_GENAI_USE_VERTEXAI, and then GOOGLE_VERTEX_BASE_URL is the endpoint."""
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9")  # would refuse the connection
    gen = image_generator(tmp_path, vertexai="auto")
    assert gen.generate(PROMPT, None).data == PNG and gen.options()["api"] == "vertex"
    assert server.calls("content") == ["/v1beta1/publishers/google/models/gemini-2.5-flash-image:generateContent"]


def test_the_last_non_thought_image_is_the_answer(server, script, tmp_path, monkeypatch):
    final = fx.png(width=30, height=30)
    response = {"candidates": [{"finishReason": "STOP", "content": {"role": "model", "parts": [
        {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(PNG).decode()}, "thought": True},
        {"text": "Drafted, now the final page."},
        {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(final).decode()}}]}}]}
    monkeypatch.setattr("tests.loopback.google_media_server._content_response", lambda model, spec: response)
    assert image_generator(tmp_path).generate(PROMPT, None).data == final


# What Gemini answers instead of an image, and the failure kind each must become.
REFUSALS = [
    pytest.param({"block_reason": "PROHIBITED_CONTENT"}, "blocked_prompt", id="prompt-blocked"),
    pytest.param({"finish_reason": "IMAGE_SAFETY"}, "image_safety", id="image-safety"),
    pytest.param({"finish_reason": "PROHIBITED_CONTENT"}, "prohibited_content", id="prohibited-content"),
    pytest.param({"finish_reason": "SAFETY", "text": "I can't draw that."}, "safety", id="safety"),
    pytest.param({"text": "Here is the solution: 18."}, "no_image", id="text-only"),
    pytest.param({"finish_reason": "NO_IMAGE"}, "no_image", id="no-image"),
    pytest.param({"status": 400, "message": "The prompt could not be submitted: it violates our usage guidelines."},
                 "content_policy", id="400-usage-guidelines"),
]


@pytest.mark.parametrize("spec, kind", REFUSALS)
def test_refusals_are_named_counted_failures(server, script, tmp_path, spec, kind):
    script.spec = spec
    with pytest.raises(GenerationFailure) as caught:
        image_generator(tmp_path).generate(PROMPT, None)
    assert caught.value.kind == kind and caught.value.remember
    assert CANARY not in str(caught.value)


# Transport and status faults: (inject kwargs or spec, error class, kind).
FAULTS = [
    pytest.param({"inject": {"status": 429, "headers": {"Retry-After": "3"}}}, TransientJudgeError, "rate_limited",
                 id="429"),
    pytest.param({"inject": {"status": 503}}, TransientJudgeError, "http_503", id="503"),
    pytest.param({"inject": {"status": 500}}, TransientJudgeError, "http_500", id="500"),
    pytest.param({"inject": {"drop": True}}, TransientJudgeError, "connection", id="dropped"),
    pytest.param({"inject": {"garbage": True}}, TransientJudgeError, "bad_response", id="html-200"),
    pytest.param({"spec": {"image": PNG, "cut": 60}}, TransientJudgeError, "connection", id="body-cut-short"),
    pytest.param({"inject": {"status": 403}}, FatalJudgeError, "http_403", id="403"),
    pytest.param({"inject": {"status": 404}}, FatalJudgeError, "http_404", id="404"),
]


@pytest.mark.parametrize("fault, error, kind", FAULTS)
def test_faults_map_to_the_error_tree(server, script, tmp_path, fault, error, kind):
    if "inject" in fault:
        server.inject(**fault["inject"])
    else:
        script.spec = fault["spec"]
    with pytest.raises(error) as caught:
        image_generator(tmp_path).generate(PROMPT, None)
    assert caught.value.kind == kind
    if kind == "rate_limited":
        assert caught.value.retry_after == 3.0


# ----------------------------------------------------------------------- Imagen

def test_imagen_on_vertex_express_mode(server, script, tmp_path):
    gen = image_generator(tmp_path, "imagen-4.0-generate-001", aspect_ratio="16:9", seed=5, negative_prompt="blur")
    assert gen.generate(PROMPT, None).data == PNG
    [request] = server.requests
    assert request.path == "/v1beta1/publishers/google/models/imagen-4.0-generate-001:predict"
    assert request.headers["x-goog-api-key"] == CANARY
    assert request.body["instances"] == [{"prompt": PROMPT}]
    assert request.body["parameters"] == {"sampleCount": 1, "aspectRatio": "16:9", "seed": 5, "negativePrompt": "blur",
                                          "includeRaiReason": True, "outputOptions": {"mimeType": "image/png"},
                                          "addWatermark": False}
    assert gen.options()["api"] == "vertex"


@pytest.mark.parametrize("spec", [{"rai_reason": "Your current safety filter threshold filtered out the image."},
                                  {}], ids=["with-reason", "silently-empty"])
def test_imagen_filtered_images_are_counted(server, script, tmp_path, spec):
    script.spec = spec
    with pytest.raises(GenerationFailure) as caught:
        image_generator(tmp_path, "imagen-3.0-generate-002").generate(PROMPT, None)
    assert caught.value.kind == "rai_filtered"


# ----------------------------------------------------------------------- Veo

def veo(tmp_path, **options):
    config = settings(tmp_path, "veo-3.0-generate-001")
    return VeoGenerator(config, options), job_for(tmp_path, config)


def test_veo_starts_once_polls_until_done_and_reads_the_bytes(server, script, tmp_path):
    script.spec = {"video": MP4, "polls": 3}
    gen, job = veo(tmp_path, resolution="720p", aspect_ratio="9:16", seed=11, negative_prompt="faces")
    media = gen.generate(PROMPT, job)
    assert media.data == MP4 and media.mime_type == "video/mp4"
    [create] = [r for r in server.requests if r.path.endswith(":predictLongRunning")]
    assert create.path == "/v1beta1/publishers/google/models/veo-3.0-generate-001:predictLongRunning"
    assert create.body["parameters"] == {"sampleCount": 1, "durationSeconds": 8, "generateAudio": False,
                                         "resolution": "720p", "aspectRatio": "9:16", "seed": 11,
                                         "negativePrompt": "faces"}
    [name] = server.operation_names()
    assert job.id == name and MediaStore(str(tmp_path / "media")).job(job.key) == name
    assert server.fetches(name) == 4  # three "not done" answers, then the video
    polls = [r for r in server.requests if r.path.endswith(":fetchPredictOperation")]
    assert {r.body["operationName"] for r in polls} == {name}


def test_a_poll_fault_keeps_the_job_and_the_next_attempt_polls_it(server, script, tmp_path):
    script.spec = {"video": MP4, "polls": 1}
    server.inject_poll(503, headers={"Retry-After": "0"})
    gen, job = veo(tmp_path)
    with pytest.raises(TransientJudgeError) as caught:
        gen.generate(PROMPT, job)
    assert caught.value.kind == "http_503" and caught.value.retry_after == 0
    assert job.id is not None  # still recorded
    assert gen.generate(PROMPT, job).data == MP4
    assert len(server.calls("veo")) == 1


def test_a_create_fault_records_no_job(server, tmp_path):
    server.inject(429)
    gen, job = veo(tmp_path)
    with pytest.raises(TransientJudgeError):
        gen.generate(PROMPT, job)
    assert job.id is None and server.operation_names() == []


# Finished operations without a usable video: (spec, error class, kind, job kept?).
OPERATION_ENDS = [
    pytest.param({"error": {"code": 3, "message": "The prompt violates Vertex AI's usage guidelines."}},
                 GenerationFailure, "content_policy", False, id="usage-guidelines"),
    pytest.param({"error": {"code": 9, "message": "Video generation failed."}}, GenerationFailure, "job_failed",
                 False, id="failed-precondition"),
    pytest.param({"error": {"code": 13, "message": "Internal error encountered."}}, TransientJudgeError,
                 "job_internal", False, id="internal"),
    pytest.param({"rai_reason": "Veo could not generate videos because the input violates the guidelines."},
                 GenerationFailure, "rai_filtered", False, id="rai-filtered"),
    pytest.param({"video": MP4, "cut": 100}, TransientJudgeError, "connection", True, id="fetch-cut-short"),
    pytest.param({"gcs_only": True}, GenerationFailure, "bad_response", False, id="gcs-uri-only"),
]


@pytest.mark.parametrize("spec, error, kind, kept", OPERATION_ENDS)
def test_how_finished_operations_end(server, script, tmp_path, spec, error, kind, kept):
    script.spec = {"polls": 1, **spec}
    gen, job = veo(tmp_path)
    with pytest.raises(error) as caught:
        gen.generate(PROMPT, job)
    assert caught.value.kind == kind
    assert (MediaStore(str(tmp_path / "media")).job(job.key) is not None) == kept


def test_a_job_past_poll_timeout_stays_recorded(server, script, tmp_path):
    script.spec = {"video": MP4, "polls": 10_000}
    config = settings(tmp_path, "veo-3.0-generate-001", poll_interval=0.01, poll_timeout=0.2)
    gen = VeoGenerator(config, {})
    job = Job(MediaStore(config.media_dir), "t" * 64, "test", config)
    with pytest.raises(GenerationFailure) as caught:
        gen.generate(PROMPT, job)
    assert caught.value.kind == "timeout" and not caught.value.remember
    assert MediaStore(config.media_dir).job(job.key) == server.operation_names()[0]


def test_an_expired_operation_is_forgotten_so_a_new_one_starts(server, script, tmp_path):
    script.spec = {"video": MP4, "polls": 0}
    gen, job = veo(tmp_path)
    job.started(f"{PROJECT}/publishers/google/models/veo-3.0-generate-001/operations/expired")
    with pytest.raises(TransientJudgeError) as caught:
        gen.generate(PROMPT, job)
    assert caught.value.kind == "job_gone" and job.id is None
    assert gen.generate(PROMPT, job).data == MP4


def test_veo_with_project_location_and_adc(server, script, tmp_path, monkeypatch):
    """The non-express Vertex AI path: a bearer token from ADC, project and location in the URL."""
    script.spec = {"video": MP4, "polls": 1}
    monkeypatch.delenv("GEMINI_API_KEY")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "my-project")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", server.adc_file(str(tmp_path / "adc.json")))
    gen, job = veo(tmp_path)
    assert gen.generate(PROMPT, job).data == MP4
    [create] = [r for r in server.requests if r.path.endswith(":predictLongRunning")]
    assert create.path == ("/v1beta1/projects/my-project/locations/us-central1/publishers/google/models/"
                           "veo-3.0-generate-001:predictLongRunning")
    assert create.headers["authorization"] == f"Bearer {ACCESS_TOKEN}" and "x-goog-api-key" not in create.headers


# ----------------------------------------------------------------------- credentials and settings

def test_veo_without_any_credentials_says_what_to_set(tmp_path, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    with pytest.raises(ConfigError) as caught:
        VeoGenerator(settings(tmp_path, "veo-3.0-generate-001"), {})
    assert "Vertex AI" in str(caught.value) and "GOOGLE_CLOUD_PROJECT" in str(caught.value)


def test_vertex_project_without_adc_fails_before_any_call(tmp_path, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "my-project")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    with pytest.raises(ConfigError) as caught:
        image_generator(tmp_path, "imagen-4.0-generate-001")
    assert "application default credentials" in str(caught.value)


def test_gemini_api_without_a_key_names_the_variables(tmp_path, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY")
    with pytest.raises(ConfigError) as caught:
        image_generator(tmp_path)
    assert "GEMINI_API_KEY" in str(caught.value)


@pytest.mark.parametrize("model, options, words", [
    ("imagen-4.0-generate-001", {"vertexai": False}, "Imagen runs only on Vertex AI"),
    ("gemini-2.5-flash-image", {"negative_prompt": "x"}, r"imagen-\* models only"),
    ("imagen-4.0-generate-001", {"with_text": True}, "Gemini image models only"),
])
def test_impossible_combinations_are_refused(tmp_path, model, options, words):
    with pytest.raises(ConfigError, match=words):
        image_generator(tmp_path, model, **options)


def test_model_args_reach_the_generator_through_the_lm_class(server, tmp_path):
    from lm_eval_mathjudge.generators.gemini_image import GeminiImageLM

    with pytest.raises(ConfigError, match="vertexai"):
        GeminiImageLM(model="gemini-2.5-flash-image", media_dir=str(tmp_path), vertexai="maybe")
    lm = GeminiImageLM(model="imagen-4.0-generate-001", media_dir=str(tmp_path), seed="9", aspect_ratio="4:3")
    assert lm.provenance()["options"] == {"api": "vertex", "number_of_images": 1, "seed": 9, "aspect_ratio": "4:3"}


def test_veo_refuses_the_gemini_api(tmp_path):
    with pytest.raises(ConfigError, match="Veo runs only on Vertex AI"):
        VeoGenerator(settings(tmp_path, "veo-3.0-generate-001"), {"vertexai": False})


# ----------------------------------------------------------------------- through the lm-eval class



def test_an_image_cut_short_in_the_payload_is_retried_and_never_stored(server, script, tmp_path, monkeypatch):
    answers = iter([{"image": PNG[:-20]}, {"image": PNG}])
    server.media_responder = lambda kind, model, body: next(answers)
    monkeypatch.setattr("lm_eval_mathjudge.generators.base.RetryPolicy",
                        functools.partial(RetryPolicy, base_delay=0.01))
    from lm_eval_mathjudge.generators.gemini_image import GeminiImageLM

    lm = GeminiImageLM(model="gemini-2.5-flash-image", media_dir=str(tmp_path / "media"), max_retries=2)
    [path] = lm.generate_until([Req("How many eggs are left?")], disable_tqdm=True)
    assert open(path, "rb").read() == PNG and len(server.calls("content")) == 2
    assert sorted(p.name for p in (tmp_path / "media").iterdir() if p.suffix == ".png") == [os.path.basename(path)]


def test_a_video_cut_short_in_a_finished_operation_is_never_stored_nor_paid_again(server, script, tmp_path,
                                                                                  monkeypatch):
    """The same operation would answer the same damaged bytes: the run stops, the job stays recorded."""
    script.spec = {"video": MP4[:-100], "polls": 0}
    monkeypatch.setattr("lm_eval_mathjudge.generators.base.RetryPolicy",
                        functools.partial(RetryPolicy, base_delay=0.01))
    from lm_eval_mathjudge.generators.veo import VeoLM

    lm = VeoLM(model="veo-3.0-generate-001", media_dir=str(tmp_path / "media"), max_retries=1, poll_interval=0)
    with pytest.raises(GenerationRunError, match="truncated_media"):
        lm.generate_until([Req("How many eggs are left?")], disable_tqdm=True)
    [name] = server.operation_names()
    assert len(server.calls("veo")) == 1 and server.fetches(name) == 2  # polled again, not started again
    assert not [p for p in (tmp_path / "media").iterdir() if p.suffix == ".mp4"]
    assert MediaStore(str(tmp_path / "media")).counts()["jobs"] == 1
