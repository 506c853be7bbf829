"""Loopback (127.0.0.1) fakes of the OpenAI, Gemini and Anthropic HTTP APIs for tests."""

from ._base import RecordedRequest
from .anthropic_server import AnthropicServer
from .gemini_server import GeminiServer
from .openai_server import ChatCompletionsServer

__all__ = ["AnthropicServer", "ChatCompletionsServer", "GeminiServer", "RecordedRequest"]
