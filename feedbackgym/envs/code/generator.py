"""Lays a bug and correct helpers out as a small project of 2-6 files.

``easy``: one module and its test file (2 files). ``medium``: two modules and
one or two test files (3-4 files). ``hard``: three modules and two or three
test files (5-6 files), the bug in any module, a called helper in another
one. The hidden tests go to a file the agent never sees. The candidate set
holds the fix, three wrong fixes of the faulty line and four decoys elsewhere,
shuffled: always :data:`N_EDITS` edits.
"""

from __future__ import annotations

import numpy as np

from feedbackgym.envs.code.distractors import DISTRACTORS
from feedbackgym.envs.code.families import FAMILIES
from feedbackgym.envs.code.names import Namer
from feedbackgym.envs.code.project import CandidateEdit, Project, TestCase, Unit

__all__ = [
    "DIFFICULTIES",
    "HIDDEN_FILE",
    "MAX_FILES",
    "MAX_LINES",
    "MAX_TESTS",
    "N_EDITS",
    "generate",
]

DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard")
MAX_FILES = 6
"""Most visible files in a project."""
MAX_LINES = 48
"""Most lines in a file."""
MAX_TESTS = 10
"""Most visible tests in a project."""
N_EDITS = 8
"""Size of every episode's candidate set."""
HIDDEN_FILE = "test_hidden.py"
"""The hidden test file (run on submit only)."""

_WRONG = 3
_DECOYS = N_EDITS - 1 - _WRONG
_LAYOUT = {
    # difficulty: (modules, test file groupings to pick from, distractor units)
    "easy": (1, ((1,),), 2),
    "medium": (2, ((2,), (1, 1)), 3),
    "hard": (3, ((2, 1), (1, 1, 1)), 4),
}


def generate(family: str, difficulty: str, rng: np.random.Generator) -> Project:
    """Generates a project with one bug of ``family``.

    Args:
        family: A key of :data:`~feedbackgym.envs.code.families.FAMILIES`.
        difficulty: One of :data:`DIFFICULTIES`.
        rng: The episode's generator (the project is a function of its state).

    Returns:
        The project.

    Example:
        >>> p = generate("off_by_one", "easy", np.random.default_rng(0))
        >>> len(p.files), len(p.edits), p.failing[0] in [name for _, name in p.tests]
        (2, 8, True)
    """
    n = Namer(rng)
    bug = FAMILIES[family](n)
    n_modules, groupings, n_distractors = _LAYOUT[difficulty]
    modules = [n.module() for _ in range(n_modules)]
    placed: list[list[Unit]] = [[] for _ in modules]
    bug_at = int(rng.integers(n_modules))
    placed[bug_at].append(bug.unit)
    if bug.helper is not None:
        others = [i for i in range(n_modules) if i != bug_at] or [bug_at]
        placed[others[int(rng.integers(len(others)))]].append(bug.helper)
    kinds = rng.choice(len(DISTRACTORS), n_distractors, replace=False)
    for index, kind in enumerate(kinds):
        empty = [i for i, units in enumerate(placed) if not units]
        slot = empty[0] if empty else index % n_modules
        placed[slot].append(DISTRACTORS[int(kind)](n))
    for units in placed:
        order = rng.permutation(len(units))
        units[:] = [units[int(i)] for i in order]
    home = {unit.name: modules[i] for i, units in enumerate(placed) for unit in units}
    sources = {
        f"{module}.py": _module_lines(module, units, home)
        for module, units in zip(modules, placed, strict=True)
    }
    grouping = groupings[int(rng.integers(len(groupings)))]
    test_files: dict[str, list[str]] = {}
    tests: list[tuple[str, str]] = []
    start = 0
    for size in grouping:
        group = list(range(start, start + size))
        start += size
        name = f"test_{modules[group[0]]}.py"
        cases = [case for i in group for unit in placed[i] for case in unit.tests]
        test_files[name] = _test_lines(cases, home)
        tests += [(name, case.name) for case in cases]
    hidden_cases = [case for units in placed for unit in units for case in unit.hidden]
    bug_file = f"{modules[bug_at]}.py"
    files = {k: "\n".join(v) + "\n" for k, v in (sources | test_files).items()}
    edits = _edits(bug.unit, bug.fix, placed, modules, sources, rng)
    project = Project(
        family=family,
        difficulty=difficulty,
        files=tuple(sorted(files.items())),
        hidden_files=((HIDDEN_FILE, "\n".join(_test_lines(hidden_cases, home)) + "\n"),),
        tests=tuple(tests),
        hidden_tests=tuple((HIDDEN_FILE, case.name) for case in hidden_cases),
        failing=(bug.unit.tests[0].name,),
        bug_file=bug_file,
        bug_line=_line_of(sources[bug_file], bug.unit) + bug.unit.decoy_line + 1,
        function=bug.unit.name,
        edits=edits,
    )
    _check_size(project)
    return project


def _module_lines(module: str, units: list[Unit], home: dict[str, str]) -> list[str]:
    lines = [f'"""{module.title()} helpers."""']
    imports: dict[str, list[str]] = {}
    for unit in units:
        for name in unit.needs:
            if home[name] != module:
                imports.setdefault(home[name], []).append(name)
    if imports:
        lines.append("")
        lines += [
            f"from {m} import {', '.join(sorted(names))}" for m, names in sorted(imports.items())
        ]
    preamble = [line for unit in units for line in unit.preamble]
    if preamble:
        lines += ["", *preamble]
    for unit in units:
        lines += ["", "", *unit.code]
    return lines


def _test_lines(cases: list[TestCase], home: dict[str, str]) -> list[str]:
    imports: dict[str, set[str]] = {}
    for case in cases:
        for name in case.uses:
            imports.setdefault(home[name], set()).add(name)
    lines = [f"from {m} import {', '.join(sorted(names))}" for m, names in sorted(imports.items())]
    for case in cases:
        lines += ["", "", *case.lines()]
    return lines


def _line_of(lines: list[str], unit: Unit) -> int:
    """The 0-based index where ``unit``'s code starts in a module."""
    first = unit.code[0]
    return next(i for i, line in enumerate(lines) if line == first and _matches(lines, i, unit))


def _matches(lines: list[str], start: int, unit: Unit) -> bool:
    return tuple(lines[start : start + len(unit.code)]) == unit.code


def _edits(
    faulty: Unit,
    fix: str,
    placed: list[list[Unit]],
    modules: list[str],
    sources: dict[str, list[str]],
    rng: np.random.Generator,
) -> tuple[CandidateEdit, ...]:
    def at(module: str, unit: Unit) -> tuple[str, int]:
        file = f"{module}.py"
        return file, _line_of(sources[file], unit) + unit.decoy_line + 1

    bug_module = next(m for m, units in zip(modules, placed, strict=True) if faulty in units)
    file, line = at(bug_module, faulty)
    wrong = rng.choice(len(faulty.decoys), _WRONG, replace=False)
    edits = [CandidateEdit(file, line, fix, "fix")]
    edits += [CandidateEdit(file, line, faulty.decoys[int(i)], "wrong") for i in wrong]
    decoys = [
        CandidateEdit(*at(module, unit), text, "decoy")
        for module, units in zip(modules, placed, strict=True)
        for unit in units
        if unit is not faulty
        for text in unit.decoys
    ]
    edits += [decoys[int(i)] for i in rng.choice(len(decoys), _DECOYS, replace=False)]
    return tuple(edits[int(i)] for i in rng.permutation(len(edits)))


def _check_size(project: Project) -> None:
    if len(project.files) > MAX_FILES or len(project.tests) > MAX_TESTS:
        raise RuntimeError(
            f"project too large: {len(project.files)} files, {len(project.tests)} tests"
        )
    for name, text in project.files:
        if text.count("\n") > MAX_LINES:
            raise RuntimeError(f"{name} has {text.count(chr(10))} lines, more than {MAX_LINES}")
