"""The commands that resume a run: its own ``lm_eval`` command with the replay model in place of its model.

``replay_args`` rewrites the run's arguments: the model's options go, ``--model mathjudge-replay
--model_args path=FILE`` come in; with ``fallback`` the run's own model stays behind the replay
(``fallback=MODEL,...``) for what the file lacks, with the options that shape its prompts. The
commands are shown with credentials redacted.
"""

from __future__ import annotations

import shlex
import sys

from .._startup import REPLAY_MODEL
from ..calls import stop
from ..core.redact import redact

# lm_eval options that describe the model; a replay does without them. name -> how many values follow
# ("+" = every value up to the next option, "?" = one value unless the next token is an option).
_MODEL_OPTIONS = {"--model": 1, "-M": 1, "--model_args": "+", "-a": "+", "--use_cache": 1, "-c": 1,
                  "--apply_chat_template": "?", "--fewshot_as_multiturn": 0}
_PROMPT_OPTIONS = ("--apply_chat_template", "--fewshot_as_multiturn")  # they shape the prompts a fallback model sees


def resume_command(path: str) -> str:
    """The command that judges the saved generations in ``path``: this lm_eval command with the replay
    model in place of the model (the ``mathjudge`` command itself, rerun, when that is what runs)."""
    args, running = sys.argv[1:], stop.command()
    if running == "lm_eval":
        return shell_command(replay_args(args, path))
    if running == "mathjudge":
        return f"the same command ({redact(shlex.join(['mathjudge', *args]))})"
    return f"--model {REPLAY_MODEL} --model_args path={path}"


def live_resume_command(path: str) -> str:
    """The command that resumes a run from its generations file whatever it holds: the replay model
    answers what the file holds and hands the rest to the run's own model (``fallback=``)."""
    args, running = sys.argv[1:], stop.command()
    if running == "lm_eval":
        return shell_command(replay_args(args, path, fallback=True))
    if running == "mathjudge":
        return f"the same command ({redact(shlex.join(['mathjudge', *args]))})"
    return f"--model {REPLAY_MODEL} --model_args path={path},fallback=MODEL,MODEL_ARGS"


def _fallback_args(args: list[str], path: str) -> str:
    """The replay model's arguments that resume from ``path`` with the run's own model for the rest (a run
    that was itself such a replay keeps its fallback and swaps the file)."""
    model = option_value(args, ("--model", "-M")) or "hf"
    given = ",".join(option_values(args, ("--model_args", "-a")))
    if model == REPLAY_MODEL:
        rest = [part for part in given.split(",") if part and not part.startswith("path=")]
        return ",".join([f"path={path}", *rest])
    return ",".join(part for part in (f"path={path}", f"fallback={model}", given) if part)


def replay_args(args: list[str], path: str, fallback: bool = False) -> list[str]:
    """``args`` of an lm_eval command with the model options replaced by the replay model's; with
    ``fallback`` the run's own model answers what the file lacks (its chat template options stay)."""
    kept, i = [], 0
    model_args = _fallback_args(args, path) if fallback else f"path={path}"
    while i < len(args):
        token = args[i]
        name, has_value = token.split("=", 1)[0], "=" in token
        arity = _MODEL_OPTIONS.get(name)
        i += 1
        if arity is None or (fallback and name in _PROMPT_OPTIONS):
            kept.append(token)
            if arity == "?" and not has_value and i < len(args) and not args[i].startswith("-"):
                kept.append(args[i])
                i += 1
            continue
        if has_value or arity == 0:
            continue
        if arity in (1, "?"):
            if i < len(args) and (arity == 1 or not args[i].startswith("-")):
                i += 1
            continue
        while i < len(args) and not args[i].startswith("-"):  # "+": every value up to the next option
            i += 1
    head = kept[:1] if kept[:1] == ["run"] else []  # lm_eval's subcommand stays first
    return [*head, "--model", REPLAY_MODEL, "--model_args", model_args, *kept[len(head):]]


def option_value(args: list[str], names: tuple[str, ...]) -> str | None:
    for i, token in enumerate(args):
        name, _, value = token.partition("=")
        if name in names:
            return value or (args[i + 1] if i + 1 < len(args) else "")
    return None


def option_values(args: list[str], names: tuple[str, ...]) -> list[str]:
    """Every value of an option that takes several (``--model_args a=1 b=2``, or ``--model_args=a=1``)."""
    for i, token in enumerate(args):
        name, equals, value = token.partition("=")
        if name in names:
            if equals:
                return [value]
            values = []
            for more in args[i + 1:]:
                if more.startswith("-"):
                    break
                values.append(more)
            return values
    return []


def model_arg_names(args: list[str] | None = None) -> set[str]:
    """The names this command gives the model in ``--model_args`` (lm-eval merges them into every task's metadata)."""
    given = ",".join(option_values(sys.argv[1:] if args is None else args, ("--model_args", "-a")))
    return {part.split("=", 1)[0].strip() for part in given.split(",") if "=" in part}


def shell_command(args: list[str]) -> str:
    return redact(shlex.join(["lm_eval", *args]))
