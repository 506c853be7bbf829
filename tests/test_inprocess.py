"""The in-process lm_eval runner (tests/inprocess.py) starts each run as a new process would."""

from __future__ import annotations

import ast

from tests.conftest import REPO
from tests.inprocess import PROCESS_STATE

_EMPTY_CALLS = {"set", "dict", "list", "weakref.WeakSet", "weakref.WeakValueDictionary", "weakref.WeakKeyDictionary",
                "_State", "Counter", "deque"}


def _module_state() -> set[tuple[str, str]]:
    """Every name bound at module level to an empty container (or a fresh state object)."""
    found = set()
    for path in (REPO / "lm_eval_mathjudge").rglob("*.py"):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.parse(path.read_text()).body:
            target, value = ((node.targets[0], node.value) if isinstance(node, ast.Assign)
                             else (node.target, node.value) if isinstance(node, ast.AnnAssign) else (None, None))
            if not isinstance(target, ast.Name) or value is None:
                continue
            empty = (isinstance(value, (ast.Dict, ast.List, ast.Set)) and not getattr(value, "keys", None)
                     and not getattr(value, "elts", None))
            fresh = isinstance(value, ast.Call) and ast.unparse(value.func) in _EMPTY_CALLS and not value.args
            if empty or fresh:
                found.add((module, target.id))
    return found


def test_every_process_wide_state_of_the_plugin_is_reset_between_runs():
    missing = _module_state() - set(PROCESS_STATE)
    assert not missing, f"add these to tests/inprocess.py PROCESS_STATE (and reset them there): {sorted(missing)}"


def test_the_state_list_names_real_module_state():
    import importlib

    for module, name in PROCESS_STATE:
        assert hasattr(importlib.import_module(module), name), (module, name)
