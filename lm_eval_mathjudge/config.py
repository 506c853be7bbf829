"""Judge settings: one frozen dataclass, resolved from four layers.

Precedence, lowest to highest (README, "Settings"):

1. built-in defaults of the judge (``JUDGE_DEFAULTS``);
2. the task YAML's ``mathjudge.settings`` block;
3. ``MATHJUDGE_<NAME>`` environment variables;
4. ``judge_<name>`` keys of ``--metadata`` (or ``--model_args``, which lm-eval
   merges into metadata; ``--metadata`` wins there).

Within layers 3 and 4 a judge-scoped name (``MATHJUDGE_VLM_MODEL``,
``vlm_judge_model``; scopes ``gpt4em`` and ``vlm``) beats the generic one, so
one run can give the two judges different backends.

API keys are deliberately not settings: lm-eval writes metadata to disk, so
keys come from the SDKs' own environment variables only, and a metadata key
that looks like a credential is rejected before anything runs.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from dataclasses import dataclass, fields
from typing import Any, Mapping

from .errors import ConfigError

log = logging.getLogger(__name__)

# The pinned default judges, named in this one place.
DEFAULT_EXACT_MATCH_MODEL = "gpt-4-turbo-2024-04-09"  # Orca-Math's judge was GPT-4-Turbo
DEFAULT_VLM_MODEL = "gemini-2.5-pro"  # the VLM-as-judge protocol's judge
DEFAULT_OPENAI_VISION_MODEL = "gpt-4o-2024-08-06"  # the VLM judge on an OpenAI-compatible backend

BACKENDS = ("openai", "azure", "local", "gemini")
ENV_PREFIX = "MATHJUDGE_"
SCOPES = {"exact_match": "gpt4em", "vlm": "vlm"}  # judge -> prefix of its own settings
OTHER_ENV = ("MATHJUDGE_DATA_DIR", "MATHJUDGE_NO_AUTOLOAD")  # read elsewhere
MAX_RETRIES_LIMIT = 20
META_PREFIX = "judge_"
_SECRET_HINTS = ("key", "token", "secret", "password", "credential")


@dataclass(frozen=True)
class JudgeSettings:
    backend: str = "openai"
    model: str = DEFAULT_EXACT_MATCH_MODEL
    base_url: str | None = None  # None: the SDK's own variable (OPENAI_BASE_URL, ...)
    temperature: float = 0.0
    max_tokens: int = 1024  # room for reasoning judges; the contract itself is ~60 tokens
    concurrency: int = 16  # judge calls in flight at once
    rpm: float = 0.0  # requests per minute across all threads; 0 = unlimited
    timeout: float = 120.0  # seconds per HTTP attempt
    max_retries: int = 6  # retries after the first attempt, transient errors only
    cache: bool = True
    cache_dir: str | None = None  # None: the user cache directory
    preflight: bool = True  # one free call (model lookup) before generation checks endpoint, key, model
    thinking_budget: int | None = None  # Gemini thinking tokens (-1 dynamic); None: the model's default
    reasoning_effort: str | None = None  # OpenAI reasoning models (o-series, GPT-5): minimal/low/medium/high

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ConfigError(f"judge backend {self.backend!r} is unknown; use one of {', '.join(BACKENDS)}")
        if self.concurrency < 1:
            raise ConfigError("judge concurrency must be at least 1")
        if self.max_retries < 0 or self.max_tokens < 1 or self.timeout <= 0 or self.rpm < 0:
            raise ConfigError("judge max_retries, max_tokens, timeout and rpm must be positive")
        if self.max_retries > MAX_RETRIES_LIMIT:
            raise ConfigError(f"judge max_retries={self.max_retries} is more than {MAX_RETRIES_LIMIT}: "
                              "a judge that is down for that long needs a rerun, not more waiting")

    def resolved_cache_dir(self) -> str:
        return self.cache_dir or default_cache_dir()

    def public(self) -> dict[str, Any]:
        """What goes into results files: every setting (none of them is a secret)."""
        return dataclasses.asdict(self)


_FIELDS = {f.name: f for f in fields(JudgeSettings)}

JUDGE_DEFAULTS: dict[str, dict[str, Any]] = {
    "exact_match": {"backend": "openai"},
    "vlm": {"backend": "gemini", "max_tokens": 8192},  # Gemini 2.5 thinks within max_output_tokens
}

# Default model for (judge, backend) when no layer names one: switching backend switches model.
DEFAULT_MODELS: dict[tuple[str, str], str] = {
    ("exact_match", "openai"): DEFAULT_EXACT_MATCH_MODEL,
    ("exact_match", "azure"): DEFAULT_EXACT_MATCH_MODEL,
    ("exact_match", "gemini"): DEFAULT_VLM_MODEL,
    ("exact_match", "local"): "math-verify",
    ("vlm", "gemini"): DEFAULT_VLM_MODEL,
    ("vlm", "openai"): DEFAULT_OPENAI_VISION_MODEL,
    ("vlm", "azure"): DEFAULT_OPENAI_VISION_MODEL,
}


def resolve_settings(judge: str, yaml_settings: Mapping[str, Any] | None,
                     metadata: Mapping[str, Any] | None,
                     environ: Mapping[str, str] | None = None) -> JudgeSettings:
    """Merge the four layers into a validated JudgeSettings."""
    environ = os.environ if environ is None else environ
    layers = [JUDGE_DEFAULTS[judge], _check_names(dict(yaml_settings or {}), "the task YAML's mathjudge.settings"),
              _from_env(environ, judge), _from_metadata(metadata or {}, judge)]
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(layer)
    backend = str(merged["backend"])
    if (judge, backend) not in DEFAULT_MODELS and backend in BACKENDS:
        raise ConfigError(f"the {judge} judge cannot run on the {backend} backend (the local judge only "
                          "speaks the exact-match contract); choose gemini, openai or azure")
    if "model" not in merged or backend == "local":  # the local judge has no model to choose
        merged["model"] = DEFAULT_MODELS.get((judge, backend), DEFAULT_EXACT_MATCH_MODEL)
    return JudgeSettings(**{k: _coerce(k, v) for k, v in merged.items()})


def _env_prefixes(judge: str) -> list[str]:
    return [ENV_PREFIX, f"{ENV_PREFIX}{SCOPES[judge].upper()}_"]  # generic first: scoped wins


def _from_env(environ: Mapping[str, str], judge: str) -> dict[str, Any]:
    every = [p for j in SCOPES for p in _env_prefixes(j)]
    known = {p + name.upper() for p in every for name in _FIELDS} | set(OTHER_ENV)
    for var in sorted(v for v in environ if v.startswith(ENV_PREFIX) and v not in known):
        log.warning("ignoring unknown environment variable %s (judge settings are MATHJUDGE_<NAME> "
                    "or MATHJUDGE_<GPT4EM|VLM>_<NAME> with NAME one of %s)", var, ", ".join(_FIELDS).upper())
    return {name: environ[p + name.upper()] for p in _env_prefixes(judge) for name in _FIELDS
            if environ.get(p + name.upper(), "") != ""}


def _from_metadata(metadata: Mapping[str, Any], judge: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for prefix in [META_PREFIX] + [f"{scope}_{META_PREFIX}" for scope in SCOPES.values()]:
        values = {k[len(prefix):]: v for k, v in metadata.items() if k.startswith(prefix)}
        _check_names(values, "--metadata", prefix=prefix)  # every judge's keys, to catch typos early
        if prefix in (META_PREFIX, f"{SCOPES[judge]}_{META_PREFIX}"):
            found.update(values)  # generic first, then this judge's own
    return found


def _check_names(values: dict[str, Any], where: str, prefix: str = "") -> dict[str, Any]:
    for name in values:
        if name in _FIELDS:  # known settings are never secrets (max_tokens contains "token")
            continue
        if any(hint in name.lower() for hint in _SECRET_HINTS):
            raise ConfigError(
                f"{where} sets {prefix}{name}: credentials are never read from metadata or YAML, "
                "because lm-eval writes both to the results file. Put the key in the provider's "
                "environment variable (OPENAI_API_KEY, GEMINI_API_KEY, ...) and remove it from the command line.")
        if name not in _FIELDS:
            raise ConfigError(f"{where} sets unknown judge setting {prefix}{name}; known: "
                              + ", ".join(prefix + f for f in _FIELDS))
    return values


def _coerce(name: str, value: Any) -> Any:
    kind = _FIELDS[name].type
    if value is None and "None" not in kind:  # e.g. a YAML key left empty
        raise ConfigError(f"judge setting {name} has no value; give a {kind} or remove the key")
    try:
        if value is None or kind in ("str | None", "str"):
            return None if value is None else str(value)
        if kind == "bool":
            return _to_bool(value)
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"judge setting {name}={value!r} is not a valid {kind}") from exc
    return value


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(value)


def default_cache_dir() -> str:
    """MATHJUDGE_CACHE_DIR is read through the settings; this is the fallback."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
    elif sys.platform == "darwin":
        base = os.path.expanduser("~/Library/Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "lm_eval_mathjudge")
