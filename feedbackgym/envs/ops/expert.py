"""The oracle: the next action of an on-call engineer who knows the fault.

It follows the subgoal library: triage every alert, gather each fault's
root-cause evidence, apply the mitigation (the lagging replica before a
failover), wait for recovery, verify it and declare. It reads the hidden
state, so it is never shown to the agent; it serves datasets, reviews and tests.
"""

from __future__ import annotations

from feedbackgym.envs.ops.actions import action_index
from feedbackgym.envs.ops.catalog import GLOBAL_ACTIONS, INTERACTING_PAIRS
from feedbackgym.envs.ops.state import ActiveFault, IncidentState
from feedbackgym.envs.ops.subgoals import evidence_needed

__all__ = ["expert_action"]


def _fix_order(state: IncidentState) -> list[ActiveFault]:
    """Faults in the order to fix them: the first of an interacting pair first."""
    firsts = {a for a, _ in INTERACTING_PAIRS}
    return sorted(state.faults, key=lambda f: f.name not in firsts)


def expert_action(state: IncidentState) -> int:
    """Returns the expert's next action index for ``state``."""
    for service in state.initial_alerts:
        for kind in ("metrics", "logs"):
            if not state.has_evidence(service, kind):
                return action_index(f"inspect_{kind}", service)
    for fault in _fix_order(state):
        for kind in evidence_needed(fault):
            if not state.has_evidence(fault.root, kind):
                return action_index(f"inspect_{kind}", fault.root)
        if fault.mitigated_at is None:
            if any(
                (other.name, fault.name) in INTERACTING_PAIRS and not state.is_recovered(other)
                for other in state.faults
            ):
                return action_index("wait")
            mitigation = fault.fault.mitigation
            if mitigation in GLOBAL_ACTIONS:
                return action_index(mitigation)
            return action_index(mitigation, fault.root)
    if not all(state.is_recovered(f) for f in state.faults):
        return action_index("wait")
    for fault in state.faults:
        if fault.root not in state.verified:
            return action_index("inspect_metrics", fault.root)
    return action_index("declare_resolved")
