"""The incident console as text, for LLM agents.

The rendering is a pure function of the state and uses only :data:`CHARSET`,
so it is always inside the env's ``Text`` observation space.
"""

from __future__ import annotations

from collections.abc import Sequence

from feedbackgym.envs.base import CHARSET
from feedbackgym.envs.ops.catalog import SERVICES
from feedbackgym.envs.ops.state import INSPECTIONS, IncidentState

__all__ = ["CHARSET", "MAX_TEXT_LENGTH", "render_text"]

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
    if state.last_action:
        lines.append(f"> {state.last_action}")
        lines += [f"  {line}" for line in state.last_output.split("\n")]
    findings = [
        f"  {service} {kind} (step {state.evidence[(service, kind)]}): {state.findings[key]}"
        for service in SERVICES
        for kind in INSPECTIONS
        if (key := (service, kind)) in state.findings
    ]
    if findings:
        lines.append("Findings:")
        lines += findings
    text = "\n".join(lines)
    return text[:MAX_TEXT_LENGTH]
