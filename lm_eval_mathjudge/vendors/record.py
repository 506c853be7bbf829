"""The record of one judge service: what the package knows about it, in one frozen dataclass.

A record is data and small pure functions (no SDK, no network, nothing else of the package):
the settings read its default models, the credential check its variables, the cost estimate
its prices, token rules and thinking, the results its alias rule, the preflight memory its
environment prefixes, and every message that lists the backends reads the records. The code
that speaks to the service is ``backends/<transport>``; the record names it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

BATCH_DISCOUNT = 0.5  # every batch API here (OpenAI Batch, Gemini Batch Mode, Anthropic Message Batches): half price


@dataclass(frozen=True)
class Credentials:
    """What one API needs: any one of ``variables`` set, and how to set it."""
    variables: tuple[str, ...]  # any one, set to something other than ""/0/false, will do; () = the SDK checks
    hint: str  # what to set, in a user's words
    rejected: str = "the credentials"  # what to check when the service refuses them (a 401 or 403)
    keys: tuple[str, ...] = ()  # the variables that hold a secret: named in refusals, scrubbed from every text


@dataclass(frozen=True)
class Endpoint:
    """Where requests go when judge_base_url does not say: the SDK's ``variable``, else ``default``.

    ``rule``: "plain" is exactly that (the URL without a trailing slash); another name is a rule of its
    own in ``backends/endpoints.py`` (the OpenAI SDK's URL form, Azure's path, Gemini's Vertex AI).
    ``hosts``: the vendor's own service, these domains and their subdomains; the list prices hold there
    only (a compatible server elsewhere, such as a local vLLM, bills what its owner says)."""
    variable: str | None = None
    default: str | None = None
    rule: str = "plain"
    hosts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Price:
    """USD per 1M tokens for one model. ``None`` in an optional field: not known (or not offered)."""
    input: float
    output: float
    batch_input: float | None = None
    batch_output: float | None = None
    cached_input: float | None = None
    long_threshold: int | None = None  # prompt tokens above which the long_* prices apply
    long_input: float | None = None
    long_output: float | None = None
    source: str = "built-in table"

    def rates(self, batch: bool, prompt_tokens: int = 0) -> tuple[float, float] | None:
        """(input, output) USD per 1M tokens for one request of ``prompt_tokens``; None if not priced."""
        long = self.long_threshold is not None and self.long_input is not None and prompt_tokens > self.long_threshold
        inp, out = (self.long_input, self.long_output) if long else (self.input, self.output)
        if not batch:
            return inp, out
        if self.batch_input is None or self.batch_output is None:
            return None  # this model's batch price is not known: unknown, never the online price
        return (inp * BATCH_DISCOUNT, out * BATCH_DISCOUNT) if long else (self.batch_input, self.batch_output)


def row(inp: float, out: float, cached: float | None = None, *, batch: bool = True, **tier: Any) -> Price:
    """A price row whose batch rates are half the online ones (``batch=False``: no batch price known)."""
    half = (inp * BATCH_DISCOUNT, out * BATCH_DISCOUNT) if batch else (None, None)
    return Price(inp, out, half[0], half[1], cached, **tier)


@dataclass(frozen=True)
class JudgeDefault:
    """The model and max_tokens a judge gets on this service when the settings name none."""
    model: str
    max_tokens: int


def _never(_: str) -> bool:
    return False


def _no_thinking(_: Any) -> int:
    return 0


def _undated(_: str) -> str | None:
    return None


@dataclass(frozen=True)
class Vendor:
    """One judge backend (``judge_backend=<name>``) and the service behind it."""
    name: str  # the judge_backend value
    title: str  # the service, as messages and docs name it
    transport: str  # module under backends/ whose ``create(settings, judge)`` builds the backend
    batch: str | None = None  # module under backends/ whose ``create(backend)`` gives its batch API; None: none
    sdk: str | None = None  # the module its transport imports (None: no SDK)
    extra: str | None = None  # the pip extra that installs that SDK (None: installed with the package)
    credentials: Credentials | None = None  # None: none needed
    env_prefixes: tuple[str, ...] = ()  # every variable the SDK reads for keys and endpoints starts so
    endpoint: Endpoint | None = None  # None: no endpoint (the local judge)
    judges: Mapping[str, JudgeDefault] = field(default_factory=dict)  # judge -> defaults; a judge absent cannot run
    thinks: Callable[[str], bool] = _never  # models that spend hidden tokens before the verdict
    thinking_room: int = 0  # the max_tokens such a model gets unless judge_max_tokens says
    expected_thinking: Callable[[Any], int] = _no_thinking  # thinking tokens per call (settings -> tokens), estimate
    aliases: Callable[[str], bool | None] | None = None  # a moving name? None: not one of its names; the rule
    #                                                       itself None: the names are the user's own (deployments)
    prices: Mapping[str, Price] = field(default_factory=dict)  # model id (lower case, no prefix) -> price
    prices_as_of: str | None = None  # the date the list prices were read
    undated: Callable[[str], str | None] = _undated  # the row a pinned name shares ("gpt-4o-2024-08-06" -> "gpt-4o")
    model_prefixes: tuple[str, ...] = ()  # provider prefixes seen in model ids ("anthropic/")
    image_tokens: Callable[[int, int, str], int] | None = None  # (width, height, model) -> tokens; None: no images
    video_tokens_per_second: int | None = None  # None: it cannot watch video (refused before sending)
    preflight: str = ""  # the free call made before generation, as the docs name it

    def judges_with(self, judge: str) -> bool:
        return judge in self.judges


def tiles(width: int, height: int, side: int) -> int:
    """Tiles of ``side`` pixels that cover an image."""
    return math.ceil(width / side) * math.ceil(height / side)


DEFAULT_MAX_TOKENS = 1024  # the judges' contracts are ~60 tokens; a model that thinks gets its vendor's room
