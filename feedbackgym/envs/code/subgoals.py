"""The subgoal library of a CodeFix episode.

The chain::

    find_failing_test ─► locate_fault ─► fix_failing_test ─► all_tests_pass ─► submit

Predicates read what the agent has observed (runs, views), not the truth
alone: a fix counts once a run shows the failing test passing on the code as
it is now. They are module-level functions (bound with
:func:`functools.partial` where needed), so an env holding its library pickles.
"""

from __future__ import annotations

from feedbackgym.core import Subgoal
from feedbackgym.envs.code.state import CodeState

__all__ = ["SUBGOAL_IDS", "build_subgoals"]

SUBGOAL_IDS: tuple[str, ...] = (
    "find_failing_test",
    "locate_fault",
    "fix_failing_test",
    "all_tests_pass",
    "submit",
)


def _failing_test_found(state: CodeState) -> bool:
    return state.failing_seen


def _fault_located(state: CodeState) -> bool:
    return state.bug_window() in state.viewed


def _failing_test_fixed(state: CodeState) -> bool:
    now = state.status_now()
    return all(now.get(name) == "pass" for name in state.project.failing)


def _all_tests_pass(state: CodeState) -> bool:
    now = state.status_now()
    return all(now.get(name) == "pass" for _, name in state.project.tests)


def _submitted(state: CodeState) -> bool:
    return state.outcome == "fixed"


def build_subgoals(state: CodeState) -> list[Subgoal]:
    """Returns the subgoal library for the project in ``state``."""
    project = state.project
    failing = ", ".join(project.failing)
    return [
        Subgoal(
            "find_failing_test",
            "Run the tests and find the one that fails.",
            _failing_test_found,
        ),
        Subgoal(
            "locate_fault",
            f"Open the function {project.function} in {project.bug_file}, where the fault is.",
            _fault_located,
            ("find_failing_test",),
        ),
        Subgoal(
            "fix_failing_test",
            f"Edit the code so that {failing} passes, and run it to check.",
            _failing_test_fixed,
            ("locate_fault",),
        ),
        Subgoal(
            "all_tests_pass",
            "Run the whole suite and see every test pass.",
            _all_tests_pass,
            ("fix_failing_test",),
        ),
        Subgoal(
            "submit",
            "Submit the fix (hidden tests run on submit).",
            _submitted,
            ("all_tests_pass",),
        ),
    ]
