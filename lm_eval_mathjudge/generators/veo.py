"""``--model mathjudge-veo``: Veo videos through google-genai's long-running operations.

``client.models.generate_videos`` starts an operation (Vertex AI
``:predictLongRunning``); its name is recorded at once through the job handle,
then ``client.operations.get`` (Vertex AI ``:fetchPredictOperation``) polls it
until it is done. A rerun after a crash polls the recorded operation instead
of starting (and paying for) a new one. The video arrives as bytes in the
operation's response: no Cloud Storage bucket is involved. The k samples of a
prompt (``repeats: k``) are rendered ``number_of_videos`` (wire: ``sampleCount``)
at a time, up to 4 an operation; the operation is recorded under each sample's
key, so a rerun polls it once for all of them.

google-genai 3.6 runs ``generate_videos`` only on Vertex AI, so this adapter
always builds a Vertex AI client (credentials: ``settings.credentials.SERVICES['vertex']``).

Outcomes of a finished operation:

* videos -> returned (the base checks each is a whole MP4 before storing it; a
  video the filters removed is missing, and the base asks again for it);
* ``error`` -> the job is forgotten; rpc codes that mean "busy, try later"
  (RESOURCE_EXHAUSTED, UNAVAILABLE, INTERNAL, DEADLINE_EXCEEDED, ABORTED) are
  transient (a new job is started on retry), a usage-guidelines refusal is
  ``content_policy``, anything else ``job_failed``;
* videos removed by the responsible-AI filters -> ``rai_filtered``.
"""

from __future__ import annotations

from typing import Any

from google.genai import types

from ..core.errors import ConfigError, FatalJudgeError, GenerationFailure, TransientJudgeError
from ..core.redact import redact
from ..settings import credentials
from ..settings.kinds import to_bool
from . import _google
from .base import GeneratedMedia, GeneratorLM, GeneratorSettings, Job

ADAPTER = "mathjudge-veo"
DEFAULT_DURATION = 8  # seconds; Veo 3 renders 4, 6 or 8, Veo 2 5 to 8
# google.rpc.Code values after which the same request may well succeed.
_RETRYABLE_CODES = {4: "DEADLINE_EXCEEDED", 8: "RESOURCE_EXHAUSTED", 10: "ABORTED", 13: "INTERNAL",
                    14: "UNAVAILABLE"}
MAX_VIDEOS = 4  # number_of_videos (sampleCount) per operation


class VeoLM(GeneratorLM):
    ADAPTER = ADAPTER
    KIND = "video"
    OPTIONS = {"duration_seconds": int, "aspect_ratio": str, "resolution": str, "seed": int,
               "negative_prompt": str, "generate_audio": to_bool, "vertexai": _google.parse_vertex}

    def build(self, settings: GeneratorSettings, options: dict[str, Any]) -> VeoGenerator:
        return VeoGenerator(settings, options)


class VeoGenerator:
    kind = "video"
    max_outputs = MAX_VIDEOS

    def __init__(self, settings: GeneratorSettings, options: dict[str, Any]):
        self._model = settings.model
        if options.pop("vertexai", None) is False:
            raise ConfigError(f"model={settings.model}: Veo runs only on Vertex AI (google-genai 3.6 has "
                              "generate_videos for Vertex AI clients only); drop vertexai=false and set "
                              f"{credentials.hint('vertex')}")
        # Audio costs extra and the judge grades the writing: off unless asked for.
        self._options = {"duration_seconds": DEFAULT_DURATION, "generate_audio": False, **options}
        self._client, self._close = _google.make_client(ADAPTER, settings, vertex=True)
        _google.check_vertex_auth(ADAPTER, settings.model, self._client)

    def options(self) -> dict[str, Any]:
        return {"api": "vertex", "number_of_videos": 1, **self._options}

    def close(self) -> None:
        self._close()

    def generate(self, prompt: str, job: Job) -> GeneratedMedia:
        return self.generate_many(prompt, 1, job)[0]

    def generate_many(self, prompt: str, count: int, job: Job) -> list[GeneratedMedia]:
        if job.id is None:
            self._start(prompt, count, job)
        return job.wait(lambda: self._check(job), f"Veo operation {job.id}")

    def _start(self, prompt: str, count: int, job: Job) -> None:
        config = types.GenerateVideosConfig(number_of_videos=count, **self._options)
        operation = _google.call(lambda: self._client.models.generate_videos(
            model=self._model, source=types.GenerateVideosSource(prompt=prompt), config=config),
            f"{self._model} predictLongRunning")
        if not operation.name:
            raise TransientJudgeError(f"{self._model} started a video job without a name", kind="bad_response")
        job.started(operation.name)

    def _check(self, job: Job) -> list[GeneratedMedia] | None:
        try:
            operation = _google.call(lambda: self._client.operations.get(types.GenerateVideosOperation(name=job.id)),
                                     f"polling {job.id}")
        except FatalJudgeError as exc:
            if exc.status != 404:
                raise
            job.forget()  # expired or unknown: only a new job can make this video
            raise TransientJudgeError(f"{exc}; starting a new job", kind="job_gone") from None
        if not operation.done:
            return None
        if operation.error:
            raise _operation_error(operation.error, job)
        return _videos(operation.result or operation.response, self._model, job)


def _operation_error(error: dict, job: Job) -> Exception:
    job.forget()
    code = error.get("code") if isinstance(error.get("code"), int) else None
    message = redact(f"Veo operation {job.id} failed: {error.get('message') or error}"[:600])
    if code in _RETRYABLE_CODES:
        return TransientJudgeError(f"{message} ({_RETRYABLE_CODES[code]}; a new job is started)",
                                   kind=f"job_{_RETRYABLE_CODES[code].lower()}")
    if _google.policy_words(str(error.get("message", ""))):
        return GenerationFailure(message, kind="content_policy")
    return GenerationFailure(message, kind="job_failed")


def _videos(result: Any, model: str, job: Job) -> list[GeneratedMedia]:
    videos = [g.video for g in (getattr(result, "generated_videos", None) or []) if g.video is not None]
    with_bytes = [v for v in videos if v.video_bytes]
    if with_bytes:
        return [GeneratedMedia(v.video_bytes, v.mime_type or "video/mp4") for v in with_bytes]
    job.forget()
    reasons = list(getattr(result, "rai_media_filtered_reasons", None) or [])
    if reasons or getattr(result, "rai_media_filtered_count", None):
        raise GenerationFailure(redact(f"{model} filtered the video: {'; '.join(reasons)[:500] or 'no reason given'}"),
                                kind="rai_filtered")
    if any(v.uri for v in videos):
        raise GenerationFailure(f"{model} returned the video only as {videos[0].uri}, which this adapter does not "
                                "fetch; do not set an output bucket for the model", kind="bad_response", remember=False)
    raise GenerationFailure(f"{model} finished the job without a video", kind="no_video")
