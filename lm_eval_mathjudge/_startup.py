"""Start-up hook: lets plain ``lm_eval`` find this plugin's tasks and models.

lm-eval 0.4.13 has no plugin entry points for tasks, so the wheel ships a
``.pth`` file that calls :func:`install` at interpreter start. ``install`` only
appends a finder to ``sys.meta_path`` (microseconds); nothing of lm-eval is
imported here. When lm-eval itself later imports ``lm_eval.tasks.manager`` or
``lm_eval.models``, the finder runs the real module and then

* wraps ``TaskManager.__init__`` so our task folder is searched first (a
  user's ``--include_path`` comes after it and can still override a task);
* registers the ``mathjudge-replay`` model and the generator models
  (``generators.ADAPTERS``) as lazy registry entries;
* lets ``--model_args name=NAME`` of those models set the model name lm-eval records
  (``GeneralConfigTracker.log_experiment_args``; lm-eval takes it from ``path=``/``model=``
  otherwise), so reports show NAME instead of a file name.

It also wraps ``sys.excepthook``: when one of our errors (``core.errors.MathJudgeError``) ends
an ``lm_eval`` or ``mathjudge`` process, one clean block (what went wrong, what to do, where)
replaces the traceback and the process exits with the family's documented status (the table in
``core/errors.py``; a dry run exits 0). ``MATHJUDGE_DEBUG=1`` prints the traceback as well. Every
other exception, and every other program, goes to the hook that was there before.

Set ``MATHJUDGE_NO_AUTOLOAD=1`` to switch this off; ``--include_path`` with
the folder printed by ``python -m lm_eval_mathjudge tasks-dir`` is the
explicit fallback. Every step swallows its own errors: a broken plugin must
never break the interpreter or lm-eval. What it swallowed is logged at debug
level (``logging`` is imported only then, to keep interpreter start cheap).
"""

import os
import sys

OPT_OUT_ENV = "MATHJUDGE_NO_AUTOLOAD"
REPLAY_MODEL = "mathjudge-replay"  # the one definition; replay.py and recovery.py import it
NAME_ARG = "name"  # --model_args name=...: the model name the results record (our models only)
_TARGETS = ("lm_eval.tasks.manager", "lm_eval.models", "lm_eval.loggers.evaluation_tracker")


def _swallowed(step: str) -> None:
    """Log the exception being handled at debug level, never raising."""
    try:
        import logging

        logging.getLogger("lm_eval_mathjudge._startup").debug("start-up hook: %s failed", step, exc_info=True)
    except Exception:
        pass


def tasks_dir() -> str:
    """The folder holding the task YAMLs (inside the wheel, or the source tree)."""
    pkg = os.path.dirname(os.path.abspath(__file__))
    bundled = os.path.join(pkg, "task_configs")
    return bundled if os.path.isdir(bundled) else os.path.join(os.path.dirname(pkg), "task_configs")


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
    """Return (args, kwargs) with our folder first in include_path (2nd positional)."""
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


def _our_models() -> set[str]:
    from .generators import ADAPTERS

    return {REPLAY_MODEL, *ADAPTERS}


def named_model(model_source, model_args) -> str | None:
    """The ``name=`` model arg of one of our models (a string as lm-eval takes it, or a dict), else None."""
    if model_source not in _our_models():
        return None
    if isinstance(model_args, str):
        model_args = dict(part.split("=", 1) for part in model_args.split(",") if "=" in part)
    name = model_args.get(NAME_ARG) if isinstance(model_args, dict) else None
    if name is None:
        return None
    return str(name).strip() or None


def _patch_tracker(module) -> None:
    cls = module.GeneralConfigTracker
    original = cls.log_experiment_args
    if getattr(original, "_mathjudge", False):
        return

    def log_experiment_args(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        try:
            name = named_model(kwargs.get("model_source", args[0] if args else None),
                               kwargs.get("model_args", args[1] if len(args) > 1 else None))
            if name:
                from lm_eval.utils import sanitize_model_name

                self.model_name, self.model_name_sanitized = name, sanitize_model_name(name)
        except Exception:
            _swallowed("naming the model")
        return result

    log_experiment_args._mathjudge = True  # type: ignore[attr-defined]
    log_experiment_args.__wrapped__ = original  # type: ignore[attr-defined]
    cls.log_experiment_args = log_experiment_args


_PATCHES = {"lm_eval.tasks.manager": _patch_task_manager, "lm_eval.models": _register_models,
            "lm_eval.loggers.evaluation_tracker": _patch_tracker}


class _ErrorHook:
    """``sys.excepthook`` for our errors in our commands; anything else goes to ``previous``."""

    def __init__(self, previous):
        self.previous = previous

    def __call__(self, exc_type, exc, tb):
        errors = sys.modules.get("lm_eval_mathjudge.core.errors")  # not imported: the error cannot be ours
        report = None
        if errors is not None and isinstance(exc, errors.MathJudgeError):
            try:
                from .calls.stop import command

                name = command()
                if name is not None:
                    report = (errors.clean_report(exc, tb, name), errors.exit_code(exc))
            except Exception:
                _swallowed("reporting an error")
        if report is None:
            return self.previous(exc_type, exc, tb)
        if os.environ.get(errors.DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
            self.previous(exc_type, exc, tb)
        try:
            sys.stdout.flush()
        except Exception:
            pass
        # The process ends here, so a hook that wrapped ours and buffers stderr to print it after ours
        # returns (torch.distributed prefixes each line with the rank) never prints: write to the real one.
        stream = sys.__stderr__ if sys.__stderr__ is not None else sys.stderr
        stream.write(report[0])
        stream.flush()
        raise SystemExit(report[1])  # from an excepthook: the interpreter exits with this status


def _install_error_hook() -> None:
    if not isinstance(sys.excepthook, _ErrorHook):
        sys.excepthook = _ErrorHook(sys.excepthook)


class _PatchingLoader:
    """Runs the real loader, then our patch. Duck-typed: importlib.abc costs ~25 ms to import."""

    def __init__(self, inner, patch):
        self._inner = inner
        self._patch = patch

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        try:
            self._patch(module)
        except Exception:
            _swallowed(f"patching {module.__name__}")


class _Finder:
    """A meta path finder that only answers for the modules we patch."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _PATCHES:
            return None
        import importlib.machinery  # only now: importlib's package import is not free at start-up

        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchingLoader(spec.loader, _PATCHES[fullname])
        return spec


def install() -> None:
    """Called from the .pth file at interpreter start; idempotent and silent."""
    if os.environ.get(OPT_OUT_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        return
    _install_error_hook()
    if any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    for name in _TARGETS:  # already imported (hook installed late): patch in place
        if name in sys.modules:
            try:
                _PATCHES[name](sys.modules[name])
            except Exception:
                _swallowed(f"patching {name}")
    sys.meta_path.insert(0, _Finder())
