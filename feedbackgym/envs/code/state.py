"""The hidden state of a CodeFix episode: the project, the code now, and what the agent saw.

Test results are kept per version of the code (a hash of every visible
file), so an edit makes earlier results stale and a revert brings them back.
Everything here is plain data: the state pickles and compares.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from feedbackgym.envs.code.actions import window_of
from feedbackgym.envs.code.project import Project
from feedbackgym.envs.code.sandbox.protocol import RunReport

__all__ = ["CodeState"]


@dataclass
class CodeState:
    """One episode.

    Attributes:
        project: The generated project.
        code: The visible files now, as lists of lines.
        results: Test outcomes per code version: ``{version: {test: status}}``.
        viewed: ``(file, window)`` pairs the agent has viewed.
        traced: ``(file, window)`` pairs in tracebacks of the last run's failures.
        tried: Indices of candidate edits applied at some point.
        failing_seen: Whether a run has shown a target test failing.
        step: Steps taken.
        last_kind: The last action's kind (see ``actions.KINDS``).
        last_action: The last action in words.
        last_result: The last action's result (see ``env.RESULTS``).
        last_output: What the last action printed (for the text observation).
        last_report: The last run's report, if the last action ran tests.
        outcome: ``in_progress``, ``fixed``, ``tests_failing`` or ``infra_error``.
    """

    project: Project
    code: dict[str, list[str]] = field(default_factory=dict)
    results: dict[str, dict[str, str]] = field(default_factory=dict)
    viewed: set[tuple[str, int]] = field(default_factory=set)
    traced: set[tuple[str, int]] = field(default_factory=set)
    tried: set[int] = field(default_factory=set)
    failing_seen: bool = False
    step: int = 0
    last_kind: str = "none"
    last_action: str = ""
    last_result: str = "none"
    last_output: str = ""
    last_report: RunReport | None = None
    outcome: str = "in_progress"

    def __post_init__(self) -> None:
        if not self.code:
            self.revert()

    def revert(self) -> None:
        """Restores every visible file to the generated text."""
        self.code = {name: text.split("\n")[:-1] for name, text in self.project.files}

    @property
    def version(self) -> str:
        """A hash of the code now."""
        digest = hashlib.sha1(usedforsecurity=False)
        for name in sorted(self.code):
            digest.update(name.encode() + b"\0" + "\n".join(self.code[name]).encode() + b"\0")
        return digest.hexdigest()

    def files(self) -> dict[str, str]:
        """The visible files now, as text."""
        return {name: "\n".join(lines) + "\n" for name, lines in self.code.items()}

    def fixed_code(self) -> dict[str, list[str]]:
        """The visible files as they are with exactly the fix applied."""
        code = {name: text.split("\n")[:-1] for name, text in self.project.files}
        fix = self.project.fix
        code[fix.file][fix.line - 1] = fix.text
        return code

    def status_now(self) -> dict[str, str]:
        """The latest known outcome of each test on the code now."""
        return self.results.get(self.version, {})

    def record(self, report: RunReport) -> None:
        """Stores a run's outcomes for the code now and notes what it showed."""
        known = self.results.setdefault(self.version, {})
        visible = set(self.code)
        self.traced = set()
        for result in report.results:
            known[result.name] = result.status
            if result.status != "pass" and result.name in self.project.failing:
                self.failing_seen = True
            if result.status in ("fail", "error"):
                self.traced |= {(f, window_of(n)) for f, n, _ in result.frames if f in visible}
        self.last_report = report

    def bug_window(self) -> tuple[str, int]:
        """The ``(file, window)`` that holds the faulty line."""
        return self.project.bug_file, window_of(self.project.bug_line)
