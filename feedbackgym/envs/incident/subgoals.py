"""The subgoal library of a v1 incident, at two levels of disclosure.

One episode's library (ids name no service, so they give nothing away)::

    triage ─► [alert_k] ─► [trace_k] ─► find_root_cause_k ─► mitigate_k (each fault k)
        ─► verify_recovery ─► declare_resolved

``alert_k`` (triage a later wave's alert) is there for faults of a later wave,
after every mitigation of the wave before; ``trace_k`` when the path has hops.
Evidence for a fault counts only once its wave has begun.

OpsIncident-v2's library (``build_subgoals(state, trace_step=False)``) has
no ``trace_k``: its ``find_root_cause_k`` asks for the whole trail and the
root's evidence, so the ids and their count depend on the preset only, never
on the hidden depth, and its ``phase`` words (:data:`PHASES_V2`) never call
a service the end of the trail.

Each subgoal's ``description`` is the ``target`` hint level's (it names the
hidden root and the fault); its ``phase`` is the ``phase`` level's (the kind of
step, naming nothing); ``targets`` are service names, which the ``phase`` level
keeps only once the agent has seen a symptom of them.
"""

from __future__ import annotations

from functools import partial

from feedbackgym.core import Subgoal
from feedbackgym.envs.incident.scenario import IncidentFault, IncidentState
from feedbackgym.envs.ops.subgoals import declaration_subgoal, mitigated, recovery_verified

__all__ = ["SUBGOAL_KINDS", "build_subgoals", "evidence_needed"]

SUBGOAL_KINDS: tuple[str, ...] = (
    "triage",
    "trace",
    "find_root_cause",
    "mitigate",
    "verify_recovery",
    "declare_resolved",
)
"""Kinds of the subgoals a library holds."""

PHASES: dict[str, str] = {
    "triage": "Triage the alerts: inspect the metrics and logs of every alerting service.",
    "alert": "Triage the new alert: inspect the metrics and logs of the service that alerts.",
    "trace": "Follow the signal: inspect the logs of each service your findings blame, hop by hop.",
    "find_root_cause": "Find the root-cause evidence where the trail ends: inspect that "
    "service's metrics and logs, and its deploy history.",
    "mitigate": "Mitigate the cause you found, at the service where the trail ends.",
    "verify_recovery": "Verify recovery: once it settles, inspect the metrics of what you fixed.",
    "declare_resolved": "Declare the incident resolved.",
}
"""The ``phase`` level's words for each kind (v1)."""

PHASES_V2: dict[str, str] = {
    **PHASES,
    "find_root_cause": "Find the root cause: follow the log lines that blame another service, "
    "hop by hop, and inspect the metrics, logs and deploy history of the service whose own "
    "logs show the fault.",
    "mitigate": "Mitigate the cause at the service whose own logs show it.",
}
"""OpsIncident-v2's ``phase`` words: nothing said about where the trail ends."""


def evidence_needed(fault: IncidentFault) -> tuple[str, ...]:
    """The inspections of the root that make up its root-cause evidence."""
    return ("metrics", "logs", "deploys") if fault.fault.deploy else ("metrics", "logs")


def _triaged(state: IncidentState) -> bool:
    evidence = state.evidence
    return all((s, "metrics") in evidence and (s, "logs") in evidence for s in state.initial_alerts)


def _alert_triaged(index: int, state: IncidentState) -> bool:
    fault = state.faults[index]
    return fault.wave <= state.wave and all(
        state.has_evidence(fault.path[0], kind, fault.wave) for kind in ("metrics", "logs")
    )


def _traced(index: int, state: IncidentState) -> bool:
    fault = state.faults[index]
    return fault.wave <= state.wave and all(
        state.has_evidence(s, "logs", fault.wave) for s in fault.hops
    )


def _root_found(index: int, state: IncidentState) -> bool:
    fault = state.faults[index]
    return fault.wave <= state.wave and all(
        state.has_evidence(fault.root, kind, fault.wave) for kind in evidence_needed(fault)
    )


def _investigated(index: int, state: IncidentState) -> bool:
    return _traced(index, state) and _root_found(index, state)


def build_subgoals(state: IncidentState, *, trace_step: bool = True) -> list[Subgoal]:
    """Returns the subgoal library of the incident in ``state``.

    Args:
        state: The incident.
        trace_step: v1's library (a ``trace_k`` where a path has hops). With
            ``False``, v2's: ``find_root_cause_k`` covers the trail, and the
            ids depend on the preset only.

    Example:
        >>> import numpy as np
        >>> from feedbackgym.envs.incident.scenario import PRESETS, draw_incident
        >>> state = draw_incident("easy", PRESETS["easy"], "train", np.random.default_rng(3))
        >>> [sg.id for sg in build_subgoals(state, trace_step=False)]
        ['triage', 'find_root_cause_1', 'mitigate_1', 'verify_recovery', 'declare_resolved']
    """
    phases = PHASES if trace_step else PHASES_V2
    name = state.name
    alerts = tuple(name(s) for s in state.initial_alerts)
    library = [
        Subgoal(
            "triage",
            f"Triage the alerts: inspect the metrics and logs of {', '.join(alerts)}.",
            _triaged,
            targets=alerts,
            kind="triage",
            phase=phases["triage"],
        )
    ]
    mitigations = []
    for k, fault in enumerate(state.faults, start=1):
        index, root = k - 1, name(fault.root)
        requires: tuple[str, ...] = ("triage",)
        if fault.wave:
            before = tuple(
                f"mitigate_{j}" for j, f in enumerate(state.faults, 1) if f.wave == fault.wave - 1
            )
            library.append(
                Subgoal(
                    f"alert_{k}",
                    f"Triage the new alert: inspect the metrics and logs of {name(fault.path[0])}.",
                    partial(_alert_triaged, index),
                    before,
                    (name(fault.path[0]),),
                    "triage",
                    phases["alert"],
                )
            )
            requires = (f"alert_{k}",)
        if fault.hops and trace_step:
            hops = tuple(name(s) for s in fault.hops)
            library.append(
                Subgoal(
                    f"trace_{k}",
                    f"Follow the signal: inspect the logs of {', '.join(hops)}.",
                    partial(_traced, index),
                    requires,
                    hops,
                    "trace",
                    phases["trace"],
                )
            )
            requires = (f"trace_{k}",)
        kinds = " and ".join(evidence_needed(fault)).replace("deploys", "deploy history")
        library += [
            Subgoal(
                f"find_root_cause_{k}",
                f"Find the root-cause signal: inspect the {kinds} of {root}.",
                partial(_root_found if trace_step else _investigated, index),
                requires,
                (root,),
                "find_root_cause",
                phases["find_root_cause"],
            ),
            Subgoal(
                f"mitigate_{k}",
                f"Stop the {fault.fault.label} at {root}.",
                partial(mitigated, index),
                (f"find_root_cause_{k}",),
                (root,),
                "mitigate",
                phases["mitigate"],
            ),
        ]
        mitigations.append(f"mitigate_{k}")
    roots = tuple(name(f.root) for f in state.faults)
    library += [
        Subgoal(
            "verify_recovery",
            f"Verify recovery: once it settles, inspect the metrics of {', '.join(roots)}.",
            recovery_verified,
            tuple(mitigations),
            roots,
            "verify_recovery",
            phases["verify_recovery"],
        ),
        declaration_subgoal(phases["declare_resolved"]),
    ]
    return library
