"""The oracle: the next action of a developer who knows where the bug is and how to fix it.

It runs the suite to see the failure, opens the faulty function, applies the
fix (reverting any other edit first), runs the failing test, runs the whole
suite, and submits: six steps from a fresh episode. It reads the hidden
state, so it is never shown to the agent; it serves datasets, reviews and tests.
"""

from __future__ import annotations

from feedbackgym.envs.code.actions import EDIT, REVERT, RUN_ALL, RUN_ONE, SUBMIT, view_action
from feedbackgym.envs.code.state import CodeState

__all__ = ["expert_action"]


def expert_action(state: CodeState) -> int:
    """Returns the expert's next action index for ``state``."""
    project = state.project
    if not state.failing_seen:
        return RUN_ALL
    file, window = state.bug_window()
    if (file, window) not in state.viewed:
        return view_action(project.file_names.index(file), window)
    fixed = state.fixed_code()
    if state.code != fixed:
        fix = project.fix
        patched = {name: list(lines) for name, lines in state.code.items()}
        patched[fix.file][fix.line - 1] = fix.text
        return EDIT + project.edits.index(fix) if patched == fixed else REVERT
    now = state.status_now()
    names = [name for _, name in project.tests]
    for name in project.failing:
        if now.get(name) != "pass":
            return RUN_ONE + names.index(name)
    if any(now.get(name) != "pass" for name in names):
        return RUN_ALL
    return SUBMIT
