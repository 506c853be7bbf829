"""lm-eval's own errors about what a user typed for this plugin, said as ours: one clean block, not a traceback.

The start-up hook's error report (``_startup.report``) sees every error that ends ``lm_eval``. Two
errors of lm-eval 0.4.13 come from a command line meant for this plugin and end in a traceback without
a hint; ``translated`` turns them into a ``ConfigError`` (the report's clean block, exit status 2):

* ``ValueError: Tasks not found: A, B`` (``config/evaluate_config.py``), when a missing name is a near
  miss of one of our task names (``gsm8k_gpt4eem``): "did you mean gsm8k_gpt4em?". A name close to none
  of ours is lm-eval's business and keeps lm-eval's own report.
* ``ValueError: Invalid JSON: ...`` (``_cli/utils.py``, ``try_parse_json``), for ``--metadata``,
  ``--model_args`` or ``--gen_kwargs``: the option, where the JSON breaks, and how to quote it.

Only an error raised inside lm-eval itself is translated; nothing of lm-eval is patched for it.
"""

from __future__ import annotations

import json
import os
import re
from typing import Iterable, Sequence

from .errors import ConfigError, did_you_mean

_MISSING = re.compile(r"Tasks not found: (.+)")
_BAD_JSON = re.compile(r"Invalid JSON: (.*)\. Hint: Use double quotes for JSON strings\.", re.S)


def translated(exc: BaseException, tb, argv: Sequence[str], our_tasks: Iterable[str]) -> ConfigError | None:
    """Our clean error for lm-eval's error ``exc`` (raised inside lm-eval, ``tb``), or None to leave it be."""
    if type(exc) is not ValueError or not _raised_in_lm_eval(tb):
        return None
    text = str(exc)
    missing = _MISSING.fullmatch(text)
    if missing:
        return _missing_tasks([t.strip() for t in missing[1].split(",") if t.strip()], list(our_tasks))
    bad = _BAD_JSON.fullmatch(text)
    return _bad_json(bad[1], argv) if bad else None


def _raised_in_lm_eval(tb) -> bool:
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    parts = os.path.normpath(last.tb_frame.f_code.co_filename).split(os.sep) if last is not None else []
    return "lm_eval" in parts


def _missing_tasks(missing: list[str], ours: list[str]) -> ConfigError | None:
    hints = {name: did_you_mean(name, ours) for name in missing}
    if not any(hints.values()):
        return None
    named = "; ".join(f"{name}{hint}" for name, hint in hints.items())
    return ConfigError(f"lm_eval does not know the task(s) {named}. `lm_eval ls tasks` lists every task; "
                       "`mathjudge tasks-dir` prints the folder of this plugin's tasks")


def _bad_json(value: str, argv: Sequence[str]) -> ConfigError:
    option = _option_of(value, argv)
    try:
        json.loads(value)
        where = ""
    except json.JSONDecodeError as exc:
        where = f" ({exc.msg} at character {exc.pos + 1}: {value[max(0, exc.pos - 10):exc.pos + 10]!r})"
    return ConfigError(f"{option} is not valid JSON{where}: {value}. Write every string in double quotes and the "
                       "whole object in single quotes for the shell, e.g. "
                       f"{option} '{{\"judge_backend\": \"local\"}}'")


def _option_of(value: str, argv: Sequence[str]) -> str:
    """The option the value was given to (``--metadata VALUE`` or ``--metadata=VALUE``)."""
    for i, arg in enumerate(argv):
        if arg == value and i > 0 and argv[i - 1].startswith("--"):
            return argv[i - 1]
        if arg.startswith("--") and arg.partition("=")[2] == value:
            return arg.partition("=")[0]
    return "an option given as JSON"
