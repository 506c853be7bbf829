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
import json
import math
import os
from typing import Any, Iterable, Mapping

from ..core import jsontext
from ..core.errors import ConfigError, did_you_mean
from ..core.jsontext import shown
from .credentials import looks_like_credential, refuse_credentials, refused_name
from .models import DEFAULT_BACKEND, DEFAULTS, model_defaults
from .schema import (BACKENDS, ENV_PREFIX, FIELDS, META_PREFIX, OTHER_ENV, RUN_OPTIONS, SCOPES, TYPES, JudgeSettings,
                     RunOptions)

# Settings an earlier release had, and what stands in their place: named as retired, not just unknown.
RETIRED = {"dedupe": "equivalent final answers no longer share one verdict; every sample is judged on its own, "
                     "and identical requests are still sent once"}
NEAR_MISS = 0.85  # how alike (difflib's ratio) an unknown metadata key must be to one of ours to be taken for a typo
# Names that are settings, never secrets (max_tokens contains "token"), as each layer spells them.
_SETTING_NAMES = frozenset(FIELDS) | {META_PREFIX + n for n in FIELDS} | {
    f"{scope}_{META_PREFIX}{n}" for scope in SCOPES.values() for n in FIELDS}


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
    for name in RUN_OPTIONS:  # resolved by resolve_run_options
        merged.pop(name, None)
    backend = str(merged.get("backend", DEFAULT_BACKEND[judge]))
    if backend in BACKENDS and (judge, backend) not in DEFAULTS:
        raise ConfigError(f"the {judge} judge cannot run on the {backend} backend (the local judge only "
                          "speaks the exact-match contract); choose gemini, openai or azure")
    values = model_defaults(judge, backend, {k: _coerce(k, v) for k, v in merged.items()})
    values.setdefault("backend", backend)
    return JudgeSettings(**values)


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
            values["panel_min"] = to_int(merged["panel_min"])
        except (TypeError, ValueError):
            raise ConfigError(f"judge setting panel_min={shown(merged['panel_min'])} is not a valid int") from None
    for name in ("cascade", "audit", "stream", "counterfactual"):
        if merged.get(name) is not None:
            try:
                values[name] = to_bool(merged[name])
            except ValueError:
                raise ConfigError(f"judge setting {name}={shown(merged[name])} is not a valid bool "
                                  "(true/false)") from None
    if merged.get("audit_limit") not in (None, ""):
        try:
            values["audit_limit"] = to_int(merged["audit_limit"])
        except (TypeError, ValueError):
            raise ConfigError(f"judge setting audit_limit={shown(merged['audit_limit'])} is not a valid int") from None
    if merged.get("media_dirs") not in (None, "", [], ()):
        values["media_dirs"] = _media_dirs(merged["media_dirs"])
    if merged.get("pass_at") not in (None, "", [], ()):
        values["pass_at"] = _pass_at(merged["pass_at"])
    options = RunOptions(**values)
    if options.cascade and judge != "exact_match":
        raise ConfigError(f"judge_cascade works with the exact-match judge only (the {judge} judge has no rule "
                          "stage); remove it for this task")
    return options


def _pass_at(value: Any) -> tuple[int, ...]:
    """``[1, 4, 16]``, ``4`` or ``"1,4,16"`` (an environment variable or a --model_args string)."""
    items = value.replace(",", " ").split() if isinstance(value, str) else value if isinstance(value, list) else [value]
    try:
        return tuple(sorted({to_int(item) for item in items}))
    except (TypeError, ValueError):
        raise ConfigError(f"judge setting pass_at={shown(value)} must be whole numbers such as [1, 4, 16] "
                          "(the k' of pass@k')") from None


def _panel_members(value: Any) -> tuple[dict[str, Any], ...]:
    if isinstance(value, str):  # from an environment variable or a --model_args string
        try:
            value = jsontext.loads(value)
        except ValueError:
            raise ConfigError(f"judge setting panel={shown(value)} is not JSON; give a list of objects, e.g. "
                              '[{"backend": "local"}, {"backend": "openai", "model": "gpt-4o-2024-08-06"}]') from None
    if not isinstance(value, (list, tuple)) or not all(isinstance(m, Mapping) for m in value):
        raise ConfigError("judge setting panel must be a list of objects, one per member, each holding that "
                          'member\'s judge settings, e.g. [{"backend": "local"}, {"backend": "openai"}]')
    members = []
    for i, member in enumerate(value, 1):
        where = f"judge_panel member {i}"
        unknown = [k for k in member if k not in FIELDS]
        if unknown:
            _check_names({k: None for k in unknown if k not in RUN_OPTIONS}, where)
            raise ConfigError(f"{where} sets {', '.join(unknown)}: a member holds judge settings only "
                              "(panels do not nest, and rule/min/cascade belong to the whole run)")
        _refuse(member, where)
        members.append(dict(member))
    return tuple(members)


def _media_dirs(value: Any) -> tuple[str, ...]:
    """Folders from a list, a JSON list or an ``os.pathsep``-separated string; each must exist."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = jsontext.loads(text) if text.startswith("[") else text.split(os.pathsep)
        except ValueError:
            value = None  # refused just below
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError("judge setting media_dirs must be a list of folders (or one string of folders separated "
                          f"by {os.pathsep!r}), e.g. [\"/data/renders\"]")
    dirs = []
    for entry in (v.strip() for v in value):
        if not entry:
            continue
        if "\x00" in entry:
            raise ConfigError(f"judge setting media_dirs names {shown(entry)}, which holds a NUL character; give "
                              "the folders your generated images and videos are in")
        path = os.path.realpath(os.path.expanduser(entry))
        if not os.path.isdir(path):
            raise ConfigError(f"judge setting media_dirs names {shown(entry)}, which is not a folder; give the folders "
                              "your generated images and videos are in")
        dirs.append(path)
    return tuple(dict.fromkeys(dirs))


def _env_prefixes(judge: str) -> list[str]:
    return [ENV_PREFIX, f"{ENV_PREFIX}{SCOPES[judge].upper()}_"]  # generic first: scoped wins


def _from_env(environ: Mapping[str, str], judge: str) -> dict[str, Any]:
    every = [p for j in SCOPES for p in _env_prefixes(j)]
    known = {p + name.upper() for p in every for name in (*FIELDS, *RUN_OPTIONS)} | set(OTHER_ENV)
    unknown = sorted(v for v in environ if v.startswith(ENV_PREFIX) and v not in known)
    retired = [v for v in unknown if _env_setting(v) in RETIRED]
    if retired:
        raise ConfigError(f"unknown environment variable {retired[0]}: judge_{_env_setting(retired[0])} was retired "
                          f"({RETIRED[_env_setting(retired[0])]}); unset it")
    if unknown:
        hint = "".join(did_you_mean(v, sorted(known)) for v in unknown[:1])
        raise ConfigError(f"unknown environment variable {', '.join(unknown)}{hint}: judge settings are MATHJUDGE_<NAME> "
                          f"or MATHJUDGE_<GPT4EM|VLM>_<NAME> with NAME one of {', '.join(FIELDS).upper()} "
                          f"(other variables: {', '.join(OTHER_ENV)}); fix the spelling or unset it")
    return {name: environ[p + name.upper()] for p in _env_prefixes(judge) for name in FIELDS
            if environ.get(p + name.upper(), "") != ""}


def _env_setting(variable: str) -> str:
    """The setting a ``MATHJUDGE_[GPT4EM_|VLM_]NAME`` variable names: ``name``."""
    prefixes = sorted({p for j in SCOPES for p in _env_prefixes(j)}, key=len, reverse=True)
    return next(variable[len(p):] for p in prefixes if variable.startswith(p)).lower()


def _from_metadata(metadata: Mapping[str, Any], judge: str) -> dict[str, Any]:
    _refuse(metadata, "--metadata/--model_args")
    found: dict[str, Any] = {}
    for prefix in [META_PREFIX] + [f"{scope}_{META_PREFIX}" for scope in SCOPES.values()]:
        values = {k[len(prefix):]: v for k, v in metadata.items() if k.startswith(prefix)}
        _check_names(values, "--metadata", prefix=prefix)  # every judge's keys, to catch typos early
        if prefix in (META_PREFIX, f"{SCOPES[judge]}_{META_PREFIX}"):
            found.update(values)  # generic first, then this judge's own
    return found


def metadata_keys(also: Iterable[str] = ()) -> frozenset[str]:
    """Every metadata key a judged task reads: each setting and run option under each of its prefixes, and ``also``."""
    names = (*FIELDS, *RUN_OPTIONS)
    prefixes = [META_PREFIX, *(f"{scope}_{META_PREFIX}" for scope in SCOPES.values())]
    return frozenset({p + n for p in prefixes for n in names} | set(also))


def check_near_misses(metadata: Mapping[str, Any] | None, known: frozenset[str], ignore: Iterable[str] = ()) -> None:
    """A metadata key no judged task reads, but close to one it does (``repeat`` for ``repeats``, ``judgebackend``,
    ``gpt4_judge_model``): a typo that would run silently on a default, so the run stops before generation.

    lm-eval gives every task the whole metadata, the model's arguments merged in, so any other key is left
    alone: another task's, a model argument (``ignore``), and a bare setting name (``timeout``, ``model``), which
    model adapters take too.
    """
    bare = {*FIELDS, *RUN_OPTIONS, *ignore}
    for key in metadata or {}:
        if not isinstance(key, str) or key in known or key in bare:
            continue
        close = difflib.get_close_matches(key.lower(), sorted(known), n=1, cutoff=NEAR_MISS)
        if close:
            raise ConfigError(f"the metadata key {key} (from --metadata, --model_args or the task YAML) is read by no "
                              f"task of this plugin{did_you_mean(close[0], close)}; fix its spelling. Nothing was "
                              "generated")


def _check_names(values: dict[str, Any], where: str, prefix: str = "") -> dict[str, Any]:
    for name in values:
        if name in FIELDS or name in RUN_OPTIONS:  # known settings are never secrets (max_tokens contains "token")
            continue
        if looks_like_credential(name):
            raise ConfigError(refused_name(where, prefix + name))
        if name in RETIRED:
            raise ConfigError(f"{where} sets unknown judge setting {prefix}{name}: judge_{name} was retired "
                              f"({RETIRED[name]}); remove it")
        raise ConfigError(f"{where} sets unknown judge setting {prefix}{name}"
                          f"{did_you_mean(name, [*FIELDS, *RUN_OPTIONS], prefix)}; known: "
                          + ", ".join(prefix + f for f in FIELDS))
    return values


def _refuse(values: Mapping[str, Any], where: str) -> None:
    refuse_credentials(values, where, known=_SETTING_NAMES)


# ---------------------------------------------------------------------- coercion
def _coerce(name: str, value: Any) -> Any:
    kind, optional = TYPES[name]
    if value is None:
        if optional:
            return None
        raise ConfigError(f"judge setting {name} has no value; give a {kind.__name__} or remove the key")
    try:
        if kind is bool:
            return to_bool(value)
        if kind is int:
            return to_int(value)
        if kind is float:
            return to_float(value)
        if name == "prices" and isinstance(value, Mapping):  # an object in --metadata or YAML: keep it as JSON
            return json.dumps(value, sort_keys=True)
        if isinstance(value, (dict, list, tuple, set)):
            raise TypeError(value)
        return str(value).strip()
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"judge setting {name}={shown(value)} is not a valid {kind.__name__}") from exc


def to_bool(value: Any) -> bool:
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


def to_int(value: Any) -> int:
    if isinstance(value, bool):  # True is an int in Python, never a count
        raise TypeError(value)
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(value)  # concurrency 2.7 is a mistake, not 2
        return int(value)
    if isinstance(value, int):
        return value
    return int(str(value).strip())


def to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise TypeError(value)
    try:
        number = float(value if isinstance(value, (int, float)) else str(value).strip())
    except OverflowError:  # an int beyond any float: no setting means that
        raise ValueError(value) from None
    if not math.isfinite(number):
        raise ValueError(value)  # nan/inf: every call would fail after generation
    return number
