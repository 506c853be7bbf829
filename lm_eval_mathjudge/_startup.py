"""What the start-up hook (``lm_eval_mathjudge_hook``, imported by the ``.pth`` file) does once
lm-eval has loaded one of the modules the plugin extends, and the clean report of our errors.

lm-eval 0.4.13 has no entry points for tasks, so after ``lm_eval.tasks.manager`` is loaded,
``TaskManager.__init__`` is wrapped to search our task folder first (a user's ``--include_path``
comes after it and can still override a task); a ``TaskManager(include_defaults=False, ...)`` is
left alone, since it asks for exactly the folders it names. After ``lm_eval.models`` is loaded, the
``mathjudge-replay`` model and the generator models (``generators.ADAPTERS``) are registered as lazy
entries, unless lm-eval already knows the name (its own entry-point discovery, once released, reads
the ``lm_eval.models`` and ``lm_eval.tasks`` entry points that ``pyproject.toml`` declares). Nothing
else of lm-eval is patched: lm-eval records a model's name from ``model=``, which our models read.

When one of our errors (``core.errors.MathJudgeError``) ends an ``lm_eval`` or ``mathjudge``
process, ``report`` prints one clean block (what went wrong, what to do, where) instead of the
traceback, and the process exits with the family's documented status (the table in
``core/errors.py``; a dry run exits 0). ``MATHJUDGE_DEBUG=1`` prints the traceback as well.

Set ``MATHJUDGE_NO_AUTOLOAD=1`` to switch the hook off; ``--include_path`` with the folder printed
by ``python -m lm_eval_mathjudge tasks-dir`` is the explicit fallback. Every step swallows its own
errors (logged at debug level): a broken plugin must never break lm-eval.
"""

import os
import sys

import lm_eval_mathjudge_hook as hook

OPT_OUT_ENV = hook.OPT_OUT_ENV
REPLAY_MODEL = "mathjudge-replay"  # the one definition; replay.py and recovery.py import it
_swallowed = hook._swallowed


def tasks_dir() -> str:
    """The folder holding the task YAMLs (inside the wheel, or the source tree)."""
    pkg = os.path.dirname(os.path.abspath(__file__))
    bundled = os.path.join(pkg, "task_configs")
    return bundled if os.path.isdir(bundled) else os.path.join(os.path.dirname(pkg), "task_configs")


def task_names() -> list[str]:
    """Our tasks and groups, by their YAML files (a file starting with ``_`` is a base others include)."""
    folder = tasks_dir()
    return sorted(name[:-5] for name in os.listdir(folder) if name.endswith(".yaml") and not name.startswith("_"))


def extend(module) -> None:
    """Add the plugin to the lm-eval module just loaded (one of ``hook.TARGETS``)."""
    _EXTENSIONS[module.__name__](module)


def _patch_task_manager(module) -> None:
    cls = module.TaskManager
    original = cls.__init__
    if getattr(original, "_mathjudge", False):
        return

    def __init__(self, *args, **kwargs):
        try:
            args, kwargs = _add_our_dir(args, kwargs)
        except Exception:  # never let the hook break lm-eval
            _swallowed("adding the task folder to TaskManager")
        original(self, *args, **kwargs)

    __init__._mathjudge = True  # type: ignore[attr-defined]
    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    cls.__init__ = __init__


def _add_our_dir(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Return (args, kwargs) with our folder first in include_path (2nd positional), unless the call
    leaves lm-eval's own tasks out (include_defaults=False, 3rd positional): it names its folders."""
    if (args[2] if len(args) > 2 else kwargs.get("include_defaults", True)) is False:
        return args, kwargs
    kwargs = dict(kwargs)
    if len(args) > 1:
        kwargs["include_path"], args = args[1], args[:1] + args[2:]
        if len(args) > 1:  # include_defaults/metadata given positionally too: keep them
            raise TypeError("positional call")
    kwargs["include_path"] = _with_our_dir(kwargs.get("include_path"))
    return args, kwargs


def _with_our_dir(include_path) -> list:
    ours = tasks_dir()
    if include_path is None:
        paths = []
    elif isinstance(include_path, (list, tuple)):
        paths = list(include_path)
    else:
        paths = [include_path]
    if any(os.path.abspath(str(p)) == ours for p in paths):
        return paths
    return [ours, *paths]


def _register_models(module) -> None:
    from lm_eval.api.registry import model_registry

    from .generators import ADAPTERS  # a table of names only: no SDK, no lm-eval

    for name, target in {REPLAY_MODEL: "lm_eval_mathjudge.harness.replay:ReplayLM", **ADAPTERS}.items():
        if name not in model_registry:
            model_registry.register(name, target=target)


_EXTENSIONS = {"lm_eval.tasks.manager": _patch_task_manager, "lm_eval.models": _register_models}


def report(exc_type, exc, tb, previous) -> None:
    """If ``exc`` is one of our errors ending one of our commands, print one clean block and end the
    process with the family's status; otherwise return (the caller hands it to ``previous``)."""
    from .calls.stop import command
    from .core import errors

    if command() == "lm_eval" and not isinstance(exc, errors.MathJudgeError):
        from .core.cli_input import translated

        exc = translated(exc, tb, sys.argv, task_names()) or exc  # lm-eval's error about input meant for us
    name = command() if isinstance(exc, errors.MathJudgeError) else None
    if name is None:
        return
    text, status = errors.clean_report(exc, tb, name), errors.exit_code(exc)
    if os.environ.get(errors.DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        previous(exc_type, exc, tb)
    try:
        sys.stdout.flush()
    except Exception:
        pass
    # The process ends here, so a hook that wrapped ours and buffers stderr to print it after ours
    # returns (torch.distributed prefixes each line with the rank) never prints: write to the real one.
    stream = sys.__stderr__ if sys.__stderr__ is not None else sys.stderr
    stream.write(text)
    stream.flush()
    raise SystemExit(status)  # from an excepthook: the interpreter exits with this status


def install() -> None:
    """The start-up hook, installed by hand (the .pth file does it at interpreter start)."""
    if os.environ.get(OPT_OUT_ENV, "").strip().lower() not in ("1", "true", "yes", "on"):
        hook.install()
