"""The judge's settings from one table: every setting's name, kind, default, meaning and layers.

``SETTINGS`` is that table, one ``Setting`` row each (``kinds.py``: a row, and what each kind of value
may be). Everything else is derived from it, so a setting is added in one place: the frozen
dataclasses ``JudgeSettings`` (one judge: backend, model, limits, cache, batch, cost) and
``RunOptions`` (how a task's judge is run: one judge, a panel, a cascade, media folders, an audit)
with their type and range checks, the coercion and the names in each layer (``layers.py``: YAML <
environment < metadata < panel member, "did you mean"), and the settings reference
(``docs/_tools/settings_page.py``). The defaults per (judge, backend) are ``models.py``.
``judge_label`` and ``pipeline_label`` are the one way a judge, or a task's whole judging pipeline,
is named in samples, results, reports, cache rows and costs.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import field, make_dataclass
from typing import Any, ClassVar, Mapping

from .. import vendors
from ..core.errors import ConfigError
from .kinds import RUN_LAYERS, Choice, Counts, Flag, Folders, Members, Real, Setting, Text, Url, Whole
from .models import (DEFAULT_BACKEND, DEFAULT_EXACT_MATCH_MODEL, DEFAULT_MAX_TOKENS, REPLY_BYTES_BASE,
                     REPLY_BYTES_PER_TOKEN, default_reply_bytes)

BACKENDS = vendors.NAMES  # one per vendor record (vendors/)
# How a setting is spelled in each layer (``spellings``): MATHJUDGE_<NAME>, judge_<name>, and per judge
# MATHJUDGE_<SCOPE>_<NAME>, <scope>_judge_<name>.
ENV_PREFIX = "MATHJUDGE_"
SCOPES = {"exact_match": "gpt4em", "vlm": "vlm"}  # judge -> prefix of its own settings
OTHER_ENV = ("MATHJUDGE_DATA_DIR", "MATHJUDGE_NO_AUTOLOAD", "MATHJUDGE_DEBUG")  # read elsewhere, not settings
META_PREFIX = "judge_"
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

_PER_PAIR = "per (judge, backend): [the table below](#defaults-per-judge-and-backend)"
_POSITIVE = "{label}={value} must be positive (0 = unlimited)"

# ---------------------------------------------------------------------- the table
# name, kind (type and what is allowed), default, what it does, an example value (as --metadata JSON takes it).
SETTINGS: tuple[Setting, ...] = (
    Setting("backend", Choice(BACKENDS, says="{label} {value} is unknown; use one of {choices}"),
            DEFAULT_BACKEND["exact_match"],
            "the judge's service ([judge backends](backends.md)); `local` judges GPT4-EM tasks only", "gemini",
            default_text=f"`{DEFAULT_BACKEND['exact_match']}` for GPT4-EM tasks, `{DEFAULT_BACKEND['vlm']}` for VLM "
                         "tasks"),
    Setting("model", Text("name a model or remove the setting to use the default"), DEFAULT_EXACT_MATCH_MODEL,
            "the judge model (the deployment name on Azure; always `math-verify` for `local`)", "gpt-4o-2024-08-06",
            default_text=_PER_PAIR),
    Setting("base_url", Url(), None,
            "the judge's endpoint; unset = the SDK's own (`OPENAI_BASE_URL`, `AZURE_OPENAI_ENDPOINT`, "
            "`GOOGLE_GEMINI_BASE_URL`, `ANTHROPIC_BASE_URL`, or the provider's)", "http://127.0.0.1:8000/v1"),
    Setting("temperature", Real(0, MAX_TEMPERATURE, says="{label}={value} is outside {lo}..{hi}"), 0.0,
            "sampling temperature (0..1 on `anthropic`; never sent to reasoning models, nor to Claude 4.7 and later)", 0.2),
    Setting("max_tokens", Whole(1, MAX_TOKENS_LIMIT), DEFAULT_MAX_TOKENS,
            "cap on the judge's reply; Gemini 2.5, Claude and OpenAI reasoning models think within it", 4096,
            default_text=_PER_PAIR),
    Setting("concurrency", Whole(1, MAX_CONCURRENCY, says="{label} must be at least {lo} and at most {hi} (got {value})"),
            64, "judge calls in flight at once, at most (one pool per run; the adaptive gate lowers it on 429s)", 16),
    Setting("rpm", Real(0, says=_POSITIVE), 0.0,
            "requests per minute to this judge (endpoint + model) over all threads and tasks; `0` = no limit", 500),
    Setting("timeout", Real(0, MAX_TIMEOUT, above=True, says="{label}={value} must be more than {lo} and at most "
                                                             "{hi:.0f} seconds"), 120.0,
            "seconds per attempt: one wall-clock deadline from connect to the last byte of the reply (a reply that "
            "drips in ends there); a call takes at most about this x (`max_retries` + 1) "
            "([network bounds](reliability.md#network-bounds))", 300),
    Setting("max_retries", Whole(0, MAX_RETRIES_LIMIT, says="{label}={value} must be between {lo} and {hi}: a judge "
                                                            "that is down for longer needs a rerun, not more waiting"), 6,
            "retries after the first attempt, for 408/409/425/429/5xx, timeouts and dropped connections", 3),
    Setting("cache", Flag(), True,
            "use the persistent judge cache ([the judge cache](failures.md#the-judge-cache))", False),
    Setting("cache_dir", Text("name a folder or remove the setting", "a folder"), None,
            "where the judge cache, saved generations and media live", "/scratch/mathjudge-cache",
            default_text="the user cache folder (`~/.cache/lm_eval_mathjudge` on Linux)"),
    Setting("cache_network_fs", Choice(NETWORK_FS_POLICIES), "fallback",
            "what the cache does when `cache_dir` is on a filesystem shared by hosts: use a folder of this host "
            "(warned once), stop, or use it as is ([running on a cluster](cluster.md))", "refuse"),
    Setting("preflight", Flag(), True,
            "one free model lookup before generation checks endpoint, key and model "
            "([preflight](backends.md#preflight-the-judge-is-checked-before-generation))", False),
    Setting("thinking_budget", Whole(0, THINKING_BUDGET_MAX, special=((-1, "dynamic"),),
                                     says="{label}={value} must be -1 (dynamic) or {lo}..{hi}"), None,
            "Gemini and Claude thinking tokens (`0`: no thinking); unset = the model's default "
            "([Claude](backends.md#anthropic-claude))", 1024),
    Setting("reasoning_effort", Choice(REASONING_EFFORTS), None,
            "sent to OpenAI reasoning models (o-series, GPT-5) when set", "low"),
    Setting("tpm", Real(0, says=_POSITIVE), 0.0,
            "tokens (prompt + completion) per minute to this judge over all threads and tasks; `0` = no limit", 200000),
    Setting("adaptive", Flag(), True,
            "lower the calls in flight when the judge answers 429, raise them again as calls succeed", False),
    Setting("mode", Choice(MODES), "online",
            "`batch` sends the run's uncached requests through the provider's batch API at about half the price "
            "([batch mode](scale.md#batch-mode))", "batch"),
    Setting("batch_poll_seconds", Real(0, MAX_BATCH_POLL, above=True), 30.0,
            "how often a batch job's state is read", 120),
    Setting("batch_max_hours", Real(0, MAX_BATCH_HOURS, above=True), 26.0,
            "stop waiting for a batch job after this long (the job is kept; a rerun collects it)", 30),
    Setting("batch_wait", Flag(), True,
            "`false`: submit the batch and stop; rerunning the same command collects the results", False),
    Setting("batch_fallback", Choice(BATCH_FALLBACKS), "online",
            "what happens to requests a batch failed or let expire: online calls, or counted `judge_failed`", "fail"),
    Setting("dry_run", Flag(), False,
            "estimate what judging would cost and stop before the first judge call "
            "([dry run](scale.md#dry-run-and-budget))", True),
    Setting("budget_usd", Real(0, says="{label}={value} must be a finite amount of dollars, 0 or more"), None,
            "refuse to start judging when the run's estimate is above this many US dollars", 25),
    Setting("prices", Text("give a JSON object or a file, or remove the setting",
                           "a JSON object, or the path of a `.json`/`.yaml` file holding one", objects=True), None,
            "overrides rows of the price table, and prices a judge served elsewhere than its vendor's own service "
            "(a local vLLM, a gateway), which has no list price ([prices](scale.md#prices))",
            {"my-finetune": {"input": 1.0, "output": 4.0}}),
    Setting("max_reply_bytes", Whole(MIN_REPLY_BYTES, MAX_REPLY_BYTES, says="{label}={value} must be between {lo} and "
                                     "{hi} (bytes of one reply; unset: sized from max_tokens)"), None,
            "the most bytes one reply may take, as sent and after undoing its gzip/deflate encoding; a bigger one is "
            "the sample's `reply_too_large` failure, never retried nor cached "
            "([network bounds](reliability.md#network-bounds))", 4 << 20,
            default_text=f"{REPLY_BYTES_BASE >> 20} MiB + {REPLY_BYTES_PER_TOKEN} bytes per `max_tokens` token "
                         f"({default_reply_bytes(DEFAULT_MAX_TOKENS):,} bytes at {DEFAULT_MAX_TOKENS:,} tokens)"),
    # How a task's judge is run: the whole run's options, never a panel member's.
    Setting("panel", Members(MAX_PANEL), (),
            "several judges per sample, their verdicts combined by `panel_rule` ([panels](panels.md#panels))",
            [{"backend": "local"}, {"backend": "openai", "model": "gpt-4o-2024-08-06"}, {"backend": "gemini"}],
            RUN_LAYERS, default_text="unset (one judge)"),
    Setting("panel_rule", Choice(PANEL_RULES, fold_case=True), "majority",
            "how the members' verdicts combine", "unanimous", RUN_LAYERS),
    Setting("panel_min", Whole(), None,
            "how many members must give a verdict for the panel to decide a sample", 2, RUN_LAYERS,
            default_text="a strict majority of the members", allowed_text="1 to the number of panel members"),
    Setting("cascade", Flag(), False,
            "GPT4-EM only: the offline `local` judge first, the LLM judge only for what it does not accept "
            "([cascade](panels.md#cascade))", True, RUN_LAYERS),
    Setting("media_dirs", Folders(), (),
            "VLM tasks: more folders a media response may be attached from, besides the generator's own "
            "([media outputs](media-models.md#media-outputs-what-the-judge-attaches))", ["/data/renders"], RUN_LAYERS),
    Setting("audit", Flag(), False,
            "after judging, audit the judge once per run and record the summary ([audit](audit.md))", True, RUN_LAYERS),
    Setting("audit_limit", Whole(1, MAX_AUDIT_LIMIT, says="{label}={value} must be between {lo} and {hi} (answers "
                                 "per attack family)"), AUDIT_LIMIT,
            "answers per attack family in that audit", 50, RUN_LAYERS),
    Setting("stream", Flag(), True,
            "judge each sample as the model finishes it, while the others still generate; on wherever that changes "
            "nothing (off for batch mode, the dry run and filters that read all responses; with a budget, on when "
            "the budget covers the worst case) ([judging while generating](scale.md#judging-while-the-model-generates))",
            False, RUN_LAYERS),
    Setting("pass_at", Counts(1, MAX_REPEATS), (),
            "with `repeats` k > 1: the k' of the `pass@k'` metrics; unset = 1 and k "
            "([k samples per problem](tasks.md#k-samples-per-problem))", [1, 4, 16], RUN_LAYERS),
    Setting("counterfactual", Flag(), False,
            "ask each LLM judge's Correct verdict once more with a wrong reference; Correct under both is not "
            "credited, flagged and counted in `judge_counterfactual` ([the re-check](audit.md#the-counterfactual-re-check))",
            True, RUN_LAYERS),
)
SETTING = {s.name: s for s in SETTINGS}
assert len(SETTING) == len(SETTINGS), "two rows share a name"
# Settings an earlier release had, and what stands in their place: every spelling of one in any layer is
# refused as unknown and named as retired, never taken for a typo of a live setting.
RETIRED = {"dedupe": "equivalent final answers no longer share one verdict; every sample is judged on its own, "
                     "and identical requests are still sent once"}
assert not set(RETIRED) & set(SETTING), "a retired setting is back in the table"


def spellings(name: str, layer: str, judge: str | None = None) -> tuple[str, ...]:
    """A setting's names in one layer, lowest precedence first: the generic name, then the judge-scoped
    ones (``judge``'s own, or every judge's when None). The task YAML and a panel member use the bare name."""
    scopes = [SCOPES[judge]] if judge else list(SCOPES.values())
    if layer == "env":
        return (ENV_PREFIX + name.upper(), *(f"{ENV_PREFIX}{s.upper()}_{name.upper()}" for s in scopes))
    if layer == "metadata":
        return (META_PREFIX + name, *(f"{s}_{META_PREFIX}{name}" for s in scopes))
    return (name,)


# ---------------------------------------------------------------------- the dataclasses, from the table
class _Checked:
    """Every value is checked against its row when built: type first, then range (the first problem is raised)."""
    _rows: ClassVar[tuple[Setting, ...]] = ()

    def __post_init__(self):
        for row in self._rows:
            row.check_type(getattr(self, row.name))
        for problem in _problems(self):
            raise ConfigError(problem)


def _problems(settings: _Checked):
    """Yield a message per invalid value: each row's own rule, then the rules between settings."""
    for row in settings._rows:
        if (problem := row.problem(getattr(settings, row.name))) is not None:
            yield problem
    if isinstance(settings, _RunOptions):
        yield from _option_problems(settings)


def _from_table(name: str, base: type, rows: tuple[Setting, ...]) -> type:
    columns = [(r.name, r.kind.py | None if r.optional else r.kind.py, field(default=r.default)) for r in rows]
    return make_dataclass(name, columns, bases=(base,), frozen=True,
                          namespace={"__module__": __name__, "__qualname__": name, "__doc__": base.__doc__,
                                     "_rows": rows})


class _JudgeSettings(_Checked):
    """One judge's settings (``SETTINGS`` rows a panel member may set), each checked when built."""

    @property
    def reply_bytes(self) -> int:
        """The byte cap on one reply of this judge (backends/wire): the setting, else sized from max_tokens."""
        return self.max_reply_bytes if self.max_reply_bytes is not None else default_reply_bytes(self.max_tokens)

    def resolved_cache_dir(self) -> str:
        return self.cache_dir or default_cache_dir()

    def public(self) -> dict[str, Any]:
        """What goes into results files: every setting (none of them is a secret)."""
        return dataclasses.asdict(self)


class _RunOptions(_Checked):
    """How a task's judge is run: one judge (the default), a panel, or a rule-then-LLM cascade."""

    @property
    def quorum(self) -> int:
        return self.panel_min if self.panel_min is not None else len(self.panel) // 2 + 1


def _option_problems(o: Any):
    """The rules between run options (each option's own range is its row's)."""
    if o.panel_min is not None and not 1 <= o.panel_min <= max(1, len(o.panel)):
        yield (f"judge_panel_min={o.panel_min} must be between 1 and the number of panel members "
               f"({len(o.panel)})")
    if o.panel and o.cascade:
        yield "judge_panel and judge_cascade cannot be combined; choose one"
    if not o.panel and (o.panel_min is not None or o.panel_rule != "majority"):
        yield "judge_panel_rule/judge_panel_min are set but judge_panel is not; add the panel members or remove them"


JudgeSettings = _from_table("JudgeSettings", _JudgeSettings, tuple(s for s in SETTINGS if s.judge_setting))
RunOptions = _from_table("RunOptions", _RunOptions, tuple(s for s in SETTINGS if not s.judge_setting))
FIELDS = {f.name: f for f in dataclasses.fields(JudgeSettings)}  # the judge settings' names, in table order
RUN_OPTIONS = tuple(f.name for f in dataclasses.fields(RunOptions))


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
