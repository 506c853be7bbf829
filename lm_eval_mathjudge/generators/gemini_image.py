"""``--model mathjudge-gemini-image``: Gemini image models and Imagen through google-genai.

Two SDK calls, chosen by the model name:

* ``imagen-*``: ``client.models.generate_images``; the k samples of a prompt
  (``repeats: k``) come ``number_of_images`` at a time, up to 4 a call (an image
  removed by the filters is simply missing: the base asks again for it).
  google-genai 3.6 runs it only on Vertex AI, so these models always get a
  Vertex AI client.
* anything else (``gemini-2.5-flash-image``, ``gemini-3-pro-image-preview``, ...):
  ``client.models.generate_content`` with image output; the image is the last
  non-thought ``inline_data`` part. Runs on the Gemini API or on Vertex AI
  (``vertexai=`` or GOOGLE_GENAI_USE_VERTEXAI). One image a call.

Credentials and endpoints are the SDK's variables (see ``_google.py``).
Refusals become the sample's counted failure with a named kind: a blocked
prompt (``blocked_prompt``), a safety finish reason (``image_safety``,
``prohibited_content``, ...), an Imagen image removed by its filters
(``rai_filtered``), a reply without an image (``no_image``).
"""

from __future__ import annotations

from typing import Any

from google.genai import types

from ..backends.gemini.replies import enum_name
from ..core.errors import ConfigError, GenerationFailure
from ..core.redact import redact
from ..settings import credentials
from ..settings.kinds import to_bool
from . import _google
from .base import GeneratedMedia, GeneratorLM, GeneratorSettings

ADAPTER = "mathjudge-gemini-image"
_IMAGE_ONLY = ["IMAGE"]
_TEXT_AND_IMAGE = ["TEXT", "IMAGE"]
MAX_IMAGEN_IMAGES = 4  # number_of_images per generate_images call


def is_imagen(model: str) -> bool:
    return _google.bare_model(model).startswith("imagen")


class GeminiImageLM(GeneratorLM):
    ADAPTER = ADAPTER
    KIND = "image"
    OPTIONS = {"aspect_ratio": str, "image_size": str, "seed": int, "negative_prompt": str,
               "with_text": to_bool, "vertexai": _google.parse_vertex}

    def build(self, settings: GeneratorSettings, options: dict[str, Any]) -> GeminiImageGenerator:
        return GeminiImageGenerator(settings, options)


class GeminiImageGenerator:
    kind = "image"

    def __init__(self, settings: GeneratorSettings, options: dict[str, Any]):
        self._model = settings.model
        self._imagen = is_imagen(settings.model)
        self._vertex = self._resolve_vertex(options.pop("vertexai", None))
        if not self._imagen and "negative_prompt" in options:
            raise ConfigError(f"negative_prompt works with imagen-* models only, not with {settings.model}")
        if self._imagen and "with_text" in options:
            raise ConfigError(f"with_text works with Gemini image models only, not with {settings.model}")
        self._options = options
        self.max_outputs = MAX_IMAGEN_IMAGES if self._imagen else 1  # Gemini image models: one candidate
        self._client, self._close = _google.make_client(ADAPTER, settings, vertex=self._vertex)
        _google.check_vertex_auth(ADAPTER, settings.model, self._client)

    def _resolve_vertex(self, asked: bool | None) -> bool:
        if not self._imagen:
            return _google.vertex_from_env() if asked is None else asked
        if asked is False:
            raise ConfigError(f"model={self._model}: Imagen runs only on Vertex AI (google-genai 3.6 has "
                              "generate_images for Vertex AI clients only); drop vertexai=false and set "
                              f"{credentials.hint('vertex')}")
        return True

    def options(self) -> dict[str, Any]:
        shown = {"api": "vertex" if self._vertex else "gemini", "number_of_images": 1, **self._options}
        if not self._imagen:
            shown["response_modalities"] = _TEXT_AND_IMAGE if self._options.get("with_text") else _IMAGE_ONLY
            shown.pop("with_text", None)
        return shown

    def generate(self, prompt: str, job: Any) -> GeneratedMedia:
        if self._imagen:
            return self._imagen_images(prompt, 1)[0]
        return self._content_image(prompt)

    def generate_many(self, prompt: str, count: int, job: Any) -> list[GeneratedMedia]:
        return self._imagen_images(prompt, count) if self._imagen else [self._content_image(prompt)]

    def close(self) -> None:
        self._close()

    # -- Gemini image models -----------------------------------------------------------
    def _content_image(self, prompt: str) -> GeneratedMedia:
        o = self._options
        image_config = None
        if "aspect_ratio" in o or "image_size" in o:
            image_config = types.ImageConfig(aspect_ratio=o.get("aspect_ratio"), image_size=o.get("image_size"))
        config = types.GenerateContentConfig(
            response_modalities=_TEXT_AND_IMAGE if o.get("with_text") else _IMAGE_ONLY,
            image_config=image_config, seed=o.get("seed"), candidate_count=1)
        response = _google.call(lambda: self._client.models.generate_content(
            model=self._model, contents=prompt, config=config), f"{self._model} generateContent")
        return content_image(response, self._model)

    # -- Imagen ------------------------------------------------------------------------
    def _imagen_images(self, prompt: str, count: int) -> list[GeneratedMedia]:
        o = self._options
        config = types.GenerateImagesConfig(
            number_of_images=count, aspect_ratio=o.get("aspect_ratio"), image_size=o.get("image_size"),
            seed=o.get("seed"), negative_prompt=o.get("negative_prompt"), include_rai_reason=True,
            output_mime_type="image/png",
            # Vertex refuses a seed while the invisible watermark is on.
            add_watermark=False if "seed" in o else None)
        response = _google.call(lambda: self._client.models.generate_images(
            model=self._model, prompt=prompt, config=config), f"{self._model} predict")
        return imagen_images(response, self._model)


def content_image(response: Any, model: str) -> GeneratedMedia:
    """The image of a generateContent response, or the named reason there is none."""
    feedback = getattr(response, "prompt_feedback", None)
    block = enum_name(getattr(feedback, "block_reason", None))
    if block:
        detail = getattr(feedback, "block_reason_message", None)
        raise GenerationFailure(redact(f"{model} blocked the prompt ({block}{': ' + detail if detail else ''})"),
                                kind="blocked_prompt")
    candidates = getattr(response, "candidates", None) or []
    if not candidates:
        raise GenerationFailure(f"{model} returned no candidates", kind="no_image")
    candidate = candidates[0]
    finish = enum_name(candidate.finish_reason)
    parts = getattr(candidate.content, "parts", None) or []
    images = [p.inline_data for p in parts
              if p.inline_data is not None and p.inline_data.data and p.thought is not True
              and str(p.inline_data.mime_type or "").startswith("image/")]
    if images:  # the last one: image models may draft before the final picture
        return GeneratedMedia(images[-1].data, images[-1].mime_type)
    if finish in _google.SAFETY_REASONS:
        raise GenerationFailure(f"{model} withheld the image (finish reason {finish})", kind=finish.lower())
    text = " ".join(p.text for p in parts if p.text and p.thought is not True).strip()
    said = f"; it said: {text[:200]!r}" if text else ""
    raise GenerationFailure(redact(f"{model} replied without an image (finish reason {finish}){said}"),
                            kind="no_image")


def imagen_images(response: Any, model: str) -> list[GeneratedMedia]:
    """The images of a generate_images response (the filtered ones left out), or the RAI reason there are none."""
    generated = [g for g in (getattr(response, "generated_images", None) or [])]
    with_bytes = [g for g in generated if g.image is not None and g.image.image_bytes]
    if with_bytes:
        return [GeneratedMedia(g.image.image_bytes, g.image.mime_type) for g in with_bytes]
    reasons = [g.rai_filtered_reason for g in generated if g.rai_filtered_reason]
    if reasons:
        raise GenerationFailure(redact(f"{model} filtered the image: {'; '.join(reasons)[:500]}"),
                                kind="rai_filtered")
    if any(g.image is not None and g.image.gcs_uri for g in generated):
        raise GenerationFailure(f"{model} returned a Cloud Storage URI instead of image bytes", kind="bad_response",
                                remember=False)
    raise GenerationFailure(f"{model} returned no image (filtered by its responsible-AI filters, no reason given)",
                            kind="rai_filtered")
