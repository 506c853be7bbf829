"""Judge settings: one frozen dataclass, resolved from four layers.

Precedence, lowest to highest (README, "Settings"):

1. built-in defaults of the (judge, backend) pair (``DEFAULTS``);
2. the task YAML's ``mathjudge.settings`` block;
3. ``MATHJUDGE_<NAME>`` environment variables;
4. ``judge_<name>`` keys of ``--metadata`` (or ``--model_args``, which lm-eval
   merges into metadata; ``--metadata`` wins there).

Within layers 3 and 4 a judge-scoped name (``MATHJUDGE_VLM_MODEL``,
``vlm_judge_model``; scopes ``gpt4em`` and ``vlm``) beats the generic one, so
one run can give the two judges different backends.

Every value is converted to its field's type and checked (finite, in range,
non-empty) before anything runs; an unknown ``MATHJUDGE_*`` variable or
``judge_*`` key is an error, so a typo never silently falls back to a default.

API keys are deliberately not settings: lm-eval writes metadata and model_args
to disk, so keys come from the SDKs' own environment variables only, and any
metadata key that looks like a credential (or a URL that carries one) is
rejected before anything runs.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import sys
from dataclasses import dataclass, fields
from typing import Any, Mapping
from urllib.parse import parse_qsl, urlsplit

from ..core.errors import ConfigError

# The pinned default judges, named in this one place.
DEFAULT_EXACT_MATCH_MODEL = "gpt-4-turbo-2024-04-09"  # Orca-Math's judge was GPT-4-Turbo
DEFAULT_VLM_MODEL = "gemini-2.5-pro"  # the VLM-as-judge protocol's judge
DEFAULT_OPENAI_VISION_MODEL = "gpt-4o-2024-08-06"  # the VLM judge on an OpenAI-compatible backend
LOCAL_MODEL = "math-verify"

BACKENDS = ("openai", "azure", "local", "gemini")
DEFAULT_BACKEND = {"exact_match": "openai", "vlm": "gemini"}
ENV_PREFIX = "MATHJUDGE_"
SCOPES = {"exact_match": "gpt4em", "vlm": "vlm"}  # judge -> prefix of its own settings
OTHER_ENV = ("MATHJUDGE_DATA_DIR", "MATHJUDGE_NO_AUTOLOAD")  # read elsewhere, not settings
META_PREFIX = "judge_"
# Judge-run options that are not per-judge settings (panel.py, cascade.py, media.py, audit); same layers and names.
RUN_OPTIONS = ("panel", "panel_rule", "panel_min", "cascade", "media_dirs", "audit", "audit_limit")
PANEL_RULES = ("majority", "unanimous")
MAX_PANEL = 9
AUDIT_LIMIT = 10  # adversarial answers per attack family and task in a judge audit (lm_eval_mathjudge.audit)
MAX_AUDIT_LIMIT = 10_000

# Limits: a value outside them is a typo or a unit mix-up, never a useful setting.
MAX_RETRIES_LIMIT = 20
MAX_CONCURRENCY = 1024
MAX_TIMEOUT = 3600.0  # seconds per attempt
MAX_TEMPERATURE = 2.0  # the largest any supported API accepts
MAX_TOKENS_LIMIT = 1_000_000
THINKING_BUDGET_MAX = 32768  # Gemini 2.5 Pro's largest thinking budget; -1 = dynamic, 0 = off
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high")
MODES = ("online", "batch")
BATCH_FALLBACKS = ("online", "fail")
MAX_BATCH_POLL = 3600.0  # seconds between two reads of a batch job's state
MAX_BATCH_HOURS = 48.0
# Reasoning models spend hidden tokens before the verdict; OpenAI advises reserving ~25k.
REASONING_MAX_TOKENS = 25000
GEMINI_THINKING_MAX_TOKENS = 8192  # Gemini 2.5 thinks within max_output_tokens


@dataclass(frozen=True)
class JudgeSettings:
    backend: str = "openai"
    model: str = DEFAULT_EXACT_MATCH_MODEL
    base_url: str | None = None  # None: the SDK's own variable (OPENAI_BASE_URL, ...)
    temperature: float = 0.0
    max_tokens: int = 1024  # the contract itself is ~60 tokens; DEFAULTS adds room for thinking
    concurrency: int = 64  # judge calls in flight at most (the adaptive gate lowers it on 429s)
    rpm: float = 0.0  # requests per minute across all threads; 0 = unlimited
    timeout: float = 120.0  # seconds per HTTP attempt
    max_retries: int = 6  # retries after the first attempt, transient errors only
    cache: bool = True
    cache_dir: str | None = None  # None: the user cache directory
    preflight: bool = True  # one free call (model lookup) before generation checks endpoint, key, model
    thinking_budget: int | None = None  # Gemini thinking tokens (-1 dynamic); None: the model's default
    reasoning_effort: str | None = None  # OpenAI reasoning models (o-series, GPT-5): minimal/low/medium/high
    tpm: float = 0.0  # prompt + completion tokens per minute across all threads; 0 = unlimited
    adaptive: bool = True  # lower the calls in flight on 429s, raise them again on success
    mode: str = "online"  # "batch": the provider's batch API (about half price, slower)
    batch_poll_seconds: float = 30.0  # how often a batch job's state is read
    batch_max_hours: float = 26.0  # stop waiting for a batch job after this (the providers' window is 24 h)
    batch_wait: bool = True  # false: submit the batch and stop; a rerun of the same command collects it
    batch_fallback: str = "online"  # items a batch failed or expired: "online" calls, or "fail" (counted)
    dry_run: bool = False  # print the cost estimate and stop before any judge call
    budget_usd: float | None = None  # refuse to start judging when the estimate is above this
    prices: str | None = None  # a JSON object or a .json/.yaml file overriding the price table

    def __post_init__(self):
        for f in fields(self):
            _check_type(f.name, getattr(self, f.name))
        for problem in _problems(self):
            raise ConfigError(problem)

    def resolved_cache_dir(self) -> str:
        return self.cache_dir or default_cache_dir()

    def public(self) -> dict[str, Any]:
        """What goes into results files: every setting (none of them is a secret)."""
        return dataclasses.asdict(self)


def judge_label(judge: Any) -> str:
    """``backend:model``, the one name of one judge (samples, results, reports, cache rows, costs).

    ``judge``: settings, or a mapping with ``backend`` and ``model`` (what a results file records)."""
    get = judge.get if isinstance(judge, Mapping) else (lambda name: getattr(judge, name, None))
    return f"{get('backend')}:{get('model')}"


def pipeline_label(judge: Mapping[str, Any]) -> str:
    """The whole judging pipeline of a task, from what its results record (``metadata.judge``).

    ``openai:gpt-4o``; ``cascade(local:math-verify → openai:gpt-4-turbo-2024-04-09)``;
    ``panel(majority: a, b, c)``, with ``, min N`` when the quorum is not a strict majority. Two
    runs with different labels were scored by different measurements.
    """
    panel, cascade = judge.get("panel"), judge.get("cascade")
    if isinstance(panel, Mapping):
        members = [judge_label(m) for m in panel.get("members") or ()]
        rule, quorum = str(panel.get("rule") or "majority"), panel.get("min")
        if quorum is not None and quorum != len(members) // 2 + 1:
            rule += f", min {quorum}"
        return f"panel({rule}: {', '.join(members)})"
    if isinstance(cascade, Mapping):
        return f"cascade({judge_label(cascade.get('rule') or {})} → {judge_label(cascade.get('llm') or {})})"
    return judge_label(judge)


_FIELDS = {f.name: f for f in fields(JudgeSettings)}
# name -> (accepted types, may be None); explicit, so `int | None` fields are converted too.
_TYPES: dict[str, tuple[type, bool]] = {
    "backend": (str, False), "model": (str, False), "base_url": (str, True), "temperature": (float, False),
    "max_tokens": (int, False), "concurrency": (int, False), "rpm": (float, False), "timeout": (float, False),
    "max_retries": (int, False), "cache": (bool, False), "cache_dir": (str, True), "preflight": (bool, False),
    "thinking_budget": (int, True), "reasoning_effort": (str, True), "tpm": (float, False),
    "adaptive": (bool, False), "mode": (str, False), "batch_poll_seconds": (float, False),
    "batch_max_hours": (float, False), "batch_wait": (bool, False), "batch_fallback": (str, False),
    "dry_run": (bool, False), "budget_usd": (float, True), "prices": (str, True),
}
assert set(_TYPES) == set(_FIELDS), "every setting needs an entry in _TYPES"

# Built-in defaults per (judge, backend): a pair missing here is a combination that cannot work.
DEFAULTS: dict[tuple[str, str], dict[str, Any]] = {
    ("exact_match", "openai"): {"model": DEFAULT_EXACT_MATCH_MODEL, "max_tokens": 1024},
    ("exact_match", "azure"): {"model": DEFAULT_EXACT_MATCH_MODEL, "max_tokens": 1024},
    ("exact_match", "gemini"): {"model": DEFAULT_VLM_MODEL, "max_tokens": GEMINI_THINKING_MAX_TOKENS},
    ("exact_match", "local"): {"model": LOCAL_MODEL, "max_tokens": 1024},
    ("vlm", "gemini"): {"model": DEFAULT_VLM_MODEL, "max_tokens": GEMINI_THINKING_MAX_TOKENS},
    ("vlm", "openai"): {"model": DEFAULT_OPENAI_VISION_MODEL, "max_tokens": 8192},
    ("vlm", "azure"): {"model": DEFAULT_OPENAI_VISION_MODEL, "max_tokens": 8192},
}

_REASONING = re.compile(r"^(o\d+(-.*)?|gpt-5(?!.*-chat).*)$")  # gpt-5-chat-* is a chat model


def is_reasoning_model(model: str) -> bool:
    """OpenAI reasoning families (o1, o3, o4-mini, GPT-5, ...): they take
    ``max_completion_tokens`` and no ``temperature``, and think before answering.
    A provider prefix (``openai/o3``) is ignored; ``gpt-5-chat`` models are chat models."""
    return bool(_REASONING.match(model.strip().lower().rsplit("/", 1)[-1]))


def resolve_settings(judge: str, yaml_settings: Mapping[str, Any] | None,
                     metadata: Mapping[str, Any] | None,
                     environ: Mapping[str, str] | None = None,
                     overrides: Mapping[str, Any] | None = None) -> JudgeSettings:
    """Merge the four layers into a validated JudgeSettings.

    ``overrides`` (one judge-panel member's own settings) sit above every layer.
    """
    environ = os.environ if environ is None else environ
    yaml_layer = _check_names(dict(yaml_settings or {}), "the task YAML's mathjudge.settings")
    refuse_credentials(yaml_layer, "the task YAML's mathjudge.settings")
    merged: dict[str, Any] = {}
    for layer in (yaml_layer, _from_env(environ, judge), _from_metadata(metadata or {}, judge), overrides or {}):
        merged.update(layer)
    for name in RUN_OPTIONS:  # resolved by resolve_run_options
        merged.pop(name, None)
    backend = str(merged.get("backend", DEFAULT_BACKEND[judge]))
    if backend in BACKENDS and (judge, backend) not in DEFAULTS:
        raise ConfigError(f"the {judge} judge cannot run on the {backend} backend (the local judge only "
                          "speaks the exact-match contract); choose gemini, openai or azure")
    values = {k: _coerce(k, v) for k, v in merged.items()}
    row = DEFAULTS.get((judge, backend), {})
    if "model" not in values or backend == "local":  # the local judge has no model to choose
        values["model"] = row.get("model", DEFAULT_EXACT_MATCH_MODEL)
    if "max_tokens" not in values:
        values["max_tokens"] = row.get("max_tokens", 1024)
        if isinstance(values["model"], str) and is_reasoning_model(values["model"]):
            values["max_tokens"] = max(values["max_tokens"], REASONING_MAX_TOKENS)
    values.setdefault("backend", backend)
    return JudgeSettings(**values)


@dataclass(frozen=True)
class RunOptions:
    """How a task's judge is run: one judge (the default), a panel, or a rule-then-LLM cascade."""
    panel: tuple[Mapping[str, Any], ...] = ()  # each member: judge settings overriding the run's own
    panel_rule: str = "majority"
    panel_min: int | None = None  # None: a strict majority of the members must give a verdict
    cascade: bool = False
    media_dirs: tuple[str, ...] = ()  # VLM tasks: more folders media may be attached from (resolved paths)
    audit: bool = False  # measure the judge's gullibility once per run (lm_eval_mathjudge.audit)
    audit_limit: int = AUDIT_LIMIT

    def __post_init__(self):
        for problem in _option_problems(self):
            raise ConfigError(problem)

    @property
    def quorum(self) -> int:
        return self.panel_min if self.panel_min is not None else len(self.panel) // 2 + 1


def resolve_run_options(judge: str, yaml_settings: Mapping[str, Any] | None, metadata: Mapping[str, Any] | None,
                        environ: Mapping[str, str] | None = None) -> RunOptions:
    """The panel/cascade options, from the same layers and with the same precedence as the settings:
    ``mathjudge.settings`` in the YAML, ``MATHJUDGE_[GPT4EM_|VLM_]PANEL...``, ``[gpt4em_|vlm_]judge_panel...``."""
    environ = os.environ if environ is None else environ
    merged: dict[str, Any] = {}
    merged.update({k: v for k, v in (yaml_settings or {}).items() if k in RUN_OPTIONS})
    merged.update({name: environ[p + name.upper()] for p in _env_prefixes(judge) for name in RUN_OPTIONS
                   if environ.get(p + name.upper(), "") != ""})
    for prefix in (META_PREFIX, f"{SCOPES[judge]}_{META_PREFIX}"):  # generic first, then this judge's own
        merged.update({name: (metadata or {})[prefix + name] for name in RUN_OPTIONS
                       if prefix + name in (metadata or {})})
    values: dict[str, Any] = {}
    if merged.get("panel") not in (None, "", [], ()):
        values["panel"] = _panel_members(merged["panel"])
    if merged.get("panel_rule") is not None:
        values["panel_rule"] = str(merged["panel_rule"]).strip().lower()
    if merged.get("panel_min") not in (None, ""):
        try:
            values["panel_min"] = _to_int(merged["panel_min"])
        except (TypeError, ValueError):
            raise ConfigError(f"judge setting panel_min={merged['panel_min']!r} is not a valid int") from None
    for name in ("cascade", "audit"):
        if merged.get(name) is not None:
            try:
                values[name] = _to_bool(merged[name])
            except ValueError:
                raise ConfigError(f"judge setting {name}={merged[name]!r} is not a valid bool "
                                  "(true/false)") from None
    if merged.get("audit_limit") not in (None, ""):
        try:
            values["audit_limit"] = _to_int(merged["audit_limit"])
        except (TypeError, ValueError):
            raise ConfigError(f"judge setting audit_limit={merged['audit_limit']!r} is not a valid int") from None
    if merged.get("media_dirs") not in (None, "", [], ()):
        values["media_dirs"] = _media_dirs(merged["media_dirs"])
    options = RunOptions(**values)
    if options.cascade and judge != "exact_match":
        raise ConfigError(f"judge_cascade works with the exact-match judge only (the {judge} judge has no rule "
                          "stage); remove it for this task")
    return options


def _panel_members(value: Any) -> tuple[dict[str, Any], ...]:
    if isinstance(value, str):  # from an environment variable or a --model_args string
        try:
            value = json.loads(value)
        except ValueError:
            raise ConfigError(f"judge setting panel={value!r} is not JSON; give a list of objects, e.g. "
                              '[{"backend": "local"}, {"backend": "openai", "model": "gpt-4o-2024-08-06"}]') from None
    if not isinstance(value, (list, tuple)) or not all(isinstance(m, Mapping) for m in value):
        raise ConfigError("judge setting panel must be a list of objects, one per member, each holding that "
                          'member\'s judge settings, e.g. [{"backend": "local"}, {"backend": "openai"}]')
    members = []
    for i, member in enumerate(value, 1):
        where = f"judge_panel member {i}"
        unknown = [k for k in member if k not in _FIELDS]
        if unknown:
            _check_names({k: None for k in unknown if k not in RUN_OPTIONS}, where)
            raise ConfigError(f"{where} sets {', '.join(unknown)}: a member holds judge settings only "
                              "(panels do not nest, and rule/min/cascade belong to the whole run)")
        refuse_credentials(member, where)
        members.append(dict(member))
    return tuple(members)


def _media_dirs(value: Any) -> tuple[str, ...]:
    """Folders from a list, a JSON list or an ``os.pathsep``-separated string; each must exist."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = json.loads(text) if text.startswith("[") else text.split(os.pathsep)
        except ValueError:
            value = None  # refused just below
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError("judge setting media_dirs must be a list of folders (or one string of folders separated "
                          f"by {os.pathsep!r}), e.g. [\"/data/renders\"]")
    dirs = []
    for entry in (v.strip() for v in value):
        if not entry:
            continue
        path = os.path.realpath(os.path.expanduser(entry))
        if not os.path.isdir(path):
            raise ConfigError(f"judge setting media_dirs names {entry!r}, which is not a folder; give the folders "
                              "your generated images and videos are in")
        dirs.append(path)
    return tuple(dict.fromkeys(dirs))


def _option_problems(o: RunOptions):
    if o.panel and not 2 <= len(o.panel) <= MAX_PANEL:
        yield f"judge_panel has {len(o.panel)} member(s); a panel needs 2 to {MAX_PANEL}"
    if o.panel_rule not in PANEL_RULES:
        yield f"judge_panel_rule={o.panel_rule!r} must be one of {', '.join(PANEL_RULES)}"
    if o.panel_min is not None and not 1 <= o.panel_min <= max(1, len(o.panel)):
        yield (f"judge_panel_min={o.panel_min} must be between 1 and the number of panel members "
               f"({len(o.panel)})")
    if o.panel and o.cascade:
        yield "judge_panel and judge_cascade cannot be combined; choose one"
    if not 1 <= o.audit_limit <= MAX_AUDIT_LIMIT:
        yield f"judge_audit_limit={o.audit_limit} must be between 1 and {MAX_AUDIT_LIMIT} (answers per attack family)"
    if not o.panel and (o.panel_min is not None or o.panel_rule != "majority"):
        yield "judge_panel_rule/judge_panel_min are set but judge_panel is not; add the panel members or remove them"


# ---------------------------------------------------------------------- validation
def _check_type(name: str, value: Any) -> None:
    kind, optional = _TYPES[name]
    if value is None and optional:
        return
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        raise ConfigError(f"judge setting {name}={value!r} is not a {kind.__name__}")


def _problems(s: JudgeSettings):
    """Yield a message per invalid value (the first one is raised)."""
    if s.backend not in BACKENDS:
        yield f"judge backend {s.backend!r} is unknown; use one of {', '.join(BACKENDS)}"
    if not s.model.strip():
        yield "judge model is empty; name a model or remove the setting to use the default"
    for name in ("temperature", "rpm", "timeout", "tpm", "batch_poll_seconds", "batch_max_hours"):
        if not math.isfinite(getattr(s, name)):
            yield f"judge {name}={getattr(s, name)} is not a finite number"
    if not 0.0 <= s.temperature <= MAX_TEMPERATURE:
        yield f"judge temperature={s.temperature} is outside 0..{MAX_TEMPERATURE}"
    if not 1 <= s.concurrency <= MAX_CONCURRENCY:
        yield f"judge concurrency must be at least 1 and at most {MAX_CONCURRENCY} (got {s.concurrency})"
    if not 0 <= s.max_retries <= MAX_RETRIES_LIMIT:
        yield (f"judge max_retries={s.max_retries} must be between 0 and {MAX_RETRIES_LIMIT}: a judge that is "
               "down for longer needs a rerun, not more waiting")
    if not 1 <= s.max_tokens <= MAX_TOKENS_LIMIT:
        yield f"judge max_tokens={s.max_tokens} must be between 1 and {MAX_TOKENS_LIMIT}"
    if not 0 < s.timeout <= MAX_TIMEOUT:
        yield f"judge timeout={s.timeout} must be more than 0 and at most {MAX_TIMEOUT:.0f} seconds"
    if s.rpm < 0:
        yield f"judge rpm={s.rpm} must be positive (0 = unlimited)"
    if s.tpm < 0:
        yield f"judge tpm={s.tpm} must be positive (0 = unlimited)"
    if s.mode not in MODES:
        yield f"judge mode={s.mode!r} must be one of {', '.join(MODES)}"
    if s.batch_fallback not in BATCH_FALLBACKS:
        yield f"judge batch_fallback={s.batch_fallback!r} must be one of {', '.join(BATCH_FALLBACKS)}"
    if not 0 < s.batch_poll_seconds <= MAX_BATCH_POLL:
        yield f"judge batch_poll_seconds={s.batch_poll_seconds} must be more than 0 and at most {MAX_BATCH_POLL:.0f}"
    if not 0 < s.batch_max_hours <= MAX_BATCH_HOURS:
        yield f"judge batch_max_hours={s.batch_max_hours} must be more than 0 and at most {MAX_BATCH_HOURS:.0f}"
    if s.budget_usd is not None and not (math.isfinite(s.budget_usd) and s.budget_usd >= 0):
        yield f"judge budget_usd={s.budget_usd} must be a finite amount of dollars, 0 or more"
    if s.prices is not None and not s.prices.strip():
        yield "judge prices is empty; give a JSON object or a file, or remove the setting"
    if s.thinking_budget is not None and not (s.thinking_budget == -1 or 0 <= s.thinking_budget <= THINKING_BUDGET_MAX):
        yield f"judge thinking_budget={s.thinking_budget} must be -1 (dynamic) or 0..{THINKING_BUDGET_MAX}"
    if s.reasoning_effort is not None and s.reasoning_effort not in REASONING_EFFORTS:
        yield f"judge reasoning_effort={s.reasoning_effort!r} must be one of {', '.join(REASONING_EFFORTS)}"
    if s.base_url is not None and urlsplit(s.base_url).scheme not in ("http", "https"):
        yield f"judge base_url={s.base_url!r} must be an http:// or https:// URL"
    if s.cache_dir is not None and not s.cache_dir.strip():
        yield "judge cache_dir is empty; name a folder or remove the setting"


# ---------------------------------------------------------------------- layers
def _env_prefixes(judge: str) -> list[str]:
    return [ENV_PREFIX, f"{ENV_PREFIX}{SCOPES[judge].upper()}_"]  # generic first: scoped wins


def _from_env(environ: Mapping[str, str], judge: str) -> dict[str, Any]:
    every = [p for j in SCOPES for p in _env_prefixes(j)]
    known = {p + name.upper() for p in every for name in (*_FIELDS, *RUN_OPTIONS)} | set(OTHER_ENV)
    unknown = sorted(v for v in environ if v.startswith(ENV_PREFIX) and v not in known)
    if unknown:
        raise ConfigError(f"unknown environment variable {', '.join(unknown)}: judge settings are MATHJUDGE_<NAME> "
                          f"or MATHJUDGE_<GPT4EM|VLM>_<NAME> with NAME one of {', '.join(_FIELDS).upper()} "
                          f"(other variables: {', '.join(OTHER_ENV)}); fix the spelling or unset it")
    return {name: environ[p + name.upper()] for p in _env_prefixes(judge) for name in _FIELDS
            if environ.get(p + name.upper(), "") != ""}


def _from_metadata(metadata: Mapping[str, Any], judge: str) -> dict[str, Any]:
    refuse_credentials(metadata, "--metadata/--model_args")
    found: dict[str, Any] = {}
    for prefix in [META_PREFIX] + [f"{scope}_{META_PREFIX}" for scope in SCOPES.values()]:
        values = {k[len(prefix):]: v for k, v in metadata.items() if k.startswith(prefix)}
        _check_names(values, "--metadata", prefix=prefix)  # every judge's keys, to catch typos early
        if prefix in (META_PREFIX, f"{SCOPES[judge]}_{META_PREFIX}"):
            found.update(values)  # generic first, then this judge's own
    return found


def _check_names(values: dict[str, Any], where: str, prefix: str = "") -> dict[str, Any]:
    for name in values:
        if name in _FIELDS or name in RUN_OPTIONS:  # known settings are never secrets (max_tokens contains "token")
            continue
        if looks_like_credential(name):
            raise ConfigError(_credential_message(where, prefix + name))
        raise ConfigError(f"{where} sets unknown judge setting {prefix}{name}; known: "
                          + ", ".join(prefix + f for f in _FIELDS))
    return values


# ---------------------------------------------------------------------- credentials
# Name parts that mark a credential. Whole parts only: "tokenizer", "max_tokens" and
# "tokenized_requests" (lm-eval model_args) are not credentials, "api_key" and "token" are.
_CREDENTIAL_PARTS = {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "credential",
                     "credentials", "auth", "authorization", "bearer", "cookie", "signature", "sig"}
_CREDENTIAL_QUERY = {"key", "api_key", "apikey", "api-key", "token", "access_token", "auth", "sig",
                     "signature", "secret", "password", "code", "x-goog-api-key"}


def looks_like_credential(name: str) -> bool:
    parts = re.split(r"[^a-z0-9]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", str(name)).lower())
    return any(part in _CREDENTIAL_PARTS for part in parts)


def url_carries_credentials(value: str) -> bool:
    """A URL with user:password@ or a credential-like query parameter (``?api_key=...``, ``?key=``)."""
    if "://" not in value:
        return False
    try:
        parts = urlsplit(value.strip())
        userinfo = parts.username is not None or parts.password is not None
    except ValueError:  # e.g. a malformed port: treat as suspicious rather than crash
        return "@" in value
    query = [k for k, _ in parse_qsl(parts.query, keep_blank_values=True)]
    return userinfo or any(k.lower() in _CREDENTIAL_QUERY or looks_like_credential(k) for k in query)


def refuse_credentials(values: Mapping[str, Any], where: str) -> None:
    """Refuse keys that look like credentials and URLs that carry them: lm-eval writes both
    metadata and model_args verbatim to the results file (and prints them)."""
    for name, value in values.items():
        if name in _FIELDS or (name.startswith(META_PREFIX) and name[len(META_PREFIX):] in _FIELDS):
            pass  # a known setting (max_tokens, judge_max_tokens) is not a credential
        elif _scoped_setting(name):
            pass
        elif looks_like_credential(name):
            raise ConfigError(_credential_message(where, name))
        if isinstance(value, str) and url_carries_credentials(value):
            raise ConfigError(
                f"{where} sets {name} to a URL that carries credentials (user:password@ or a key in the query "
                "string); lm-eval writes it to the results file. Give the plain endpoint and put the key in the "
                "provider's environment variable (OPENAI_API_KEY, AZURE_OPENAI_API_KEY, GEMINI_API_KEY, ...).")


def _scoped_setting(name: str) -> bool:
    for scope in SCOPES.values():
        prefix = f"{scope}_{META_PREFIX}"
        if name.startswith(prefix) and name[len(prefix):] in _FIELDS:
            return True
    return False


def _credential_message(where: str, name: str) -> str:
    return (f"{where} sets {name}: credentials are never read from metadata, model_args or YAML, "
            "because lm-eval writes them to the results file. Put the key in the provider's "
            "environment variable (OPENAI_API_KEY, GEMINI_API_KEY, ...) and remove it from the command line.")


# ---------------------------------------------------------------------- coercion
def _coerce(name: str, value: Any) -> Any:
    kind, optional = _TYPES[name]
    if value is None:
        if optional:
            return None
        raise ConfigError(f"judge setting {name} has no value; give a {kind.__name__} or remove the key")
    try:
        if kind is bool:
            return _to_bool(value)
        if kind is int:
            return _to_int(value)
        if kind is float:
            return _to_float(value)
        if name == "prices" and isinstance(value, Mapping):  # an object in --metadata or YAML: keep it as JSON
            return json.dumps(value, sort_keys=True)
        if isinstance(value, (dict, list, tuple, set)):
            raise TypeError(value)
        return str(value).strip()
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"judge setting {name}={value!r} is not a valid {kind.__name__}") from exc


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(value)


def _to_int(value: Any) -> int:
    if isinstance(value, bool):  # True is an int in Python, never a count
        raise TypeError(value)
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(value)  # concurrency 2.7 is a mistake, not 2
        return int(value)
    if isinstance(value, int):
        return value
    return int(str(value).strip())


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise TypeError(value)
    number = float(value if isinstance(value, (int, float)) else str(value).strip())
    if not math.isfinite(number):
        raise ValueError(value)  # nan/inf: every call would fail after generation
    return number


def default_cache_dir() -> str:
    """MATHJUDGE_CACHE_DIR is read through the settings; this is the fallback."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
    elif sys.platform == "darwin":
        base = os.path.expanduser("~/Library/Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "lm_eval_mathjudge")
