"""What one judge token costs: a price table per model, and the user's overrides.

Prices are USD per 1,000,000 tokens, the providers' public list prices, each vendor's rows
in its record (``vendors/<vendor>.py``) with the date they were read (``prices_as_of``; the
OpenAI and Gemini rows were written down from memory). Check them against the pricing pages
before you rely on a figure, and override any of them with the ``prices`` setting (``judge_prices``):

    MATHJUDGE_PRICES='{"gpt-4o": {"input": 2.5, "output": 10, "batch_input": 1.25, "batch_output": 5}}'
    MATHJUDGE_PRICES=/path/to/prices.yaml     # the same object, as a .json or .yaml file
    --metadata '{"judge_prices": "/path/to/prices.json"}'   # settings are strings: a path, or JSON text

Billing rules the table encodes:

* ``input``: prompt tokens; ``output``: reply tokens *and* thinking/reasoning tokens
  (OpenAI reasoning models and Gemini 2.5 bill hidden thinking as output).
* ``batch_input`` / ``batch_output``: the OpenAI Batch API, Gemini Batch Mode and Anthropic's
  Message Batches (half the online price on every model listed here).
* ``cached_input``: prompt tokens the provider served from its prompt cache.
  Judge prompts are mostly distinct, so this matters little; None = no discount known.
* ``long_input`` / ``long_output`` above ``long_threshold`` prompt tokens: Gemini
  2.5 Pro's higher tier above 200k tokens, Claude Haiku 5.5's above 100k (a request
  whose prompt is above it costs more, on all of its tokens). Judge prompts are far
  below them except for long videos.

A model with no row here and no override has no price: its cost is None
("unknown"), never a guess. So has a judge at a custom endpoint (a local vLLM, a
gateway: ``endpoints.custom_endpoint``) unless an override prices it: the table
holds each vendor's own prices, whatever a model is called elsewhere. The local
judge (math-verify) costs 0.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import fields, replace
from typing import Any, Mapping

from .. import vendors
from ..backends.endpoints import custom_endpoint
from ..core import jsontext
from ..core.errors import ConfigError
from ..core.jsontext import shown
from ..vendors.local import PRICE as LOCAL_PRICE  # noqa: F401 - re-exported
from ..vendors.record import BATCH_DISCOUNT, Price  # noqa: F401 - re-exported (the price type, the batch rule)

# The oldest date of any vendor's list prices: every row is at least that fresh (each row's source says its own).
PRICES_AS_OF = min(v.prices_as_of for v in vendors.VENDORS if v.prices_as_of)
LOCAL_BACKEND = vendors.LOCAL.name


def _table() -> dict[str, Price]:
    """Model id -> price, from every vendor record (ids are lower case without a provider prefix)."""
    table: dict[str, Price] = {}
    for vendor in vendors.VENDORS:
        source = f"built-in table ({vendor.name}, {vendor.prices_as_of})"
        table.update({model: replace(price, source=source) for model, price in vendor.prices.items()})
    return table


TABLE: dict[str, Price] = _table()

_PREFIXES = tuple(p for v in vendors.VENDORS for p in v.model_prefixes)  # "openai/gpt-4o", "models/gemini-2.5-pro"
_FIELDS = {f.name for f in fields(Price)} - {"source", "long_threshold", "long_input", "long_output"}
OVERRIDE_EXAMPLE = ('{"my-model": {"input": 1.0, "output": 4.0, "batch_input": 0.5, "batch_output": 2.0, '
                    '"cached_input": 0.25}}')


def normalise(model: str) -> str:
    """The table's spelling of a model id: lower case, no provider prefix."""
    name = model.strip().lower()
    while name.startswith(_PREFIXES):
        name = name.split("/", 1)[1]
    return name


def lookup(model: str, overrides: Mapping[str, Price] | None = None, *, listed: bool = True) -> Price | None:
    """The price of ``model``: an override first, then (``listed``) its own row, then its undated row; else None."""
    name = normalise(model)
    for table in (overrides or {}, TABLE) if listed else (overrides or {},):
        for candidate in _candidates(name):
            if candidate in table:
                return table[candidate]
    return None


def _candidates(name: str) -> list[str]:
    """The name, then the row its vendor prices a pinned name as ("gpt-4o-2024-08-06" -> "gpt-4o")."""
    found = [name]
    for vendor in vendors.VENDORS:
        shared = vendor.undated(name)
        if shared and shared not in found:
            found.append(shared)
    return found


def price_for(settings: Any, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The price of a judge's settings (``backend``, ``model``, ``base_url``, ``prices``); None when unknown.

    At a custom endpoint only an override prices it. ``overrides`` (already loaded) saves reading the
    ``prices`` setting again.
    """
    if settings.backend == LOCAL_BACKEND:
        return LOCAL_PRICE
    if overrides is None:
        overrides = load_overrides(getattr(settings, "prices", None))
    return lookup(settings.model, overrides, listed=custom_endpoint(settings) is None)


def unpriced_because(settings: Any) -> str | None:
    """Why a judge without a price has none, when the model's name is not the reason: its endpoint."""
    url = custom_endpoint(settings)
    if url is None:
        return None
    hosts = ", ".join(vendors.get(settings.backend).endpoint.hosts)
    example = json.dumps({normalise(settings.model): {"input": 0, "output": 0}})
    return (f"served at {url}, not by its vendor ({hosts}), so no list price applies; give its price with "
            f"judge_prices, e.g. {example} for a server of your own")


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
