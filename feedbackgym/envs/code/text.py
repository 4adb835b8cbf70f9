"""The CodeFix console as text, for LLM agents, and what each action prints.

Everything is normalised into :data:`CHARSET` (tabs become spaces, anything
else outside it becomes ``?``) and cut to :data:`MAX_TEXT_LENGTH`, so the
text always lies in the env's ``Text`` observation space, whatever the code
under test printed.
"""

from __future__ import annotations

from collections.abc import Iterable

from feedbackgym.envs.base import CHARSET
from feedbackgym.envs.code.actions import WINDOW
from feedbackgym.envs.code.sandbox.protocol import RunReport
from feedbackgym.envs.code.state import CodeState

__all__ = [
    "CHARSET",
    "MAX_TEXT_LENGTH",
    "normalise",
    "render_listing",
    "render_report",
    "render_text",
    "render_window",
]

MAX_TEXT_LENGTH = 8192
"""Longest text observation."""

GOAL = "Goal: fix the bug so that every test passes (hidden tests too), then submit."
_OUTPUT_CHARS = 4000
_PRINTED_CHARS = 1000
_ALLOWED = frozenset(CHARSET)
_MARK = {"pass": "PASS", "fail": "FAIL", "error": "ERROR", "not_run": "NOT RUN"}


def normalise(text: str) -> str:
    """Maps ``text`` into :data:`CHARSET`."""
    text = text.replace("\r\n", "\n").replace("\t", "    ")
    return "".join(c if c in _ALLOWED else "?" for c in text)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 4] + "\n..."


def render_text(state: CodeState, max_steps: int) -> str:
    """Renders what the agent knows: status, test results, candidate edits, the last answer."""
    project = state.project
    now = state.status_now()
    names = [name for _, name in project.tests]
    lines = [
        GOAL,
        f"Step {state.step} of {max_steps} | files: {', '.join(project.file_names)}",
        "Tests on the code now: "
        + ", ".join(f"{name} {_MARK.get(now.get(name, ''), '?')}" for name in names),
        'Candidate edits ("apply edit K", or your own: edit FILE LINE "new line"):',
        *(f"  [{k}] {edit.command}" for k, edit in enumerate(project.edits)),
    ]
    if state.last_action:
        lines.append(f"> {state.last_action}")
        lines += [f"  {line}" for line in _cut(state.last_output, _OUTPUT_CHARS).split("\n")]
    return _cut(normalise("\n".join(lines)), MAX_TEXT_LENGTH)


def render_listing(state: CodeState) -> str:
    """What ``list files`` prints."""
    original = dict(state.project.files)
    return "\n".join(
        f"{name}  {len(lines)} lines"
        + (" (edited)" if "\n".join(lines) + "\n" != original[name] else "")
        for name, lines in state.code.items()
    )


def render_window(lines: list[str], window: int) -> str:
    """What viewing ``window`` of a file prints: numbered lines."""
    first = window * WINDOW
    shown = lines[first : first + WINDOW]
    if not shown:
        return f"(the file has {len(lines)} lines)"
    return "\n".join(f"{first + i + 1:3d} | {line}" for i, line in enumerate(shown))


def render_report(report: RunReport, note: Iterable[str] = ()) -> str:
    """What a test run prints: one line per test, tracebacks, output, flags."""
    lines = list(note)
    for result in report.results:
        head = f"{_MARK.get(result.status, result.status)} {result.name} ({result.file})"
        lines.append(f"{head}: {result.message}" if result.message else head)
        lines += [f"    at {file}:{line} in {function}" for file, line, function in result.frames]
    passed = sum(r.status == "pass" for r in report.results)
    lines.append(f"{passed} of {len(report.results)} passed")
    if report.output.strip():
        lines += ["Printed output:", _cut(report.output.rstrip(), _PRINTED_CHARS)]
    if report.flags:
        lines.append(f"Sandbox: {', '.join(sorted(report.flags))}")
    return "\n".join(lines)
