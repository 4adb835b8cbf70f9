"""The v1 oracle: the next action of an on-call engineer who knows the faults.

It follows the subgoal library: triage every alert (a later wave's too), follow each fault's trail
hop by hop, gather the root's evidence, mitigate, wait for recovery, verify
each root and declare. It reads the hidden state, so it is never shown to the
agent; it serves datasets, reviews, the ``action`` hint level and tests.
"""

from __future__ import annotations

from feedbackgym.envs.incident.scenario import IncidentState
from feedbackgym.envs.incident.subgoals import evidence_needed

__all__ = ["expert_action"]


def expert_action(state: IncidentState) -> tuple[str, int | None]:
    """Returns the expert's next action for ``state``: its kind and slot (``None``: global)."""
    for slot in state.initial_alerts:
        for kind in ("metrics", "logs"):
            if not state.has_evidence(slot, kind):
                return (f"inspect_{kind}", slot)
    active = state.active_faults()
    for fault in active:
        wave = fault.wave
        alert = (fault.path[0],) if wave else ()
        for slot, kind in [(s, k) for s in alert for k in ("metrics", "logs")] + [
            (s, "logs") for s in fault.hops
        ]:
            if not state.has_evidence(slot, kind, wave):
                return (f"inspect_{kind}", slot)
        for kind in evidence_needed(fault):
            if not state.has_evidence(fault.root, kind, wave):
                return (f"inspect_{kind}", fault.root)
        if fault.mitigated_at is None:
            return (fault.fault.mitigation, fault.root)
    for fault in active:
        if state.is_recovered(fault) and fault.root not in state.verified:
            return ("inspect_metrics", fault.root)
    if not all(state.is_recovered(f) for f in state.faults):
        return ("wait", None)
    return ("declare_resolved", None)
