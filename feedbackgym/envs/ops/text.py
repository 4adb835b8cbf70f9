"""The incident console as text, for LLM agents.

The rendering is a pure function of the state and uses only :data:`CHARSET`,
so it is always inside the env's ``Text`` observation space.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from feedbackgym.envs.base import CHARSET
from feedbackgym.envs.ops.catalog import SERVICES
from feedbackgym.envs.ops.state import INSPECTIONS, IncidentState

__all__ = ["CHARSET", "MAX_TEXT_LENGTH", "answer_and_findings", "render_text"]

MAX_TEXT_LENGTH = 4096
"""Longest text observation; longer renderings keep their head and are cut."""

GOAL = "Goal: find and fix the cause of the incident, verify recovery, then declare it resolved."


def render_text(
    state: IncidentState, max_steps: int, *, alerts: Sequence[str] | None = None
) -> str:
    """Renders what the agent knows: status, alerts, the last answer and all findings.

    ``alerts`` is ``state.active_alerts()`` when the caller has it already.
    """
    if alerts is None:
        alerts = state.active_alerts()
    lines = [
        GOAL,
        f"Step {state.step} of {max_steps} | SLO budget {state.budget:.0%} | "
        f"circuit breaker {'open' if state.breaker_open else 'closed'}",
        f"Alerts: {', '.join(alerts) if alerts else 'none'}",
    ]
    lines += answer_and_findings(state, ((service, service) for service in SERVICES))
    text = "\n".join(lines)
    return text[:MAX_TEXT_LENGTH]


def answer_and_findings(state: Any, places: Iterable[tuple[Any, str]]) -> list[str]:
    """The console's last answer and findings, as lines (v0's and v1's consoles end with them).

    Args:
        state: The incident's state (v0's or v1's).
        places: Each service's key in the state's findings, with its name, in
            the order the findings are listed.

    Example:
        >>> from feedbackgym.envs.ops.env import OpsIncidentEnv
        >>> env = OpsIncidentEnv("easy")
        >>> _ = env.reset(seed=0)
        >>> _ = env.step("inspect metrics db_primary")
        >>> lines = answer_and_findings(env.state, [("db_primary", "db_primary")])
        >>> lines[0], lines[-2]
        ('> inspect metrics db_primary', 'Findings:')
    """
    lines = []
    if state.last_action:
        lines.append(f"> {state.last_action}")
        lines += [f"  {line}" for line in state.last_output.split("\n")]
    findings = [
        f"  {name} {kind} (step {state.evidence[key]}): {state.findings[key]}"
        for place, name in places
        for kind in INSPECTIONS
        if (key := (place, kind)) in state.findings
    ]
    if findings:
        lines += ["Findings:", *findings]
    return lines
