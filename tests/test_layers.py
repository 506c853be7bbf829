"""The package's rooms and the one way imports go between them (docs: Development, "Layers").

Every import of the package is read from the source (module level and inside functions, so a
lazy import counts like any other): an import may only point to its own room or to a room
below it in ``LAYERS``, never up and never in a circle, and only ``backends/`` and
``generators/`` may import a vendor SDK.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGE = "lm_eval_mathjudge"
# Top to bottom. A room is a sub-package or a top-level module; one room may import only rooms below it.
LAYERS = (
    "__init__",  # the public API: it may import every room, and no room imports it
    "api",
    "__main__",
    "reports",
    "harness",
    "_startup",
    "audit",
    "generators",
    "judging",
    "cost",
    "backends",
    "batch",
    "calls",
    "settings",
    "compat",
    "core",
    "vendors",  # the vendor records: data only, below everything that reads them
)
SDKS = ("openai", "anthropic", "google.genai", "google.auth", "google.api_core", "httpx", "httpx2", "httpcore", "httpcore2")
SDK_ROOMS = ("backends", "generators")


def _modules() -> dict[str, Path]:
    root = REPO / PACKAGE
    out = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


_MODULE_NAMES: set[str] = set()


def _imports(module: str, path: Path, source: str | None = None) -> list[tuple[str, int]]:
    """(absolute module imported, line) for every import in the file, function-level ones included."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text() if source is None else source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # "from . import x, y" imports the modules x and y when there are such modules; the
            # package itself only when a name is something it defines (its __init__ is then used).
            subs = [f"{target}.{alias.name}" for alias in node.names]
            known = [sub for sub in subs if sub in _MODULE_NAMES]
            found += [(sub, node.lineno) for sub in known]
            if len(known) < len(subs):
                found.append((target, node.lineno))
    return found


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _graph() -> dict[str, set[tuple[str, int]]]:
    modules = _modules()
    _MODULE_NAMES.update(modules)
    graph: dict[str, set[tuple[str, int]]] = {}
    for module, path in modules.items():
        edges = set()
        for target, line in _imports(module, path):
            if target in modules and target != module:
                edges.add((target, line))
        graph[module] = edges
    return graph


def test_every_room_is_declared():
    rooms = {_room(m) for m in _modules()}
    assert rooms <= set(LAYERS), f"declare these rooms in LAYERS: {sorted(rooms - set(LAYERS))}"


def test_imports_only_point_down_the_layers():
    order = {room: i for i, room in enumerate(LAYERS)}
    upward = []
    for module, edges in _graph().items():
        for target, line in edges:
            here, there = _room(module), _room(target)
            if there != here and order[there] < order[here]:
                upward.append(f"{module}:{line} imports {target} ({here} is below {there})")
    assert not upward, "imports against the layer order:\n" + "\n".join(sorted(upward))


def test_no_import_cycle():
    graph = {m: {t for t, _ in edges} for m, edges in _graph().items()}
    # A package imports its own sub-modules when its __init__ does; a cycle is a path back to the start.
    cycles, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_only_backends_and_generators_import_a_vendor_sdk():
    offenders = []
    for module, path in _modules().items():
        if _room(module) in SDK_ROOMS:
            continue
        for target, line in _imports(module, path):
            if any(target == sdk or target.startswith(sdk + ".") for sdk in SDKS):
                offenders.append(f"{module}:{line} imports {target}")
    assert not offenders, "SDK imports outside backends/ and generators/:\n" + "\n".join(offenders)


def test_the_check_sees_function_level_and_relative_imports():
    """The checks above would pass vacuously if lazy or relative imports were missed."""
    _MODULE_NAMES.update(_modules())
    source = ("from ..core import types\n\ndef f():\n    from . import cache\n    import lm_eval_mathjudge.calls.retry\n"
              "    from .. import __version__\n")
    found = {t for t, _ in _imports(f"{PACKAGE}.judging.client", Path("client.py"), source)}
    assert {f"{PACKAGE}.core.types", f"{PACKAGE}.judging.cache", f"{PACKAGE}.calls.retry"} <= found
    assert PACKAGE in found  # the package root (the public API, at the top) is a room like any other
