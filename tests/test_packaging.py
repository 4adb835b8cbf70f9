"""pyproject.toml's extras, and the extra each guarded import of the package names."""

import ast
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = PROJECT["optional-dependencies"]
RUNTIME_EXTRAS = (
    "web",
    "code",
    "hdf5",
    "remote",
    "baselines",
    "minari",
    "llm",
    "llm-train",
    "ray",
    "server",
)


def _name(requirement):
    return _normal(re.match(r"[A-Za-z0-9_.-]+", requirement)[0])


def _normal(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _for_extra_calls():
    """``(file:line, package names, extra)`` of every guarded import of the package.

    A guard is ``DependencyNotInstalled.for_extra(package, extra)`` or ``with
    requires_extra(extra[, package])`` (whose package is the extra's name unless given).
    """
    for path in sorted((ROOT / "feedbackgym").rglob("*.py")):
        if path.name == "errors.py":  # where the guards are defined
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if isinstance(node.func, ast.Attribute) and node.func.attr == "for_extra":
                package, extra = node.args
                names = [c.value for c in ast.walk(package) if isinstance(c, ast.Constant)]
                yield where, names, extra.value
            elif isinstance(node.func, ast.Name) and node.func.id == "requires_extra":
                extra, *package = node.args
                yield where, [package[0].value if package else extra.value], extra.value


CALLS = list(_for_extra_calls())


def test_the_extras_are_the_ones_users_are_told_about():
    assert set(EXTRAS) == {*RUNTIME_EXTRAS, "docs", "all", "test", "dev"}
    # all: every runtime extra, and docs (CI installs .[all,test] and builds the site)
    assert EXTRAS["all"] == [f"feedbackgym[{','.join((*RUNTIME_EXTRAS, 'docs'))}]"]
    assert EXTRAS["dev"] == ["feedbackgym[all,test,docs]"]
    assert "openai" in [_name(r) for r in EXTRAS["llm"]]


def test_every_requirement_has_a_lower_bound():
    for requirement in PROJECT["dependencies"] + [r for rs in EXTRAS.values() for r in rs]:
        assert requirement.startswith("feedbackgym[") or ">=" in requirement, requirement


@pytest.mark.parametrize("where, names, extra", CALLS, ids=[call[0] for call in CALLS])
def test_a_guarded_import_names_the_extra_that_installs_it(where, names, extra):
    assert extra in RUNTIME_EXTRAS
    declared = {_name(r) for r in EXTRAS[extra]}
    assert names and {_normal(n) for n in names} <= declared, f"{where}: {names} not in [{extra}]"


def test_every_runtime_extra_has_a_guarded_import_naming_it():
    named = {extra for _, _, extra in CALLS}
    assert set(RUNTIME_EXTRAS) <= named
