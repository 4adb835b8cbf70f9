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
        "feedbackgym.entity_view",
        "feedbackgym.errors",
        "feedbackgym.protocol",
        "feedbackgym.registration",
        "feedbackgym.webhook",
    ),
    "chat": ("feedbackgym.chat",),
    "feedback": ("feedbackgym.control", "feedbackgym.feedback", "feedbackgym.schedules"),
    "envs": ("feedbackgym.envs",),
    "datasets": ("feedbackgym.datasets",),
    "wrappers": ("feedbackgym.experts", "feedbackgym.rollout", "feedbackgym.wrappers"),
    "language": ("feedbackgym.language",),
    "serving": ("feedbackgym.serving",),
    "training.workers": ("feedbackgym.training.workers",),
    "training.common": ("feedbackgym.training.common",),
    "training.trainers": (
        "feedbackgym.training.torch_ppo",
        "feedbackgym.training.sb3",
        "feedbackgym.training.llm",
    ),
    "training.experiments": ("feedbackgym.training.experiments",),
    "training": ("feedbackgym.training",),
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


TRAINING = f"{PACKAGE}.training"


def _may_import(subpackage: str) -> set[str]:
    """The sibling subpackages of ``training`` that ``subpackage``'s docstring allows it."""
    path = ROOT / "training" / subpackage / "__init__.py"
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    lines = [line for line in docstring.splitlines() if line.startswith("May import:")]
    if len(lines) != 1:
        raise AssertionError(f"{path.relative_to(ROOT.parent)}: no single 'May import:' line")
    allowed = lines[0].removeprefix("May import:").split("(")[0]
    return {name.strip() for name in allowed.split(",") if name.strip()}


def _subpackage(module: str) -> str | None:
    """The subpackage of ``training`` that ``module`` is in (``None`` outside one)."""
    parts = module.split(".")
    inside = module.startswith(TRAINING + ".") and len(parts) > 3
    return parts[2] if inside or (module.startswith(TRAINING + ".") and len(parts) == 3) else None


SUBPACKAGES = sorted(path.parent.name for path in (ROOT / "training").glob("*/__init__.py"))
MAY_IMPORT = {name: _may_import(name) for name in SUBPACKAGES}


def _violations(graph: dict[str, list[Import]]) -> list[str]:
    """Each edge of ``graph`` that imports upwards or into a sibling its docstring forbids."""
    found = []
    for edges in graph.values():
        for edge in edges:
            source, target = _layer(edge.source), _layer(edge.target)
            if source and target and RANKS[target] > RANKS[source]:
                found.append(
                    f"{edge}: {edge.source} ({source}) imports {edge.target} "
                    f"({target}, a higher layer)"
                )
                continue
            mine, theirs = _subpackage(edge.source), _subpackage(edge.target)
            if mine and theirs and mine != theirs and theirs not in MAY_IMPORT[mine]:
                found.append(
                    f"{edge}: training.{mine} imports training.{theirs}, which its "
                    f"docstring's 'May import:' line does not name"
                )
    return found


def test_layers_import_only_downwards_and_siblings_as_declared():
    violations = _violations(GRAPH)
    if violations:
        pytest.fail("imports against the layers:\n" + "\n".join(violations))


@pytest.mark.parametrize(
    ("module", "statement"),
    [
        # upward: the wrappers layer reaching into the trainers
        ("feedbackgym.rollout", "from feedbackgym.training.common.arms import arm_config"),
        # upward inside training: what every run shares reaching into an experiment
        (
            "feedbackgym.training.common.arms",
            "from feedbackgym.training.experiments.stats import iqm",
        ),
        # siblings whose docstrings say neither imports the other
        ("feedbackgym.training.sb3.run_sb3", "import feedbackgym.training.torch_ppo.ppo"),
        (
            "feedbackgym.training.torch_ppo.ppo",
            "from feedbackgym.training.sb3.callbacks import feedback_callbacks",
        ),
    ],
)
def test_an_added_forbidden_import_fails(module, statement):
    graph = dict(GRAPH)
    graph[module] = _imports(module, MODULES[module].read_text() + "\n" + statement + "\n")
    assert _violations(GRAPH) == []
    assert len(_violations(graph)) == 1


def test_every_training_subpackage_declares_its_imports():
    assert set(SUBPACKAGES) == {"common", "experiments", "llm", "sb3", "torch_ppo", "workers"}
    assert MAY_IMPORT["torch_ppo"] == {"workers", "common"}
    assert "torch_ppo" not in MAY_IMPORT["sb3"]
    assert MAY_IMPORT["llm"] == {"common"}


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


def _node(module: str) -> str:
    """The picture's node of ``module``: its layer, or its subpackage inside ``training``."""
    sub = _subpackage(module)
    return f"training.{sub}" if sub else str(_layer(module))


def mermaid() -> str:
    """The import graph between layers and training's subpackages, as a Mermaid flowchart.

    Each arrow is "imports"; the arrows into ``core`` (every layer has them) are left
    out. ``docs/developing.md`` shows this text (regenerate it with
    ``python -m tests.test_layers``).
    """
    ranks = {_node(module): RANKS[str(_layer(module))] for module in MODULES}
    edges = sorted(
        {
            (_node(edge.source), _node(edge.target))
            for edges in GRAPH.values()
            for edge in edges
            if _node(edge.source) != _node(edge.target) and _layer(edge.target) != "core"
        }
    )
    names = sorted({name for edge in edges for name in edge}, key=lambda n: (ranks[n], n))
    ids = {name: name.replace(".", "_") for name in names}
    lines = ["flowchart BT"]
    lines += [f'    {ids[name]}["{name}"]' for name in names]
    lines += [f"    {ids[a]} --> {ids[b]}" for a, b in edges]
    return "\n".join(lines)


def test_the_architecture_picture_in_the_docs_is_the_import_graph():
    text = (ROOT.parent / "docs" / "developing.md").read_text()
    shown = text.split("```mermaid\n", 1)[1].split("```", 1)[0].strip()
    assert shown == mermaid(), "regenerate it: python -m tests.test_layers"


MOST_MODULES = 15
"""Most modules a folder of the package holds directly; past that, subpackages by concern."""


def test_no_folder_holds_more_than_fifteen_modules():
    crowded = {
        str(folder.relative_to(ROOT.parent)): count
        for folder in {path.parent for path in MODULES.values()}
        if (count := len(list(folder.glob("*.py")))) > MOST_MODULES
    }
    assert not crowded, f"split these folders into subpackages by concern: {crowded}"


if __name__ == "__main__":
    print(mermaid())
