"""Where judge settings come from: four layers merged, every value coerced to its type, unknown names refused.

Precedence, lowest to highest (README, "Settings"):

1. built-in defaults of the (judge, backend) pair (``models.DEFAULTS``);
2. the task YAML's ``mathjudge.settings`` block;
3. ``MATHJUDGE_<NAME>`` environment variables;
4. ``judge_<name>`` keys of ``--metadata`` (or ``--model_args``, which lm-eval
   merges into metadata; ``--metadata`` wins there);

and a judge-panel member's own settings above all four. Within layers 3 and 4
a judge-scoped name (``MATHJUDGE_VLM_MODEL``, ``vlm_judge_model``; scopes
``gpt4em`` and ``vlm``) beats the generic one, so one run can give the two
judges different backends.

Every value is converted to its field's type here and checked by the schema
(finite, in range, non-empty) before anything runs; an unknown ``MATHJUDGE_*``
variable or ``judge_*`` key is an error, so a typo never silently falls back to
a default. A name or URL that carries a credential is refused (``credentials.py``).
"""

from __future__ import annotations

import difflib
import os
from typing import Any, Iterable, Mapping

from .. import vendors
from ..core.errors import ConfigError, did_you_mean
from .credentials import looks_like_credential, refuse_credentials, refused_name
from .models import DEFAULT_BACKEND, DEFAULTS, model_defaults
from .schema import (BACKENDS, ENV_PREFIX, OTHER_ENV, RETIRED, SETTING, SETTINGS, JudgeSettings, RunOptions,
                     spellings)

NEAR_MISS = 0.85  # how alike (difflib's ratio) an unknown metadata key must be to one of ours to be taken for a typo
NAMES = tuple(SETTING)  # every setting and run option, in table order
_MEMBER_NAMES = tuple(s.name for s in SETTINGS if "member" in s.layers)
# Names that are settings, never secrets (max_tokens contains "token"), as each layer spells them.
_SETTING_NAMES = frozenset(n for name in NAMES for layer in ("yaml", "metadata") for n in spellings(name, layer))


def resolve_settings(judge: str, yaml_settings: Mapping[str, Any] | None,
                     metadata: Mapping[str, Any] | None,
                     environ: Mapping[str, str] | None = None,
                     overrides: Mapping[str, Any] | None = None) -> JudgeSettings:
    """Merge the four layers into a validated JudgeSettings.

    ``overrides`` (one judge-panel member's own settings) sit above every layer.
    """
    environ = os.environ if environ is None else environ
    yaml_layer = _check_names(dict(yaml_settings or {}), "the task YAML's mathjudge.settings")
    _refuse(yaml_layer, "the task YAML's mathjudge.settings")
    merged: dict[str, Any] = {}
    for layer in (yaml_layer, _from_env(environ, judge), _from_metadata(metadata or {}, judge), overrides or {}):
        merged.update(layer)
    for name in NAMES:
        if name not in _MEMBER_NAMES:  # resolved by resolve_run_options
            merged.pop(name, None)
    backend = str(merged.get("backend", DEFAULT_BACKEND[judge]))
    if backend in BACKENDS and (judge, backend) not in DEFAULTS:
        raise ConfigError(f"the {judge} judge cannot run on the {backend} backend (the local judge only "
                          f"speaks the exact-match contract); choose {vendors.listed(vendors.names(judge))}")
    values = model_defaults(judge, backend, {k: _coerce(k, v) for k, v in merged.items()})
    values.setdefault("backend", backend)
    return JudgeSettings(**values)


def resolve_run_options(judge: str, yaml_settings: Mapping[str, Any] | None, metadata: Mapping[str, Any] | None,
                        environ: Mapping[str, str] | None = None) -> RunOptions:
    """The panel/cascade options, from the same layers and with the same precedence as the settings:
    ``mathjudge.settings`` in the YAML, ``MATHJUDGE_[GPT4EM_|VLM_]PANEL...``, ``[gpt4em_|vlm_]judge_panel...``.
    An option left empty (``null``, ``""``) keeps its default."""
    environ = os.environ if environ is None else environ
    names = [n for n in NAMES if n not in _MEMBER_NAMES]
    merged: dict[str, Any] = {k: v for k, v in (yaml_settings or {}).items() if k in names}
    for name in names:
        for key in spellings(name, "env", judge):  # generic first, then this judge's own
            if environ.get(key, "") != "":
                merged[name] = environ[key]
    for name in names:
        for key in spellings(name, "metadata", judge):
            if key in (metadata or {}):
                merged[name] = (metadata or {})[key]
    values = {k: SETTING[k].read(v) for k, v in merged.items() if v is not None and v != ""}
    if "panel" in values:
        values["panel"] = _panel_members(values["panel"])
    options = RunOptions(**values)
    if options.cascade and judge != "exact_match":
        raise ConfigError(f"judge_cascade works with the exact-match judge only (the {judge} judge has no rule "
                          "stage); remove it for this task")
    return options


def _panel_members(members: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
    """Each member holds judge settings only, under their plain names, and no credential."""
    for i, member in enumerate(members, 1):
        where = f"judge_panel member {i}"
        unknown = [k for k in member if k not in _MEMBER_NAMES]
        if unknown:
            _check_names({k: None for k in unknown if k not in SETTING}, where, names=_MEMBER_NAMES)
            raise ConfigError(f"{where} sets {', '.join(unknown)}: a member holds judge settings only "
                              "(panels do not nest, and rule/min/cascade belong to the whole run)")
        _refuse(member, where)
    return members


def _from_env(environ: Mapping[str, str], judge: str) -> dict[str, Any]:
    known = {key for name in NAMES for key in spellings(name, "env")} | set(OTHER_ENV)
    unknown = sorted(v for v in environ if v.startswith(ENV_PREFIX) and v not in known)
    retired = [(v, name) for name in RETIRED for v in spellings(name, "env") if v in unknown]
    if retired:
        variable, name = retired[0]
        raise ConfigError(f"unknown environment variable {variable}: judge_{name} was retired ({RETIRED[name]}); unset it")
    if unknown:
        hint = "".join(did_you_mean(v, sorted(known)) for v in unknown[:1])
        raise ConfigError(f"unknown environment variable {', '.join(unknown)}{hint}: judge settings are MATHJUDGE_<NAME> "
                          f"or MATHJUDGE_<GPT4EM|VLM>_<NAME> with NAME one of {', '.join(_MEMBER_NAMES).upper()} "
                          f"(other variables: {', '.join(OTHER_ENV)}); fix the spelling or unset it")
    return {name: environ[key] for name in _MEMBER_NAMES for key in spellings(name, "env", judge)
            if environ.get(key, "") != ""}


def _from_metadata(metadata: Mapping[str, Any], judge: str) -> dict[str, Any]:
    _refuse(metadata, "--metadata/--model_args")
    found: dict[str, Any] = {}
    for prefix in spellings("", "metadata"):  # judge_, then each judge's own: gpt4em_judge_, vlm_judge_
        values = {k[len(prefix):]: v for k, v in metadata.items() if k.startswith(prefix)}
        _check_names(values, "--metadata", prefix=prefix)  # every judge's keys, to catch typos early
        if prefix in spellings("", "metadata", judge):
            found.update(values)  # generic first, then this judge's own
    return found


def metadata_keys(also: Iterable[str] = ()) -> frozenset[str]:
    """Every metadata key a judged task reads: each setting and run option under each of its prefixes, and ``also``."""
    return frozenset({key for name in NAMES for key in spellings(name, "metadata")} | set(also))


def check_near_misses(metadata: Mapping[str, Any] | None, known: frozenset[str], ignore: Iterable[str] = ()) -> None:
    """A metadata key no judged task reads, but close to one it does (``repeat`` for ``repeats``, ``judgebackend``,
    ``gpt4_judge_model``): a typo that would run silently on a default, so the run stops before generation.

    lm-eval gives every task the whole metadata, the model's arguments merged in, so any other key is left
    alone: another task's, a model argument (``ignore``), and a bare setting name (``timeout``, ``model``), which
    model adapters take too.
    """
    bare = {*NAMES, *ignore}
    for key in metadata or {}:
        if not isinstance(key, str) or key in known or key in bare:
            continue
        close = difflib.get_close_matches(key.lower(), sorted(known), n=1, cutoff=NEAR_MISS)
        if close:
            raise ConfigError(f"the metadata key {key} (from --metadata, --model_args or the task YAML) is read by no "
                              f"task of this plugin{did_you_mean(close[0], close)}; fix its spelling. Nothing was "
                              "generated")


def _check_names(values: dict[str, Any], where: str, prefix: str = "", names: tuple[str, ...] = NAMES) -> dict[str, Any]:
    """Refuse a name that is not a setting of this layer, with the nearest ones (``names``) as "did you mean"."""
    for name in values:
        if name in names:  # known settings are never secrets (max_tokens contains "token")
            continue
        if looks_like_credential(name):
            raise ConfigError(refused_name(where, prefix + name))
        if name in RETIRED:
            raise ConfigError(f"{where} sets unknown judge setting {prefix}{name}: judge_{name} was retired "
                              f"({RETIRED[name]}); remove it")
        raise ConfigError(f"{where} sets unknown judge setting {prefix}{name}"
                          f"{did_you_mean(name, names, prefix)}; known: "
                          + ", ".join(prefix + n for n in _MEMBER_NAMES))
    return values


def _refuse(values: Mapping[str, Any], where: str) -> None:
    refuse_credentials(values, where, known=_SETTING_NAMES)


def _coerce(name: str, value: Any) -> Any:
    """A judge setting's value, as a layer gave it, converted to its type (the schema checks its range)."""
    row = SETTING[name]
    if value is None:
        if row.optional:
            return None
        raise ConfigError(f"judge setting {name} has no value; give a {row.kind.py.__name__} or remove the key")
    return row.read(value)
