"""The subgoal library of an incident, built from its scenario.

One episode's library (a triage subgoal per alerting service; ids without a
suffix when there is one fault, with ``_1``/``_2`` when there are two)::

    triage_<service> (each alert) ─► find_root_cause ─► mitigate ─► verify_recovery
        ─► declare_resolved

Descriptions name the hidden root (the ``target`` hint level); each subgoal's
``phase`` words name only the kind of step (the default ``phase`` level).

Predicates are module-level functions bound with :func:`functools.partial`, so
an env holding its library still pickles. Those of the last three steps
(:func:`mitigated`, :func:`recovery_verified`, :func:`declared`) read only
what v0's and v1's incident states share; OpsIncident-v1's library uses them,
and :func:`declaration_subgoal`, too.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Any

from feedbackgym.core import Subgoal
from feedbackgym.envs.ops.catalog import INTERACTING_PAIRS
from feedbackgym.envs.ops.state import ActiveFault, IncidentState

__all__ = [
    "SUBGOAL_KINDS",
    "build_subgoals",
    "declaration_subgoal",
    "declared",
    "evidence_needed",
    "mitigated",
    "recovery_verified",
]

SUBGOAL_KINDS: tuple[str, ...] = (
    "triage",
    "find_root_cause",
    "mitigate",
    "verify_recovery",
    "declare_resolved",
)
"""Kinds of the subgoals an incident's library holds."""


def evidence_needed(fault: ActiveFault) -> tuple[str, ...]:
    """The inspections of the root that make up the root-cause evidence."""
    return ("metrics", "logs", "deploys") if fault.fault.deploy else ("metrics", "logs")


def _alert_triaged(service: str, state: IncidentState) -> bool:
    evidence = state.evidence  # read directly: this runs for every alert on every step
    return (service, "metrics") in evidence and (service, "logs") in evidence


def _root_cause_found(index: int, state: IncidentState) -> bool:
    fault = state.faults[index]
    return all(state.has_evidence(fault.root, kind) for kind in evidence_needed(fault))


def mitigated(index: int, state: Any) -> bool:
    """Whether fault ``index`` of an incident (v0's or v1's ``state``) has been mitigated."""
    return state.faults[index].mitigated_at is not None


def recovery_verified(state: Any) -> bool:
    """Whether every fault has recovered and its root's metrics were inspected since.

    Example:
        >>> from feedbackgym.envs.ops.env import OpsIncidentEnv
        >>> env = OpsIncidentEnv("easy")
        >>> _ = env.reset(seed=0)
        >>> recovery_verified(env.state), mitigated(0, env.state), declared(env.state)
        (False, False, False)
    """
    return all(state.is_recovered(f) and f.root in state.verified for f in state.faults)


def declared(state: Any) -> bool:
    """Whether the incident (v0's or v1's ``state``) has been declared resolved."""
    return bool(state.declared)


def declaration_subgoal(phase: str = "") -> Subgoal:
    """The last subgoal of an incident's library: declare it resolved, once recovery is verified.

    Args:
        phase: Its words at the ``phase`` hint level (``""``: none of its own).

    Example:
        >>> subgoal = declaration_subgoal()
        >>> subgoal.id, subgoal.requires
        ('declare_resolved', ('verify_recovery',))
    """
    return Subgoal(
        "declare_resolved",
        "Declare the incident resolved.",
        declared,
        ("verify_recovery",),
        kind="declare_resolved",
        phase=phase,
    )


def build_subgoals(state: IncidentState) -> list[Subgoal]:
    """Returns the subgoal library for the scenario in ``state``."""
    return list(_library(state.initial_alerts, tuple((f.name, f.root) for f in state.faults)))


@lru_cache(maxsize=4096)
def _library(
    alerts: tuple[str, ...], fault_keys: tuple[tuple[str, str], ...]
) -> tuple[Subgoal, ...]:
    """The library of one scenario shape, cached.

    Predicates read the state they are called on, so one library serves every
    episode with the same alerts and faults.
    """
    faults = [ActiveFault(name, root) for name, root in fault_keys]
    triage = [
        Subgoal(
            f"triage_{service}",
            f"Triage the {service} alert: inspect its metrics and logs.",
            partial(_alert_triaged, service),
            targets=(service,),
            kind="triage",
            phase="Triage the alert: inspect its metrics and logs.",
        )
        for service in alerts
    ]
    subgoals = list(triage)
    suffixes = [""] if len(faults) == 1 else [f"_{i + 1}" for i in range(len(faults))]
    mitigations = []
    names = [f.name for f in faults]
    for index, (fault, sfx) in enumerate(zip(faults, suffixes, strict=True)):
        kinds = " and ".join(evidence_needed(fault)).replace("deploys", "deploy history")
        requires = [sg.id for sg in triage]
        subgoals.append(
            Subgoal(
                f"find_root_cause{sfx}",
                f"Find the root-cause signal: inspect the {kinds} of {fault.root}.",
                partial(_root_cause_found, index),
                tuple(requires),
                (fault.root,),
                "find_root_cause",
                "Find the root-cause signal: follow what your findings point to, and inspect "
                "that service's metrics, logs and deploy history.",
            )
        )
        mitigate_requires = [f"find_root_cause{sfx}"]
        for first, second in INTERACTING_PAIRS:
            if fault.name == second and first in names:
                mitigate_requires.append(f"mitigate{suffixes[names.index(first)]}")
        subgoals.append(
            Subgoal(
                f"mitigate{sfx}",
                f"Stop the {fault.fault.label} at {fault.root}.",
                partial(mitigated, index),
                tuple(mitigate_requires),
                (fault.root,),
                "mitigate",
                "Mitigate the cause you found, where it started.",
            )
        )
        mitigations.append(f"mitigate{sfx}")
    roots = ", ".join(f.root for f in faults)
    subgoals += [
        Subgoal(
            "verify_recovery",
            f"Verify recovery: once it settles, inspect the metrics of {roots}.",
            recovery_verified,
            tuple(mitigations),
            tuple(f.root for f in faults),
            "verify_recovery",
            "Verify recovery: once it settles, inspect the metrics of what you fixed.",
        ),
        declaration_subgoal(),
    ]
    return tuple(subgoals)
