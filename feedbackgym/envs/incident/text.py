"""The v1 console as text, for language agents.

A pure function of the state that uses only :data:`CHARSET`, so it always
lies in the env's ``Text`` observation space. It lists the service map (the
topology is public: any on-call engineer has it), the alerts, the last answer
and every finding.
"""

from __future__ import annotations

from feedbackgym.envs.base import CHARSET
from feedbackgym.envs.incident.catalog import SLOT_ROLES
from feedbackgym.envs.incident.scenario import IncidentState
from feedbackgym.envs.ops.text import answer_and_findings

__all__ = ["CHARSET", "MAX_TEXT_LENGTH", "render_text"]

MAX_TEXT_LENGTH = 8192
"""Longest text observation; a longer rendering keeps its head."""
GOAL = "Goal: find and fix the causes of the incident, verify recovery, then declare it resolved."


def render_text(state: IncidentState, max_steps: int) -> str:
    """Renders what the agent knows: the map, status, alerts, the last answer, findings."""
    topology, name = state.topology, state.name
    services = [
        f"  {name(s)} ({SLOT_ROLES[s].replace('_', ' ')})"
        + (
            f" calls {', '.join(name(c) for c in topology.callees(s))}"
            if topology.callees(s)
            else ""
        )
        for s in topology.slots
    ]
    alerts = state.active_alerts()
    lines = [
        GOAL,
        "Services:",
        *services,
        f"Step {state.step} of {max_steps} | SLO budget {state.budget:.0%}",
        f"Alerts: {', '.join(name(s) for s in alerts) if alerts else 'none'}",
    ]
    lines += answer_and_findings(state, ((slot, name(slot)) for slot in topology.slots))
    return "\n".join(lines)[:MAX_TEXT_LENGTH]
