"""``mathjudge-openai-image``: the OpenAI Images API (``gpt-image-1`` and later) through the official SDK.

One ``client.images.generate`` call per prompt, image returned inline as
``b64_json`` (the GPT Image models' only output). The k samples of a prompt
(``repeats: k``) are asked for with ``n``: up to 10 images a call, except
``dall-e-3``, which makes one (``n=1`` only). Keys and endpoint come from
the SDK's own variables, ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``; the SDK's
retries are off (``retry.py`` is the one retry layer). The helpers at the
bottom map SDK errors to the project's error kinds and are shared with
``sora.py``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Callable, TypeVar

import openai

from ..backends import wire
from ..backends._http import header_retry_after
from ..backends.openai.chat import server_message
from ..calls.retry import transient_status
from ..core.errors import ConfigError, FatalJudgeError, GenerationFailure, JudgeCallError, TransientJudgeError
from ..core.redact import redact
from ._bounds import bounds, media_bound
from .base import GeneratedMedia, GeneratorLM, GeneratorSettings, Job

T = TypeVar("T")

FORMATS = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}
# Defaults chosen for a page of written working: portrait, and a quality that keeps small text legible.
IMAGE_DEFAULTS = {"size": "1024x1536", "quality": "medium", "output_format": "png", "background": "opaque",
                  "moderation": "auto"}
# 400 codes that mean "this prompt was refused by the provider's safety system", not "bad request".
REFUSAL_CODES = ("moderation_blocked", "content_policy_violation", "content_filter", "safety_violation")
MAX_N = 10  # images per call the Images API allows (dall-e-3: 1)


def max_images(model: str) -> int:
    return 1 if model.startswith("dall-e-3") else MAX_N


class OpenAIImageGenerator:
    kind = "image"

    def __init__(self, settings: GeneratorSettings, options: dict[str, Any]):
        self._model = settings.model
        self._options = {**IMAGE_DEFAULTS, **options}
        if self._options["output_format"] not in FORMATS:
            raise ConfigError(f"output_format={self._options['output_format']!r}: use one of {', '.join(FORMATS)}")
        self._client = openai_client(settings)
        self.max_outputs = max_images(settings.model)

    def options(self) -> dict[str, Any]:
        return dict(self._options)

    def generate(self, prompt: str, job: Job) -> GeneratedMedia:
        return self.generate_many(prompt, 1, job)[0]

    def generate_many(self, prompt: str, count: int, job: Job) -> list[GeneratedMedia]:
        response = sdk_call(lambda: self._client.images.generate(model=self._model, prompt=prompt, n=count,
                                                                 **self._options), "image generation")
        data = getattr(response, "data", None)
        if not data:
            raise TransientJudgeError("the Images API answered without an image", kind="bad_response")
        if not all(item.b64_json for item in data):
            raise FatalJudgeError(f"{self._model} returned no b64_json image (a URL-only model?); use a GPT Image "
                                  "model such as gpt-image-1", kind="no_b64_json")
        try:
            raws = [base64.b64decode(item.b64_json, validate=True) for item in data]
        except (binascii.Error, ValueError):
            raise TransientJudgeError("the Images API returned invalid base64", kind="bad_response") from None
        return [GeneratedMedia(raw, FORMATS[self._options["output_format"]]) for raw in raws]

    def close(self) -> None:
        self._client.close()


class OpenAIImageLM(GeneratorLM):
    ADAPTER = "mathjudge-openai-image"
    KIND = "image"
    OPTIONS = {name: str for name in IMAGE_DEFAULTS} | {"output_compression": int}
    CREDENTIALS = "openai"  # settings.credentials.SERVICES

    def build(self, settings: GeneratorSettings, options: dict[str, Any]) -> OpenAIImageGenerator:
        return OpenAIImageGenerator(settings, options)


# ---------------------------------------------------------------------- shared with sora.py
def openai_client(settings: GeneratorSettings) -> openai.OpenAI:
    http = wire.openai_http_client(bounds(settings, "OPENAI_BASE_URL"))
    try:
        return openai.OpenAI(max_retries=0, timeout=settings.timeout, http_client=http)
    except openai.OpenAIError as exc:  # e.g. no key
        http.close()
        raise ConfigError(redact(f"cannot build the OpenAI client: {exc}")) from None


def sdk_call(fn: Callable[[], T], what: str) -> T:
    """Run one SDK call; its exceptions become transient / fatal / refused (``translate``)."""
    try:
        return fn()
    except JudgeCallError as exc:  # a network bound (backends/wire), as the SDK passed it on
        raise media_bound(exc, what) from None
    except (openai.OpenAIError, ValueError) as exc:
        raise translate(exc, what) from None


def translate(exc: Exception, what: str) -> Exception:
    bound = wire.carried(exc)  # openai 1.x wraps a network bound in APIConnectionError
    if bound is not None:
        return media_bound(bound, what)
    if isinstance(exc, openai.APIStatusError):
        return status_error(exc, what)
    if isinstance(exc, openai.APITimeoutError):
        return TransientJudgeError(f"{what} timed out", kind="timeout")
    if isinstance(exc, openai.APIConnectionError):  # includes a body cut short mid-download
        return TransientJudgeError(redact(f"{what}: connection failed ({exc.__cause__ or exc})"), kind="connection")
    # a 200 whose body is not the expected JSON, or another SDK error
    return TransientJudgeError(redact(f"{what}: malformed response ({exc})"), kind="bad_response")


def status_error(exc: openai.APIStatusError, what: str) -> Exception:
    status = exc.status_code
    message = redact(f"{what} returned HTTP {status}: {server_message(exc)}")
    if transient_status(status):
        retry_after = header_retry_after(exc.response.headers)
        kind = "rate_limited" if status == 429 else f"http_{status}"
        return TransientJudgeError(message, kind=kind, status=status, retry_after=retry_after)
    if status == 400 and refused(str(getattr(exc, "code", "") or ""), message):
        return GenerationFailure(f"{message} (the provider's safety system refused this prompt)",
                                 kind="content_policy")
    hint = {401: "check OPENAI_API_KEY", 403: "the key may lack access to this model",
            404: "check the model name and OPENAI_BASE_URL"}.get(status, "check the model_args options")
    return FatalJudgeError(f"{message} ({hint}; not retried)", kind=f"http_{status}", status=status)


def refused(code: str, message: str) -> bool:
    text = f"{code} {message}".lower()
    return any(c in text for c in REFUSAL_CODES) or "safety system" in text
