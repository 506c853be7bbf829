"""The judge's settings as frozen dataclasses: every field, its type, its limits, and the judge's label.

``JudgeSettings`` is one judge (backend, model, limits, cache, batch, cost);
``RunOptions`` is how a task's judge is run (one judge, a panel, a cascade,
media folders, an audit). Both check every value when built, so an invalid
setting fails before anything runs. Where the values come from is
``layers.py``; the defaults per (judge, backend) are ``models.py``.
``judge_label`` and ``pipeline_label`` are the one way a judge, or a task's whole
judging pipeline, is named in samples, results, reports, cache rows and costs.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from dataclasses import dataclass, fields
from typing import Any, Mapping
from urllib.parse import urlsplit

from ..core.errors import ConfigError
from ..core.jsontext import shown
from .models import DEFAULT_EXACT_MATCH_MODEL, DEFAULT_MAX_TOKENS, default_reply_bytes

BACKENDS = ("openai", "azure", "local", "gemini")
ENV_PREFIX = "MATHJUDGE_"
SCOPES = {"exact_match": "gpt4em", "vlm": "vlm"}  # judge -> prefix of its own settings
OTHER_ENV = ("MATHJUDGE_DATA_DIR", "MATHJUDGE_NO_AUTOLOAD", "MATHJUDGE_DEBUG")  # read elsewhere, not settings
META_PREFIX = "judge_"
# Judge-run options that are not per-judge settings (panel.py, cascade.py, media.py, audit); same layers and names.
RUN_OPTIONS = ("panel", "panel_rule", "panel_min", "cascade", "media_dirs", "audit", "audit_limit", "stream", "pass_at",
               "counterfactual")
PANEL_RULES = ("majority", "unanimous")
MAX_PANEL = 9
AUDIT_LIMIT = 10  # adversarial answers per attack family and task in a judge audit (lm_eval_mathjudge.audit)
MAX_AUDIT_LIMIT = 10_000
MAX_REPEATS = 1024  # samples per problem (lm-eval's repeats); more is a typo, not a study

# Limits: a value outside them is a typo or a unit mix-up, never a useful setting.
MAX_RETRIES_LIMIT = 20
MAX_CONCURRENCY = 1024
MAX_TIMEOUT = 3600.0  # seconds per attempt
MIN_REPLY_BYTES = 1024  # judge_max_reply_bytes: less cannot hold an error body
MAX_REPLY_BYTES = 1 << 30  # 1 GiB: a reply that large is held in memory; it is no judge's
MAX_TEMPERATURE = 2.0  # the largest any supported API accepts
MAX_TOKENS_LIMIT = 1_000_000
THINKING_BUDGET_MAX = 32768  # Gemini 2.5 Pro's largest thinking budget; -1 = dynamic, 0 = off
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high")
MODES = ("online", "batch")
BATCH_FALLBACKS = ("online", "fail")
# A cache folder on a filesystem shared by hosts (core/mounts.py): use a host-local folder instead and
# warn, stop with a message, or use it anyway (one host writing there at a time is safe).
NETWORK_FS_POLICIES = ("fallback", "refuse", "allow")
MAX_BATCH_POLL = 3600.0  # seconds between two reads of a batch job's state
MAX_BATCH_HOURS = 48.0


@dataclass(frozen=True)
class JudgeSettings:
    backend: str = "openai"
    model: str = DEFAULT_EXACT_MATCH_MODEL
    base_url: str | None = None  # None: the SDK's own variable (OPENAI_BASE_URL, ...)
    temperature: float = 0.0
    max_tokens: int = DEFAULT_MAX_TOKENS  # models.DEFAULTS adds room for thinking
    concurrency: int = 64  # judge calls in flight at most (the adaptive gate lowers it on 429s)
    rpm: float = 0.0  # requests per minute across all threads; 0 = unlimited
    timeout: float = 120.0  # seconds per attempt: one deadline, wall clock, from connect to the last byte
    max_retries: int = 6  # retries after the first attempt, transient errors only
    cache: bool = True
    cache_dir: str | None = None  # None: the user cache directory
    cache_network_fs: str = "fallback"  # cache_dir on NFS, Lustre, SMB...: NETWORK_FS_POLICIES
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
    max_reply_bytes: int | None = None  # cap on one reply (raw and decoded); None: models.default_reply_bytes

    @property
    def reply_bytes(self) -> int:
        """The byte cap on one reply of this judge (backends/wire): the setting, else sized from max_tokens."""
        return self.max_reply_bytes if self.max_reply_bytes is not None else default_reply_bytes(self.max_tokens)

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


FIELDS = {f.name: f for f in fields(JudgeSettings)}  # the setting names, in declaration order
# name -> (accepted types, may be None); explicit, so `int | None` fields are converted too.
TYPES: dict[str, tuple[type, bool]] = {
    "backend": (str, False), "model": (str, False), "base_url": (str, True), "temperature": (float, False),
    "max_tokens": (int, False), "concurrency": (int, False), "rpm": (float, False), "timeout": (float, False),
    "max_retries": (int, False), "cache": (bool, False), "cache_dir": (str, True), "preflight": (bool, False),
    "cache_network_fs": (str, False), "thinking_budget": (int, True), "reasoning_effort": (str, True), "tpm": (float, False),
    "adaptive": (bool, False), "mode": (str, False), "batch_poll_seconds": (float, False),
    "batch_max_hours": (float, False), "batch_wait": (bool, False), "batch_fallback": (str, False),
    "dry_run": (bool, False), "budget_usd": (float, True), "prices": (str, True), "max_reply_bytes": (int, True),
}
assert set(TYPES) == set(FIELDS), "every setting needs an entry in TYPES"


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
    stream: bool = True  # judge each sample as its generation arrives, where that changes nothing (harness/run.py)
    pass_at: tuple[int, ...] = ()  # with repeats k > 1: the k' of pass@k' (each 1..k); () = 1 and k
    counterfactual: bool = False  # re-check each LLM Correct verdict against a wrong reference (judging/counterfactual.py)

    def __post_init__(self):
        for problem in _option_problems(self):
            raise ConfigError(problem)

    @property
    def quorum(self) -> int:
        return self.panel_min if self.panel_min is not None else len(self.panel) // 2 + 1


def _option_problems(o: RunOptions):
    if o.panel and not 2 <= len(o.panel) <= MAX_PANEL:
        yield f"judge_panel has {len(o.panel)} member(s); a panel needs 2 to {MAX_PANEL}"
    if o.panel_rule not in PANEL_RULES:
        yield f"judge_panel_rule={shown(o.panel_rule)} must be one of {', '.join(PANEL_RULES)}"
    if o.panel_min is not None and not 1 <= o.panel_min <= max(1, len(o.panel)):
        yield (f"judge_panel_min={o.panel_min} must be between 1 and the number of panel members "
               f"({len(o.panel)})")
    if o.panel and o.cascade:
        yield "judge_panel and judge_cascade cannot be combined; choose one"
    if not 1 <= o.audit_limit <= MAX_AUDIT_LIMIT:
        yield f"judge_audit_limit={o.audit_limit} must be between 1 and {MAX_AUDIT_LIMIT} (answers per attack family)"
    if any(not 1 <= k <= MAX_REPEATS for k in o.pass_at):
        yield f"judge_pass_at={list(o.pass_at)} must list whole numbers between 1 and {MAX_REPEATS}"
    if not o.panel and (o.panel_min is not None or o.panel_rule != "majority"):
        yield "judge_panel_rule/judge_panel_min are set but judge_panel is not; add the panel members or remove them"


# ---------------------------------------------------------------------- validation
def _check_type(name: str, value: Any) -> None:
    kind, optional = TYPES[name]
    if value is None and optional:
        return
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        raise ConfigError(f"judge setting {name}={shown(value)} is not a {kind.__name__}")


def _problems(s: JudgeSettings):
    """Yield a message per invalid value (the first one is raised)."""
    if s.backend not in BACKENDS:
        yield f"judge backend {shown(s.backend)} is unknown; use one of {', '.join(BACKENDS)}"
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
    if s.max_reply_bytes is not None and not MIN_REPLY_BYTES <= s.max_reply_bytes <= MAX_REPLY_BYTES:
        yield (f"judge max_reply_bytes={s.max_reply_bytes} must be between {MIN_REPLY_BYTES} and {MAX_REPLY_BYTES} "
               "(bytes of one reply; unset: sized from max_tokens)")
    if not 0 < s.timeout <= MAX_TIMEOUT:
        yield f"judge timeout={s.timeout} must be more than 0 and at most {MAX_TIMEOUT:.0f} seconds"
    if s.rpm < 0:
        yield f"judge rpm={s.rpm} must be positive (0 = unlimited)"
    if s.tpm < 0:
        yield f"judge tpm={s.tpm} must be positive (0 = unlimited)"
    if s.mode not in MODES:
        yield f"judge mode={shown(s.mode)} must be one of {', '.join(MODES)}"
    if s.batch_fallback not in BATCH_FALLBACKS:
        yield f"judge batch_fallback={shown(s.batch_fallback)} must be one of {', '.join(BATCH_FALLBACKS)}"
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
        yield f"judge reasoning_effort={shown(s.reasoning_effort)} must be one of {', '.join(REASONING_EFFORTS)}"
    if s.base_url is not None and urlsplit(s.base_url).scheme not in ("http", "https"):
        yield f"judge base_url={shown(s.base_url)} must be an http:// or https:// URL"
    if s.cache_dir is not None and not s.cache_dir.strip():
        yield "judge cache_dir is empty; name a folder or remove the setting"
    if s.cache_network_fs not in NETWORK_FS_POLICIES:
        yield f"judge cache_network_fs={shown(s.cache_network_fs)} must be one of {', '.join(NETWORK_FS_POLICIES)}"


def default_cache_dir() -> str:
    """MATHJUDGE_CACHE_DIR is read through the settings; this is the fallback."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
    elif sys.platform == "darwin":
        base = os.path.expanduser("~/Library/Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "lm_eval_mathjudge")


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
