"""What one judge token costs: a price table per model, and the user's overrides.

Prices are USD per 1,000,000 tokens, from the providers' public list prices
as they stood on ``PRICES_AS_OF``. They are written down from memory, not
read from the providers: check them against the pricing pages before you rely on a figure,
and override any of them with the ``prices`` setting (``judge_prices``):

    MATHJUDGE_PRICES='{"gpt-4o": {"input": 2.5, "output": 10, "batch_input": 1.25, "batch_output": 5}}'
    MATHJUDGE_PRICES=/path/to/prices.yaml     # the same object, as a .json or .yaml file
    --metadata '{"judge_prices": "/path/to/prices.json"}'   # settings are strings: a path, or JSON text

Billing rules the table encodes:

* ``input``: prompt tokens; ``output``: reply tokens *and* thinking/reasoning tokens
  (OpenAI reasoning models and Gemini 2.5 bill hidden thinking as output).
* ``batch_input`` / ``batch_output``: the OpenAI Batch API and Gemini Batch Mode
  (half the online price for both providers on every model listed here).
* ``cached_input``: prompt tokens the provider served from its prompt cache.
  Judge prompts are mostly distinct, so this matters little; None = no discount known.
* ``long_input`` / ``long_output`` above ``long_threshold`` prompt tokens: Gemini
  2.5 Pro's higher tier (a request whose prompt is above 200k tokens costs more,
  on all of its tokens). Judge prompts are far below it except for long videos.

A model with no row here and no override has no price: its cost is None
("unknown"), never a guess. The local judge (math-verify) costs 0.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, fields
from typing import Any, Mapping

from ..core import jsontext
from ..core.errors import ConfigError
from ..core.jsontext import shown
from ..settings.models import DATED_SNAPSHOT, GEMINI_VERSION

PRICES_AS_OF = "2025-08-15"  # list prices as remembered for this date; check them (module docstring)
BATCH_DISCOUNT = 0.5  # both providers' batch APIs: half the online price (used to fill the table below)
LOCAL_BACKEND = "local"


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
    source: str = f"built-in table ({PRICES_AS_OF})"

    def rates(self, batch: bool, prompt_tokens: int = 0) -> tuple[float, float] | None:
        """(input, output) USD per 1M tokens for one request of ``prompt_tokens``; None if not priced."""
        long = self.long_threshold is not None and self.long_input is not None and prompt_tokens > self.long_threshold
        inp, out = (self.long_input, self.long_output) if long else (self.input, self.output)
        if not batch:
            return inp, out
        if self.batch_input is None or self.batch_output is None:
            return None  # this model's batch price is not known: unknown, never the online price
        return (inp * BATCH_DISCOUNT, out * BATCH_DISCOUNT) if long else (self.batch_input, self.batch_output)


def _row(inp: float, out: float, cached: float | None = None, *, batch: bool = True, **tier: Any) -> Price:
    half = (inp * BATCH_DISCOUNT, out * BATCH_DISCOUNT) if batch else (None, None)
    return Price(inp, out, half[0], half[1], cached, **tier)


# Model id -> price. Ids are lower case without a provider prefix. A dated OpenAI snapshot
# ("gpt-4.1-2025-04-14") falls back to its undated row unless it has its own (gpt-4o-2024-05-13
# cost twice gpt-4o's current price). Previews and other versions are left out on purpose:
# their prices differed; add them with an override.
TABLE: dict[str, Price] = {
    # OpenAI: GPT-4 generation
    "gpt-4-turbo-2024-04-09": _row(10.00, 30.00),  # the exact-match default (Orca-Math's judge)
    "gpt-4-turbo": _row(10.00, 30.00),
    "gpt-4-0125-preview": _row(10.00, 30.00),
    "gpt-4-1106-preview": _row(10.00, 30.00),
    "gpt-4": _row(30.00, 60.00),
    "gpt-4-0613": _row(30.00, 60.00),
    # GPT-4o
    "gpt-4o": _row(2.50, 10.00, 1.25),
    "gpt-4o-2024-08-06": _row(2.50, 10.00, 1.25),  # the VLM judge's default on OpenAI
    "gpt-4o-2024-11-20": _row(2.50, 10.00, 1.25),
    "gpt-4o-2024-05-13": _row(5.00, 15.00),  # the first snapshot: no prompt-cache discount
    "gpt-4o-mini": _row(0.15, 0.60, 0.075),
    # GPT-4.1
    "gpt-4.1": _row(2.00, 8.00, 0.50),
    "gpt-4.1-mini": _row(0.40, 1.60, 0.10),
    "gpt-4.1-nano": _row(0.10, 0.40, 0.025),
    # o-series (reasoning tokens billed as output)
    "o1": _row(15.00, 60.00, 7.50),
    "o3": _row(2.00, 8.00, 0.50),  # after the June 2025 price cut
    "o3-mini": _row(1.10, 4.40, 0.55),
    "o4-mini": _row(1.10, 4.40, 0.275),
    # GPT-5 family (reasoning tokens billed as output); gpt-5-chat-latest is the same price as gpt-5
    "gpt-5": _row(1.25, 10.00, 0.125),
    "gpt-5-mini": _row(0.25, 2.00, 0.025),
    "gpt-5-nano": _row(0.05, 0.40, 0.005),
    "gpt-5-chat-latest": _row(1.25, 10.00, 0.125),
    # Google Gemini 2.5 (thinking tokens billed as output; text/image/video input priced alike)
    "gemini-2.5-pro": _row(1.25, 10.00, 0.31, long_threshold=200_000, long_input=2.50, long_output=15.00),
    "gemini-2.5-flash": _row(0.30, 2.50, 0.075),
    "gemini-2.5-flash-lite": _row(0.10, 0.40, 0.025),
    "gemini-2.0-flash": _row(0.10, 0.40, 0.025),
    "gemini-2.0-flash-lite": _row(0.075, 0.30),
}

LOCAL_PRICE = Price(0.0, 0.0, 0.0, 0.0, 0.0, source="local judge (no API)")

_PREFIX = re.compile(r"^(openai|google|gemini|models|azure)/")  # "openai/gpt-4o", "models/gemini-2.5-pro"
_SNAPSHOT = DATED_SNAPSHOT  # "gpt-4o-2024-08-06": priced as its undated row unless it has its own
_GEMINI_VERSION = GEMINI_VERSION  # "gemini-2.0-flash-001": a stable version of its row
_FIELDS = {f.name for f in fields(Price)} - {"source", "long_threshold", "long_input", "long_output"}
OVERRIDE_EXAMPLE = ('{"my-model": {"input": 1.0, "output": 4.0, "batch_input": 0.5, "batch_output": 2.0, '
                    '"cached_input": 0.25}}')


def normalise(model: str) -> str:
    """The table's spelling of a model id: lower case, no provider prefix."""
    name = model.strip().lower()
    while _PREFIX.match(name):
        name = _PREFIX.sub("", name, count=1)
    return name


def lookup(model: str, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model``: an override first, then its own row, then its undated row; else None."""
    name = normalise(model)
    for table in (overrides or {}, TABLE):
        for candidate in _candidates(name):
            if candidate in table:
                return table[candidate]
    return None


def _candidates(name: str) -> list[str]:
    found = [name]
    if _SNAPSHOT.search(name):
        found.append(_SNAPSHOT.sub("", name))
    match = _GEMINI_VERSION.match(name)
    if match:
        found.append(match.group(1))
    return found


def price_for(settings: Any, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The price of a judge's settings (``backend``, ``model``, ``prices``); None when unknown.

    ``overrides`` (already loaded) saves reading the ``prices`` setting again.
    """
    if settings.backend == LOCAL_BACKEND:
        return LOCAL_PRICE
    if overrides is None:
        overrides = load_overrides(getattr(settings, "prices", None))
    return lookup(settings.model, overrides)


# ---------------------------------------------------------------------- overrides
def load_overrides(value: str | Mapping[str, Any] | None) -> dict[str, Price]:
    """Parse the ``prices`` setting: a JSON object, or the path of a .json / .yaml / .yml file holding one.

    Raises ConfigError saying what to write when the value is not a valid price table.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if isinstance(value, Mapping):
        data, where = value, "judge_prices"
    else:
        data, where = _read(value.strip())
    if not isinstance(data, Mapping) or not data:
        raise ConfigError(f"{where} must be a non-empty object mapping model ids to prices in USD per 1M tokens, "
                          f"e.g. {OVERRIDE_EXAMPLE}")
    return {normalise(str(model)): _price(str(model), entry, where) for model, entry in data.items()}


def _read(text: str) -> tuple[Any, str]:
    if text.startswith("{"):
        try:
            return jsontext.loads(text), "judge_prices"
        except ValueError as exc:
            raise ConfigError(f"judge_prices is not valid JSON ({exc}); give an object such as {OVERRIDE_EXAMPLE}, "
                              "or the path of a .json or .yaml file holding one") from None
    path = os.path.expanduser(text)
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".json", ".yaml", ".yml"):
        raise ConfigError(f"judge_prices={shown(text)} is neither a JSON object nor a .json/.yaml file; give an object "
                          f"such as {OVERRIDE_EXAMPLE}, or a file path ending in .json, .yaml or .yml")
    try:
        with open(path, encoding="utf-8") as fh:
            raw = fh.read()
    except OSError as exc:
        raise ConfigError(f"judge_prices: cannot read {path} ({exc.strerror or exc}); give an existing .json or "
                          ".yaml file, or the JSON object itself") from None
    where = f"judge_prices file {path}"
    try:
        if ext == ".json":
            return jsontext.loads(raw), where
        import yaml  # only when a YAML price file is given

        return yaml.safe_load(raw), where
    except ValueError as exc:  # json.JSONDecodeError and yaml.YAMLError's parse errors
        raise ConfigError(f"{where} cannot be parsed ({exc}); it must hold one object such as "
                          f"{OVERRIDE_EXAMPLE}") from None
    except Exception as exc:  # noqa: BLE001 - yaml.YAMLError is not a ValueError
        raise ConfigError(f"{where} cannot be parsed ({type(exc).__name__}: {str(exc)[:200]}); it must hold one "
                          f"object such as {OVERRIDE_EXAMPLE}") from None


def _price(model: str, entry: Any, where: str) -> Price:
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where}: the price of {shown(model)} must be an object with input and output "
                          f"(USD per 1M tokens), e.g. {OVERRIDE_EXAMPLE}")
    unknown = sorted(set(entry) - _FIELDS)
    if unknown:
        fields_given = ", ".join(map(str, unknown))[:200]
        raise ConfigError(f"{where}: the price of {shown(model)} has unknown field(s) {fields_given}; "
                          f"known: {', '.join(sorted(_FIELDS))} (USD per 1M tokens)")
    missing = [k for k in ("input", "output") if k not in entry]
    if missing:
        raise ConfigError(f"{where}: the price of {shown(model)} lacks {' and '.join(missing)}; give at least input "
                          f"and output in USD per 1M tokens, e.g. {OVERRIDE_EXAMPLE}")
    values = {k: _usd(model, k, v, where) for k, v in entry.items()}
    return Price(**values, source=where)


def _usd(model: str, name: str, value: Any, where: str) -> float | None:
    if value is None and name not in ("input", "output"):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(f"{where}: {model}.{name}={shown(value)} is not a number of USD per 1M tokens")
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"{where}: {model}.{name}={shown(value)} is not a number of USD per 1M tokens") from None
    if not math.isfinite(number) or number < 0:
        raise ConfigError(f"{where}: {model}.{name}={shown(value)} must be a finite amount of USD per 1M tokens, "
                          "0 or more")
    return number
