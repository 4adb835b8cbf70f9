"""The plain data of a generated bug-fix task: code units, tests, candidate edits, the project.

A :class:`Unit` is one function (or a function plus module-level state) with
its tests; a bug family (:mod:`~feedbackgym.envs.code.families`) returns a
:class:`Bug`, a unit whose marked line is faulty, with the fix and plausible
wrong replacements. The generator (:mod:`~feedbackgym.envs.code.generator`)
lays units out in modules and test files and returns a :class:`Project`.
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Bug", "CandidateEdit", "Project", "TestCase", "Unit", "render"]

BUG_MARK = "@@"
"""Marks the faulty line in a family's code template (removed when rendered)."""


def render(template: str, names: Mapping[str, object]) -> tuple[tuple[str, ...], int]:
    r"""Fills a ``$name`` template and finds the line marked with :data:`BUG_MARK`.

    Returns:
        The code lines (without leading or trailing blank lines) and the index
        of the marked line, or ``-1`` when none is marked.

    Example:
        >>> render("def $f():\n@@    return 1\n", {"f": "one"})
        (('def one():', '    return 1'), 1)
    """
    lines = string.Template(template.strip("\n")).substitute(names).split("\n")
    marked = [i for i, line in enumerate(lines) if line.startswith(BUG_MARK)]
    for i in marked:
        lines[i] = lines[i][len(BUG_MARK) :]
    return tuple(lines), marked[0] if marked else -1


@dataclass(frozen=True)
class TestCase:
    """A test function.

    Attributes:
        name: The function name (``test_...``), unique in the project.
        body: Its body, one statement per line, unindented.
        uses: Names it imports from project modules.
    """

    __test__ = False  # not a pytest test class

    name: str
    body: tuple[str, ...]
    uses: tuple[str, ...]

    def lines(self) -> list[str]:
        """The test as source lines."""
        return [f"def {self.name}():", *(f"    {line}" for line in self.body)]


@dataclass(frozen=True)
class Unit:
    """A correct function with tests and decoy edits that break it.

    Attributes:
        name: The function's name.
        code: Its source lines.
        decoy_line: Index in ``code`` of the line decoys replace.
        decoys: Plausible replacements of that line that break a visible test.
        tests: Visible tests.
        hidden: Hidden tests.
        preamble: Module-level lines it needs (state, imports of other units).
        needs: Names of other units it calls (imported when they live elsewhere).
    """

    name: str
    code: tuple[str, ...]
    decoy_line: int
    decoys: tuple[str, ...]
    tests: tuple[TestCase, ...]
    hidden: tuple[TestCase, ...] = ()
    preamble: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Bug:
    """A unit with one faulty line, as a bug family makes it.

    Attributes:
        family: The bug family.
        unit: The faulty unit; ``unit.decoy_line`` is the faulty line and
            ``unit.decoys`` are wrong replacements of it (some pass the visible
            tests and only fail hidden ones). Its first visible test fails.
        fix: The replacement of the faulty line that makes every test pass.
        helper: A correct unit the faulty one calls, if any.
    """

    family: str
    unit: Unit
    fix: str
    helper: Unit | None = None


@dataclass(frozen=True)
class CandidateEdit:
    """One entry of an episode's candidate set: replace a line of a file.

    Attributes:
        file: The file.
        line: The 1-based line number.
        text: The new line.
        role: ``"fix"``, ``"wrong"`` (a wrong fix of the faulty line) or
            ``"decoy"`` (a plausible change elsewhere that breaks a test).
    """

    file: str
    line: int
    text: str
    role: str = field(compare=False)

    @property
    def command(self) -> str:
        """The edit as a text action: ``edit FILE LINE "new line"``."""
        return f"edit {self.file} {self.line} {json.dumps(self.text)}"


@dataclass(frozen=True)
class Project:
    """A generated project with one seeded bug.

    Attributes:
        family: The bug family.
        difficulty: ``"easy"``, ``"medium"`` or ``"hard"``.
        files: The visible files, ``(name, text)`` in listing order.
        hidden_files: The hidden test files, never shown to the agent.
        tests: The visible tests, ``(file, name)`` in run order.
        hidden_tests: The hidden tests, ``(file, name)``.
        failing: Names of the visible tests that fail on the buggy code.
        bug_file: The file holding the faulty line.
        bug_line: Its 1-based line number.
        function: The faulty function.
        edits: The episode's candidate edits (the fix among them), shuffled.
    """

    family: str
    difficulty: str
    files: tuple[tuple[str, str], ...]
    hidden_files: tuple[tuple[str, str], ...]
    tests: tuple[tuple[str, str], ...]
    hidden_tests: tuple[tuple[str, str], ...]
    failing: tuple[str, ...]
    bug_file: str
    bug_line: int
    function: str
    edits: tuple[CandidateEdit, ...]

    @property
    def file_names(self) -> tuple[str, ...]:
        """The visible file names, in listing order."""
        return tuple(name for name, _ in self.files)

    @property
    def fix(self) -> CandidateEdit:
        """The candidate edit that fixes the bug."""
        return next(edit for edit in self.edits if edit.role == "fix")
