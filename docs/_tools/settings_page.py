"""Write docs/settings.md, the settings reference, from the settings schema.

Names, types, defaults (per judge and backend), allowed values and the names of the
metadata keys and environment variables all come from ``lm_eval_mathjudge.settings``;
only the one-line meanings are written here. ``tests/test_docs.py`` fails when the
committed page differs from what this script writes, when a setting has no meaning
here, and when a range printed here is not the one the schema enforces.

    python docs/_tools/settings_page.py            # rewrite docs/settings.md
    python docs/_tools/settings_page.py --check    # exit 1 if it is out of date
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "settings.md"

from lm_eval_mathjudge.settings import models, schema  # noqa: E402

JUDGES = {"exact_match": "GPT4-EM", "vlm": "VLM"}


@dataclass(frozen=True)
class Num:
    """lo..hi; ``lo_open``: more than lo; hi None: no upper limit."""
    lo: float
    hi: float | None
    lo_open: bool = False

    def text(self) -> str:
        lo = f"more than {_n(self.lo)}" if self.lo_open else _n(self.lo)
        if self.hi is None:
            return f"{'> ' if self.lo_open else '≥ '}{_n(self.lo)}"
        return f"({_n(self.lo)}, {_n(self.hi)}]" if self.lo_open else f"{lo}..{_n(self.hi)}"


@dataclass(frozen=True)
class Choice:
    values: tuple[str, ...]

    def text(self) -> str:
        return ", ".join(f"`{v}`" for v in self.values)


def _n(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else str(x)


BOOL = "`true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`)"
# What the schema accepts, written with its own constants; the test probes every Num and Choice.
RANGES: dict[str, object] = {
    "backend": Choice(schema.BACKENDS),
    "model": "non-empty text",
    "base_url": "an `http://` or `https://` URL without credentials",
    "temperature": Num(0, schema.MAX_TEMPERATURE),
    "max_tokens": Num(1, schema.MAX_TOKENS_LIMIT),
    "concurrency": Num(1, schema.MAX_CONCURRENCY),
    "rpm": Num(0, None),
    "timeout": Num(0, schema.MAX_TIMEOUT, lo_open=True),
    "max_retries": Num(0, schema.MAX_RETRIES_LIMIT),
    "cache": BOOL,
    "cache_dir": "non-empty path",
    "cache_network_fs": Choice(schema.NETWORK_FS_POLICIES),
    "preflight": BOOL,
    "thinking_budget": f"`-1` (dynamic), `0` (off), 1..{_n(schema.THINKING_BUDGET_MAX)}",
    "reasoning_effort": Choice(schema.REASONING_EFFORTS),
    "tpm": Num(0, None),
    "adaptive": BOOL,
    "mode": Choice(schema.MODES),
    "batch_poll_seconds": Num(0, schema.MAX_BATCH_POLL, lo_open=True),
    "batch_max_hours": Num(0, schema.MAX_BATCH_HOURS, lo_open=True),
    "batch_wait": BOOL,
    "batch_fallback": Choice(schema.BATCH_FALLBACKS),
    "dry_run": BOOL,
    "budget_usd": Num(0, None),
    "prices": "a JSON object, or the path of a `.json`/`.yaml` file holding one",
    "max_reply_bytes": Num(schema.MIN_REPLY_BYTES, schema.MAX_REPLY_BYTES),
    "panel": f"a list of 2 to {schema.MAX_PANEL} objects, each one member's judge settings",
    "panel_rule": Choice(schema.PANEL_RULES),
    "panel_min": "1 .. the number of members",
    "cascade": BOOL,
    "media_dirs": "a list of existing folders (or one string, folders separated by `:`; `;` on Windows)",
    "audit": BOOL,
    "audit_limit": Num(1, schema.MAX_AUDIT_LIMIT),
    "counterfactual": BOOL,
    "stream": BOOL,
    "pass_at": f"a list of whole numbers, each 1 .. repeats (at most {schema.MAX_REPEATS}), or one string `1,4,16`",
}

MEANINGS = {
    "backend": "the judge's service ([judge backends](backends.md)); `local` judges GPT4-EM tasks only",
    "model": "the judge model (the deployment name on Azure; always `math-verify` for `local`)",
    "base_url": "the judge's endpoint; unset = the SDK's own (`OPENAI_BASE_URL`, `AZURE_OPENAI_ENDPOINT`, "
                "`GOOGLE_GEMINI_BASE_URL`, or the provider's)",
    "temperature": "sampling temperature (never sent to reasoning models)",
    "max_tokens": "cap on the judge's reply; Gemini 2.5 and OpenAI reasoning models think within it",
    "concurrency": "judge calls in flight at once, at most (one pool per run; the adaptive gate lowers it on 429s)",
    "rpm": "requests per minute to this judge (endpoint + model) over all threads and tasks; `0` = no limit",
    "timeout": "seconds per attempt: one wall-clock deadline from connect to the last byte of the reply (a reply "
               "that drips in ends there); a call takes at most about this x (`max_retries` + 1) "
               "([network bounds](reliability.md#network-bounds))",
    "max_retries": "retries after the first attempt, for 408/409/425/429/5xx, timeouts and dropped connections",
    "cache": "use the persistent judge cache ([the judge cache](failures.md#the-judge-cache))",
    "cache_dir": "where the judge cache, saved generations and media live",
    "cache_network_fs": "what the cache does when `cache_dir` is on a filesystem shared by hosts: use a folder of this host (warned once), stop, or use it as is ([running on a cluster](cluster.md))",
    "preflight": "one free model lookup before generation checks endpoint, key and model "
                 "([preflight](backends.md#preflight-the-judge-is-checked-before-generation))",
    "thinking_budget": "Gemini thinking tokens; unset = the model's default",
    "reasoning_effort": "sent to OpenAI reasoning models (o-series, GPT-5) when set",
    "tpm": "tokens (prompt + completion) per minute to this judge over all threads and tasks; `0` = no limit",
    "adaptive": "lower the calls in flight when the judge answers 429, raise them again as calls succeed",
    "mode": "`batch` sends the run's uncached requests through the provider's batch API at about half the price "
            "([batch mode](scale.md#batch-mode))",
    "batch_poll_seconds": "how often a batch job's state is read",
    "batch_max_hours": "stop waiting for a batch job after this long (the job is kept; a rerun collects it)",
    "batch_wait": "`false`: submit the batch and stop; rerunning the same command collects the results",
    "batch_fallback": "what happens to requests a batch failed or let expire: online calls, or counted "
                      "`judge_failed`",
    "dry_run": "estimate what judging would cost and stop before the first judge call "
               "([dry run](scale.md#dry-run-and-budget))",
    "budget_usd": "refuse to start judging when the run's estimate is above this many US dollars",
    "prices": "overrides rows of the price table ([prices](scale.md#prices))",
    "max_reply_bytes": "the most bytes one reply may take, as sent and after undoing its gzip/deflate encoding; a "
                       "bigger one is the sample's `reply_too_large` failure, never retried nor cached "
                       "([network bounds](reliability.md#network-bounds))",
    "panel": "several judges per sample, e.g. `[{\"backend\": \"local\"}, {\"backend\": \"openai\", "
             "\"model\": \"gpt-4o-2024-08-06\"}]` ([panels](panels.md#panels))",
    "panel_rule": "how the members' verdicts combine",
    "panel_min": "how many members must give a verdict for the panel to decide a sample",
    "cascade": "GPT4-EM only: the offline `local` judge first, the LLM judge only for what it does not accept "
               "([cascade](panels.md#cascade))",
    "media_dirs": "VLM tasks: more folders a media response may be attached from, besides the generator's own "
                  "([media outputs](media-models.md#media-outputs-what-the-judge-attaches))",
    "audit": "after judging, audit the judge once per run and record the summary "
             "([audit](audit.md))",
    "audit_limit": "answers per attack family in that audit",
    "counterfactual": "ask each LLM judge's Correct verdict once more with a wrong reference; Correct under both: not "
                      "credited, flagged and counted (judge_counterfactual)",
    "stream": "judge each sample as the model finishes it, while the others still generate; on where it changes "
              "nothing (off for batch mode, the dry run and filters that read all responses; with a budget, "
              "on when the budget covers the worst case) "
              "([judging while generating](scale.md#judging-while-the-model-generates))",
    "pass_at": "with `repeats` k > 1: the k' of the `pass@k'` metrics; unset = 1 and k "
               "([k samples per problem](tasks.md#k-samples-per-problem))",
}


def names() -> list[str]:
    return [*schema.FIELDS, *schema.RUN_OPTIONS]


def _type(name: str) -> str:
    if name in schema.TYPES:
        kind, optional = schema.TYPES[name]
        return kind.__name__ + (" or unset" if optional else "")
    hint = typing.get_type_hints(schema.RunOptions)[name]
    text = {bool: "bool", int: "int", str: "str"}.get(hint)
    if text is None:
        text = "int or unset" if hint == (int | None) else "list"
    return text


def _default(name: str) -> str:
    if name == "backend":
        return " / ".join(f"`{models.DEFAULT_BACKEND[j]}`" for j in JUDGES)
    if name in ("model", "max_tokens"):
        return "per (judge, backend), [below](#defaults-per-judge-and-backend)"
    if name == "cache_dir":
        return "the user cache folder"
    if name == "panel_min":
        return "a strict majority of the members"
    if name == "max_reply_bytes":
        return (f"{models.REPLY_BYTES_BASE // (1 << 20)} MiB + {models.REPLY_BYTES_PER_TOKEN} bytes x `max_tokens` "
                f"({models.default_reply_bytes(models.DEFAULT_MAX_TOKENS):,} / "
                f"{models.default_reply_bytes(models.GEMINI_THINKING_MAX_TOKENS):,})")
    field = schema.FIELDS.get(name) or {f.name: f for f in dataclasses.fields(schema.RunOptions)}[name]
    value = field.default
    if value is None or value == ():
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def _range(name: str) -> str:
    spec = RANGES[name]
    return spec if isinstance(spec, str) else spec.text()


def _keys(name: str) -> str:
    scoped = " / ".join(f"`{s}_{schema.META_PREFIX}{name}`" for s in schema.SCOPES.values())
    return f"`{schema.META_PREFIX}{name}`; {scoped}"


def _env(name: str) -> str:
    scoped = " / ".join(f"`{schema.ENV_PREFIX}{s.upper()}_{name.upper()}`" for s in schema.SCOPES.values())
    return f"`{schema.ENV_PREFIX}{name.upper()}`; {scoped}"


def render() -> str:
    missing = [n for n in names() if n not in MEANINGS or n not in RANGES]
    extra = sorted((set(MEANINGS) | set(RANGES)) - set(names()))
    if missing or extra:
        raise SystemExit(f"settings_page.py is out of step with the schema: no meaning/range for {missing}, "
                         f"no such setting {extra}")
    out = [
        "# Settings reference",
        "",
        "<!-- Generated by docs/_tools/settings_page.py from lm_eval_mathjudge/settings/; do not edit by hand. -->",
        "",
        "Every judge setting, as the settings schema declares it. Where each value can come from, and which",
        "layer wins, is on [where settings come from](configuring.md). A value outside its range, of the wrong",
        "type, or under an unknown name stops the run before anything is generated.",
        "",
        "## Judge settings",
        "",
        "| name | type | default (GPT4-EM / VLM) | allowed | `--metadata` key; per judge | environment; per judge | meaning |",
        "|---|---|---|---|---|---|---|",
    ]
    row = lambda n: f"| `{n}` | {_type(n)} | {_default(n)} | {_range(n)} | {_keys(n)} | {_env(n)} | {MEANINGS[n]} |"
    out += [row(n) for n in schema.FIELDS]
    out += [
        "",
        "## How a task's judge is run",
        "",
        "These decide how a task is judged rather than which judge; they come from the same layers, with the",
        "same names and scopes. Give lists in `--metadata` (JSON) or as a JSON string in the environment.",
        "",
        "| name | type | default | allowed | `--metadata` key; per judge | environment; per judge | meaning |",
        "|---|---|---|---|---|---|---|",
    ]
    out += [row(n) for n in schema.RUN_OPTIONS]
    out += [
        "",
        "## Defaults per judge and backend",
        "",
        "A (judge, backend) pair that is not in this table cannot run and is refused when the tasks load.",
        "",
        "| judge | backend | `model` | `max_tokens` |",
        "|---|---|---|---:|",
    ]
    for (judge, backend), row_ in models.DEFAULTS.items():
        out.append(f"| {JUDGES[judge]} | `{backend}` | `{row_['model']}` | {row_['max_tokens']:,} |")
    out += [
        "",
        f"A judge model of an OpenAI reasoning family (`o1`, `o3`, `o4-mini`, `gpt-5`, ...) gets `max_tokens` "
        f"{models.REASONING_MAX_TOKENS:,}",
        "unless a layer sets it: such models spend hidden reasoning tokens before the verdict.",
        "",
        "## Other environment variables",
        "",
        "Not settings, read elsewhere: "
        + ", ".join(f"`{v}`" for v in schema.OTHER_ENV)
        + " ([offline data](offline-data.md), [task discovery](getting-started.md#how-lm_eval-finds-the-tasks)).",
        "Any other `MATHJUDGE_*` variable is an error.",
        "",
    ]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE.relative_to(REPO)} is out of date: run python docs/_tools/settings_page.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
