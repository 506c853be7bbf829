"""A Messages API request built from a judge request, and a Message read as a reply or a refusal.

The online calls and the Message Batches send the same body (``request_body``) and read the
same message (``reply_of``). What a model takes comes from its vendor record: Claude before 4.7
takes a temperature and a thinking budget; later models take neither (``takes_sampling``).

``judge_thinking_budget``: unset sends no ``thinking``; 0 switches it off; -1 is adaptive
thinking (the model decides); N > 0 is extended thinking with ``budget_tokens`` N (at least
1024, below max_tokens, which counts the thinking too), for models before 4.7 only.
"""

from __future__ import annotations

import base64
from typing import Any

from ...core.errors import ConfigError, JudgeRefusal, MediaError
from ...core.types import JudgeRequest, Media, Reply
from ...settings.schema import JudgeSettings
from ...vendors.anthropic import MIN_THINKING_BUDGET, takes_sampling
from .._http import building_request, check_text, message_content

IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")  # what the Messages API takes
MAX_TEMPERATURE = 1.0  # the Messages API's range is 0..1
_DONE = (None, "end_turn", "stop_sequence")


def check_settings(settings: JudgeSettings) -> None:
    """A temperature or thinking budget the API would refuse stops the run before generation, saying what to set."""
    if settings.temperature > MAX_TEMPERATURE and takes_sampling(settings.model):
        raise ConfigError(f"judge_temperature={settings.temperature:g} on the anthropic backend: the Messages API "
                          f"takes 0..{MAX_TEMPERATURE:g}")
    budget = settings.thinking_budget
    if budget is None or budget <= 0:
        return
    where = f"judge_thinking_budget={budget} on the anthropic backend"
    if not takes_sampling(settings.model):
        raise ConfigError(f"{where}: {settings.model} takes no thinking budget (Claude 4.7 and later think "
                          "adaptively); set judge_thinking_budget=-1 (adaptive) or remove it")
    if budget < MIN_THINKING_BUDGET:
        raise ConfigError(f"{where}: Anthropic's extended thinking needs a budget of at least "
                          f"{MIN_THINKING_BUDGET} tokens; raise it, or 0 for no thinking")
    if budget >= settings.max_tokens:
        raise ConfigError(f"{where}: the budget must be below judge_max_tokens ({settings.max_tokens}), which "
                          "counts the thinking too; raise judge_max_tokens")


def thinking(settings: JudgeSettings) -> dict[str, Any] | None:
    budget = settings.thinking_budget
    if budget is None:
        return None
    if budget == 0:
        return {"type": "disabled"}
    return {"type": "adaptive"} if budget == -1 else {"type": "enabled", "budget_tokens": budget}


def request_body(settings: JudgeSettings, request: JudgeRequest) -> dict[str, Any]:
    """The body of one Messages call; a failure here is this sample's, never a judge outage."""
    check_text(request)
    with building_request():
        body: dict[str, Any] = {"model": settings.model, "max_tokens": settings.max_tokens,
                                "messages": [{"role": "user", "content": message_content(request, _image)}]}
    think = thinking(settings)
    if think is not None:
        body["thinking"] = think
    if takes_sampling(settings.model) and (think is None or think["type"] == "disabled"):
        body["temperature"] = settings.temperature  # a thinking Claude takes only its default temperature
    return body


def _image(media: Media) -> dict[str, Any]:
    if media.is_video:
        raise MediaError(f"{media.source}: the anthropic judge backend cannot watch video ({media.mime_type}); "
                         "judge video outputs with judge_backend=gemini")
    if media.mime_type not in IMAGE_TYPES:
        raise MediaError(f"{media.source}: the anthropic judge backend takes JPEG, PNG, GIF and WebP images, "
                         f"not {media.mime_type}")
    try:
        data = base64.b64encode(media.read()).decode("ascii")
    except OSError as exc:
        raise MediaError(f"{media.source}: cannot read it ({exc.strerror or exc})") from None
    return {"type": "image", "source": {"type": "base64", "media_type": media.mime_type, "data": data}}


def reply_of(message: Any, settings: JudgeSettings) -> Reply:
    """A cut-off verdict, a refusal and a reply without text are refusals (this sample's judge failure)."""
    stop = getattr(message, "stop_reason", None)
    if stop == "max_tokens":
        raise JudgeRefusal(f"the judge stopped at max_tokens={settings.max_tokens} before finishing its verdict; "
                           "raise judge_max_tokens (Claude's thinking counts against it)", kind="max_tokens")
    if stop == "refusal":
        raise JudgeRefusal("Claude declined to judge this response (stop reason refusal)", kind="content_filter")
    if stop == "model_context_window_exceeded":
        raise JudgeRefusal("the response is too long for the judge's context window", kind="context_length")
    if stop not in _DONE:
        raise JudgeRefusal(f"the judge stopped for another reason than its verdict (stop reason {stop})",
                           kind=str(stop))
    blocks = getattr(message, "content", None) or []
    text = "".join(getattr(b, "text", "") or "" for b in blocks if getattr(b, "type", None) == "text")
    if not text.strip():
        raise JudgeRefusal("Claude replied without any answer text (thinking only, or empty)", kind="empty_reply")
    model = getattr(message, "model", None)
    return Reply(text=text, usage=usage_of(getattr(message, "usage", None)), finish_reason=stop,
                 model=model if isinstance(model, str) and model else None)


def usage_of(usage: Any) -> dict[str, int]:
    """Anthropic's counts in the package's names: every input token is a prompt token (cache reads and
    writes included, cache reads also as ``cached_tokens``); thinking is inside ``output_tokens``."""
    def count(name: str) -> int:
        value = getattr(usage, name, None)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    if usage is None:
        return {}
    read = count("cache_read_input_tokens")
    prompt = count("input_tokens") + count("cache_creation_input_tokens") + read
    counts = {"prompt_tokens": prompt, "completion_tokens": count("output_tokens")}
    counts["total_tokens"] = counts["prompt_tokens"] + counts["completion_tokens"]
    return {**counts, "cached_tokens": read} if read else counts
