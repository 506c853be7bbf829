"""The start-up hook of lm_eval_mathjudge: what the ``.pth`` file imports, and nothing else.

Every Python process of the environment imports this module, so it imports nothing (``sys`` is
already loaded) and only appends a finder to ``sys.meta_path`` and wraps ``sys.excepthook``. The
``.pth`` line checks ``MATHJUDGE_NO_AUTOLOAD`` before importing it, so the opt-out costs nothing.

* The finder answers only for the lm-eval modules the plugin extends (``TARGETS``): it hands the
  lookup on to the finders after it in ``sys.meta_path`` (so another plugin's finder, or an editable
  install's, still sees it), lets the found loader run the module, then lets
  ``lm_eval_mathjudge._startup`` add our task folder and models to what lm-eval just built.
* The exception hook hands every exception to the hook it replaced, except one of the plugin's own
  errors (``lm_eval_mathjudge.core.errors`` is then loaded) ending an ``lm_eval`` or ``mathjudge``
  process, or lm-eval's own ValueError about a near miss of our task names or a JSON option that does not
  parse (``core/cli_input.py``): ``_startup.report`` prints one clean block instead of the traceback.

Nothing here raises: a broken plugin must never break the interpreter.
"""

import sys

OPT_OUT_ENV = "MATHJUDGE_NO_AUTOLOAD"
TARGETS = ("lm_eval.tasks.manager", "lm_eval.models")
_ERRORS = "lm_eval_mathjudge.core.errors"


def _startup():
    import lm_eval_mathjudge._startup as startup  # the package loads only when lm-eval does

    return startup


class _Loader:
    """Runs the loader that was found, then our extension of the module. Duck-typed: importlib.abc
    costs milliseconds to import."""

    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        try:
            _startup().extend(module)
        except Exception:
            _swallowed("extending " + module.__name__)


class Finder:
    """A meta path finder for ``TARGETS`` only, that asks the finders after it."""

    def __init__(self):
        self._busy = set()  # modules being looked up by us: a finder after us may ask again

    def find_spec(self, fullname, path, target=None):
        if fullname not in TARGETS or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = self._next_spec(fullname, path, target)
        finally:
            self._busy.discard(fullname)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader)
        return spec

    def _next_spec(self, fullname, path, target):
        finders = list(sys.meta_path)
        after = finders[finders.index(self) + 1:] if self in finders else finders
        for finder in after:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                return spec
        return None


class ErrorHook:
    """``sys.excepthook`` wrapper: our errors in our commands get a clean report, the rest goes on."""

    def __init__(self, previous):
        self.previous = previous

    def __call__(self, exc_type, exc, tb):
        # otherwise the error cannot be ours, nor lm-eval's about input meant for us (a ValueError of lm_eval)
        if _ERRORS in sys.modules or (exc_type is ValueError and "lm_eval" in sys.modules):
            try:
                _startup().report(exc_type, exc, tb, self.previous)  # ends the process if it reports
            except SystemExit:
                raise
            except Exception:
                _swallowed("reporting an error")
        return self.previous(exc_type, exc, tb)


def _swallowed(step):
    try:
        import logging

        logging.getLogger("lm_eval_mathjudge._startup").debug("start-up hook: %s failed", step, exc_info=True)
    except Exception:
        pass


def install():
    """Called from the .pth file (after its opt-out check) or by hand; idempotent and silent."""
    if not isinstance(sys.excepthook, ErrorHook):
        sys.excepthook = ErrorHook(sys.excepthook)
    if not any(isinstance(f, Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, Finder())
    for name in TARGETS:  # installed late, after lm-eval was imported: extend what is there
        if name in sys.modules:
            try:
                _startup().extend(sys.modules[name])
            except Exception:
                _swallowed("extending " + name)
