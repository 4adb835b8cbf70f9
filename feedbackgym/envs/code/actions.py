"""The CodeFix action table and the text parser for LLM agents.

The table has a fixed size, :data:`N_ACTIONS`, laid out in blocks::

    0                 list files
    1                 run all tests
    2 ..             run test <slot>           (MAX_TESTS slots)
    VIEW ..           view <file> lines a-b     (MAX_FILES files x WINDOWS windows)
    EDIT ..           apply candidate edit k    (N_EDITS candidates)
    REVERT            revert every edit
    SUBMIT            submit

What a slot means depends on the episode (its files, tests and candidate
edits): :func:`meanings` renders them, e.g. ``"view billing.py lines 13-24"``
or ``'edit billing.py 7 "    for i in range(n):"'``. A slot the episode does
not fill is still a valid action: it reports that there is nothing there.

Text actions: any meaning, an index, ``run test NAME``, ``view FILE [LINE]``,
``apply edit K``, and the free-form edit ``edit FILE LINE "new line"`` (a JSON
string literal) that replaces one line with any text. A free-form edit that
equals a candidate parses to that candidate's index; any other parses to a
:class:`FreeEdit`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from feedbackgym.envs.base import index_or_text
from feedbackgym.envs.code.generator import MAX_FILES, MAX_LINES, MAX_TESTS, N_EDITS
from feedbackgym.envs.code.project import Project
from feedbackgym.errors import InvalidAction

__all__ = [
    "EDIT",
    "KINDS",
    "LIST",
    "MAX_EDIT_CHARS",
    "N_ACTIONS",
    "REVERT",
    "RUN_ALL",
    "RUN_ONE",
    "SUBMIT",
    "VIEW",
    "WINDOW",
    "WINDOWS",
    "FreeEdit",
    "kind_of",
    "meanings",
    "parse_action",
    "view_action",
    "window_of",
]

WINDOW = 12
"""Lines per view window."""
WINDOWS = MAX_LINES // WINDOW
"""View windows per file."""

LIST = 0
RUN_ALL = 1
RUN_ONE = 2
VIEW = RUN_ONE + MAX_TESTS
EDIT = VIEW + MAX_FILES * WINDOWS
REVERT = EDIT + N_EDITS
SUBMIT = REVERT + 1
N_ACTIONS = SUBMIT + 1

KINDS: tuple[str, ...] = (
    "none",
    "list",
    "run_all",
    "run_test",
    "view",
    "edit",
    "free_edit",
    "revert",
    "submit",
)
"""Action kinds, in the order of the ``last_action`` observation."""

MAX_EDIT_CHARS = 300
"""Longest line a free-form edit may write."""


@dataclass(frozen=True)
class FreeEdit:
    """A free-form edit: replace line ``line`` (1-based) of ``file`` with ``text``."""

    file: str
    line: int
    text: str

    @property
    def command(self) -> str:
        """The edit as a text action."""
        return f"edit {self.file} {self.line} {json.dumps(self.text)}"


def kind_of(index: int) -> str:
    """The kind of action ``index``."""
    if index == LIST:
        return "list"
    if index == RUN_ALL:
        return "run_all"
    if index < VIEW:
        return "run_test"
    if index < EDIT:
        return "view"
    if index < REVERT:
        return "edit"
    return "revert" if index == REVERT else "submit"


def window_of(line: int) -> int:
    """The view window holding 1-based ``line``."""
    return (line - 1) // WINDOW


def view_action(file_slot: int, window: int) -> int:
    """The index of viewing ``window`` of the file in ``file_slot``."""
    return VIEW + file_slot * WINDOWS + window


def meanings(project: Project | None) -> tuple[str, ...]:
    """The readable meaning of every index for ``project`` (placeholders without one)."""
    files = project.file_names if project else ()
    tests = [name for _, name in project.tests] if project else []
    edits = project.edits if project else ()
    table = ["list files", "run all tests"]
    table += [
        f"run test {tests[i]}" if i < len(tests) else f"run test #{i}" for i in range(MAX_TESTS)
    ]
    for f in range(MAX_FILES):
        name = files[f] if f < len(files) else f"file #{f}"
        table += [f"view {name} lines {w * WINDOW + 1}-{(w + 1) * WINDOW}" for w in range(WINDOWS)]
    table += [edits[k].command if k < len(edits) else f"apply edit {k}" for k in range(N_EDITS)]
    return (*table, "revert", "submit")


def _valid_choices(project: Project | None) -> str:
    files = ", ".join(project.file_names) if project else "FILE"
    return (
        "valid: 'list files', 'run all tests', 'run test NAME', "
        f"'view FILE [LINE]' (FILE one of {files}), 'apply edit 0..{N_EDITS - 1}', "
        "'edit FILE LINE \"new line\"', 'revert', 'submit', "
        f"or an index 0..{N_ACTIONS - 1}"
    )


_EDIT = re.compile(r'^edit\s+(\S+)\s+(\d+)\s+(".*")$', re.IGNORECASE | re.DOTALL)
_PREFIX = re.compile(r"^(?:next\s+)?action\s*:\s*", re.IGNORECASE)


def parse_action(action: Any, project: Project | None, lines: dict[str, int]) -> int | FreeEdit:
    """Turns an index, a text action or a :class:`FreeEdit` into a valid action.

    Args:
        action: An index (Python or numpy integer), text, or a :class:`FreeEdit`.
        project: The episode's project (``None`` before the first reset).
        lines: Line count of each visible file now.

    Returns:
        An index into the table, or a :class:`FreeEdit`.

    Raises:
        InvalidAction: Out of range, unparsable, or an edit of a file or line
            that does not exist. The message lists the valid choices.
    """
    action = index_or_text(action, N_ACTIONS, lambda: _valid_choices(project), also=(FreeEdit,))
    if isinstance(action, int):
        return action
    if isinstance(action, FreeEdit):
        return _free_edit(action, project, lines)
    return _parse_text(action, project, lines)


def _parse_text(text: str, project: Project | None, lines: dict[str, int]) -> int | FreeEdit:
    raw = _PREFIX.sub("", text.strip()).strip().strip("`")
    edit = _EDIT.match(raw)
    if edit:
        try:
            new_line = json.loads(edit.group(3))
        except ValueError as error:
            raise InvalidAction(f"the new line must be a JSON string literal: {error}") from error
        if not isinstance(new_line, str):
            raise InvalidAction("the new line must be a JSON string literal")
        return _free_edit(FreeEdit(edit.group(1), int(edit.group(2)), new_line), project, lines)
    words = re.sub(r"\s+", " ", raw.lower().strip(" .!'\""))
    if words.isdecimal():
        return parse_action(int(words), project, lines)
    table = {m.lower(): i for i, m in enumerate(meanings(project))}
    if words in table:
        return table[words]
    found = _shorthand(words, project)
    if found is not None:
        return found
    raise InvalidAction(f"cannot parse action {text!r}; {_valid_choices(project)}")


def _shorthand(words: str, project: Project | None) -> int | None:
    if words in ("ls", "list", "files", "list the files"):
        return LIST
    if words in ("run tests", "run the tests", "run all", "test", "tests", "run all the tests"):
        return RUN_ALL
    if words in ("undo", "undo all", "revert all", "revert edits"):
        return REVERT
    match = re.fullmatch(r"(?:apply )?(?:candidate )?edit #?(\d+)", words)
    if match and int(match.group(1)) < N_EDITS:
        return EDIT + int(match.group(1))
    match = re.fullmatch(r"run test #?(\d+)", words)
    if match and int(match.group(1)) < MAX_TESTS:
        return RUN_ONE + int(match.group(1))
    if project is None:
        return None
    match = re.fullmatch(r"run (?:test )?(\w+)", words)
    names = [name.lower() for _, name in project.tests]
    if match and match.group(1) in names:
        return RUN_ONE + names.index(match.group(1))
    match = re.fullmatch(r"(?:view|open|show|cat) (\S+?)(?:(?: lines?)? (\d+)(?:-\d+)?)?", words)
    files = [name.lower() for name in project.file_names]
    if match and match.group(1) in files:
        line = int(match.group(2) or 1)
        if 1 <= line <= WINDOWS * WINDOW:
            return view_action(files.index(match.group(1)), window_of(line))
    return None


def _free_edit(edit: FreeEdit, project: Project | None, lines: dict[str, int]) -> int | FreeEdit:
    if project is None:
        raise InvalidAction("no episode is running; call reset() before editing")
    if edit.file not in lines:
        raise InvalidAction(
            f"cannot edit {edit.file!r}: no such file; files: {', '.join(project.file_names)}"
        )
    if not 1 <= edit.line <= lines[edit.file]:
        raise InvalidAction(f"{edit.file} has lines 1..{lines[edit.file]}, not {edit.line}")
    if "\n" in edit.text or "\r" in edit.text or len(edit.text) > MAX_EDIT_CHARS:
        raise InvalidAction(f"the new line must be one line of at most {MAX_EDIT_CHARS} characters")
    for k, candidate in enumerate(project.edits):
        if (candidate.file, candidate.line, candidate.text) == (edit.file, edit.line, edit.text):
            return EDIT + k
    return edit
