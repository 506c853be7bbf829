"""Loopback (127.0.0.1) fakes of the OpenAI and Gemini HTTP APIs for tests."""

from ._base import RecordedRequest
from .gemini_server import GeminiServer
from .openai_server import ChatCompletionsServer

__all__ = ["ChatCompletionsServer", "GeminiServer", "RecordedRequest"]
