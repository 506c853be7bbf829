"""``mathjudge-sora``: the OpenAI videos API (``sora-2`` and later) through the official SDK.

Per prompt: ``client.videos.create`` (a job, status ``queued``), then
``client.videos.retrieve`` every ``poll_interval`` seconds until ``completed``
or ``failed``, then ``client.videos.download_content`` for the MP4. The job
id is recorded before the first poll, so a rerun after a crash or a
``poll_timeout`` polls the same job instead of paying for a new one; a job the
server no longer knows (404) is forgotten and started again. Keys and endpoint
come from ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``. A job renders one video, so the
k samples of a prompt (``repeats: k``) are k jobs (``max_outputs`` 1).

The SDK marks the videos methods deprecated (OpenAI announced the Sora API's
shutdown for 2026-09-24); the adapter still works wherever the API is served,
for example by a compatible server, and says so in the log instead of a warning per call.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import openai

from ..core.errors import GenerationFailure, JudgeCallError, TransientJudgeError
from ..core.redact import redact
from .base import GeneratedMedia, GeneratorLM, GeneratorSettings, Job
from ._bounds import media_bound
from .openai_image import openai_client, refused, sdk_call, translate

log = logging.getLogger(__name__)

VIDEO_DEFAULTS = {"seconds": "4", "size": "720x1280"}  # the API's own defaults, written out for the key


class SoraGenerator:
    kind = "video"
    max_outputs = 1  # the videos API has no count: one job per sample

    def __init__(self, settings: GeneratorSettings, options: dict[str, Any]):
        # One log line instead of a DeprecationWarning per call (see the module docstring).
        warnings.filterwarnings("ignore", message="The Sora API is scheduled", category=DeprecationWarning)
        log.info("the openai SDK marks the videos API deprecated (shutdown announced for 2026-09-24); "
                 "calling it anyway (OPENAI_BASE_URL may name a compatible server)")
        self._model = settings.model
        self._options = {**VIDEO_DEFAULTS, **{k: str(v) for k, v in options.items()}}
        self._client = openai_client(settings)

    def options(self) -> dict[str, Any]:
        return dict(self._options)

    def generate(self, prompt: str, job: Job) -> GeneratedMedia:
        if job.id is None:
            video = sdk_call(lambda: self._client.videos.create(model=self._model, prompt=prompt, **self._options),
                             "video create")
            job.started(video.id)
        job_id = job.id
        job.wait(lambda: self._finished(job), f"Sora job {job_id}")
        content = sdk_call(lambda: self._client.videos.download_content(job_id), f"download of Sora job {job_id}")
        return GeneratedMedia(content.content, "video/mp4")

    def _finished(self, job: Job) -> Any | None:
        job_id = job.id
        try:
            video = self._client.videos.retrieve(job_id)
        except openai.NotFoundError:  # expired or unknown (another endpoint?): start a new job on retry
            job.forget()
            raise TransientJudgeError(f"Sora job {job_id} is unknown to the server; starting a new one",
                                      kind="job_lost") from None
        except JudgeCallError as exc:  # a network bound (backends/wire)
            raise media_bound(exc, f"status of Sora job {job_id}") from None
        except (openai.OpenAIError, ValueError) as exc:
            raise translate(exc, f"status of Sora job {job_id}") from None
        if video.status == "completed":
            return video
        if video.status == "failed":
            job.forget()
            code = getattr(video.error, "code", "") or ""
            message = redact(f"Sora job {job_id} failed: {code or 'no code'}: "
                             f"{getattr(video.error, 'message', '') or 'no message'}")
            raise GenerationFailure(message, kind="content_policy" if refused(code, message) else "job_failed")
        return None

    def close(self) -> None:
        self._client.close()


class SoraLM(GeneratorLM):
    ADAPTER = "mathjudge-sora"
    KIND = "video"
    OPTIONS = {"seconds": str, "size": str}
    CREDENTIALS = "openai"  # settings.credentials.SERVICES

    def build(self, settings: GeneratorSettings, options: dict[str, Any]) -> SoraGenerator:
        return SoraGenerator(settings, options)
