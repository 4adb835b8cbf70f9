"""The package's import graph: layers import one way, and no files import each other in a loop.

Every ``import`` statement in a module counts: at the top, inside a function
(a lazy import is still a dependency, only a later one) and under
``TYPE_CHECKING`` (a lower layer that names a higher layer's types depends on
its API, and mypy follows the import). Strings are not imports: Gymnasium
entry points such as ``"feedbackgym.envs.ops.env:OpsIncidentEnv"`` and
``importlib`` calls stay out of the graph.
"""

import ast
import graphlib
from pathlib import Path
from typing import NamedTuple

import pytest

PACKAGE = "feedbackgym"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

LAYERS: dict[str, tuple[str, ...]] = {
    "core": (
        "feedbackgym._process",
        "feedbackgym.config",
        "feedbackgym.core",
        "feedbackgym.errors",
        "feedbackgym.protocol",
        "feedbackgym.registration",
        "feedbackgym.webhook",
    ),
    "feedback": ("feedbackgym.control", "feedbackgym.feedback", "feedbackgym.schedules"),
    "envs": ("feedbackgym.envs",),
    "datasets": ("feedbackgym.datasets",),
    "wrappers": (
        "feedbackgym.agent",
        "feedbackgym.experts",
        "feedbackgym.llm_server",
        "feedbackgym.rollout",
        "feedbackgym.wrappers",
    ),
    "baselines": ("feedbackgym.baselines",),
    "cli": ("feedbackgym.__main__", "feedbackgym.cli"),
    "package": ("feedbackgym",),
}
"""The layers, lowest first: a module may import its own layer and the ones below it.

An entry names a module, or a package and every module in it; ``feedbackgym``
is only the top package's ``__init__``. That one is the users' front door: it
re-exports names from every layer (loading most on first use), so it sits on
top, and no module of the package imports it."""
RANKS = {name: rank for rank, name in enumerate(LAYERS)}


class Import(NamedTuple):
    """One import statement's edge in the graph."""

    source: str
    target: str
    line: int
    statement: str

    def __str__(self) -> str:
        path = MODULES[self.source].relative_to(ROOT.parent)
        return f"{path}:{self.line} `{self.statement}`"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The module an ``ImportFrom`` names, with a relative import resolved."""
    if not node.level:
        return node.module or ""
    is_package = MODULES[module].name == "__init__.py"
    parts = module.split(".")
    base = parts[: len(parts) - node.level + is_package]
    return ".".join([*base, node.module] if node.module else base)


def _known(name: str) -> str | None:
    """The longest prefix of ``name`` that is one of the package's modules."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in MODULES:
            return prefix
    return None


def _imports(module: str, source: str | None = None) -> list[Import]:
    """The package modules that ``module`` imports (``source``: its text, default its file)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text() if source is None else source, filename=str(path))
    edges = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [_known(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node)
            targets = [_known(f"{base}.{alias.name}") or _known(base) for alias in node.names]
        else:
            continue
        statement = ast.unparse(node)
        edges += [
            Import(module, target, node.lineno, statement)
            for target in dict.fromkeys(targets)
            if target is not None and target != module
        ]
    return edges


def _layer(module: str) -> str | None:
    for name, entries in LAYERS.items():
        for entry in entries:
            if module == entry or (entry != PACKAGE and module.startswith(entry + ".")):
                return name
    return None


GRAPH = {module: _imports(module) for module in MODULES}


def test_every_module_has_a_layer():
    missing = [module for module in MODULES if _layer(module) is None]
    if missing:
        pytest.fail(f"declare the layer of {', '.join(missing)} in LAYERS (tests/test_layers.py)")


def test_layers_import_only_downwards():
    upward = [
        f"{edge}: {edge.source} ({source}) imports {edge.target} ({target}, a higher layer)"
        for edges in GRAPH.values()
        for edge in edges
        if (source := _layer(edge.source))
        and (target := _layer(edge.target))
        and RANKS[target] > RANKS[source]
    ]
    if upward:
        pytest.fail("imports from a lower layer into a higher one:\n" + "\n".join(upward))


def _cycles() -> list[list[str]]:
    """Import cycles ``[a, b, ..., a]``, each one importing the next (one at least per loop)."""
    graph = {module: {edge.target for edge in edges} for module, edges in GRAPH.items()}
    cycles = []
    while True:
        try:
            graphlib.TopologicalSorter(graph).prepare()
        except graphlib.CycleError as error:
            cycle = error.args[1][::-1]  # graphlib lists each module before the ones importing it
            cycles.append(cycle)
            graph[cycle[0]].discard(cycle[1])  # then look for the next one
        else:
            return cycles


def _describe(cycle: list[str]) -> str:
    steps = [
        next(edge for edge in GRAPH[source] if edge.target == target)
        for source, target in zip(cycle, cycle[1:], strict=False)
    ]
    return " -> ".join(cycle) + ":\n" + "\n".join(f"  {step}" for step in steps)


def test_no_import_cycles():
    cycles = _cycles()
    if cycles:
        pytest.fail("import cycles between files:\n" + "\n".join(map(_describe, cycles)))


def test_lazy_type_checking_and_relative_imports_are_edges():
    source = """
from typing import TYPE_CHECKING
from . import errors
if TYPE_CHECKING:
    from feedbackgym.core import Subgoal
def f():
    import feedbackgym.registration
    from .datasets import store
"""
    targets = {edge.target for edge in _imports("feedbackgym.rollout", source)}
    assert targets == {
        "feedbackgym.errors",
        "feedbackgym.core",
        "feedbackgym.registration",
        "feedbackgym.datasets.store",
    }
