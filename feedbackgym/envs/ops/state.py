"""The hidden state of an incident and how a scenario is drawn from a seed.

:class:`IncidentState` is everything the simulator knows, including what the
agent has not inspected yet. It is plain, deep-copyable data so that episodes
can be snapshotted and restored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from feedbackgym.envs.ops.catalog import (
    FAULTS,
    INCOMPATIBLE_PAIRS,
    INTERACTING_PAIRS,
    LOG_SIGNALS,
    METRICS,
    SERVICES,
    Fault,
)

__all__ = ["DIFFICULTIES", "ActiveFault", "Deploy", "IncidentState", "draw_scenario"]

DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard")
INSPECTIONS: tuple[str, ...] = ("metrics", "logs", "deploys")
"""What ``inspect_<kind>`` can look at, in the ``inspected`` observation's column order."""


@dataclass(frozen=True)
class DifficultySettings:
    """How a difficulty shapes a scenario.

    Attributes:
        n_faults: Faults active at once.
        n_red_herrings: Healthy services that alert with misleading symptoms.
        recovery_steps: Steps from a correct mitigation to full recovery.
        interacting_chance: Chance that a two-fault scenario is an interacting pair.
    """

    n_faults: int
    n_red_herrings: int
    recovery_steps: int
    interacting_chance: float = 0.0


SETTINGS: dict[str, DifficultySettings] = {
    "easy": DifficultySettings(n_faults=1, n_red_herrings=0, recovery_steps=2),
    "medium": DifficultySettings(n_faults=1, n_red_herrings=2, recovery_steps=3),
    "hard": DifficultySettings(
        n_faults=2, n_red_herrings=2, recovery_steps=5, interacting_chance=0.3
    ),
}

PRESSURE_GROWTH = 1.0 / 40.0
"""Pressure an unmitigated fault gains per step; SLO burn grows with it."""


@dataclass
class ActiveFault:
    """A fault in progress.

    Attributes:
        name: Its type, a key of :data:`~feedbackgym.envs.ops.catalog.FAULTS`.
        root: The service it started in.
        pressure: Grows each step while unmitigated; burn and symptoms scale with it.
        growth: Pressure gained per step (halved once by scaling up a leaking service).
        mitigated_at: The step of the correct mitigation, or ``None``.
        symptom_services: The services that alert because of it.
    """

    name: str
    root: str
    pressure: float = 0.0
    growth: float = PRESSURE_GROWTH
    mitigated_at: int | None = None
    symptom_services: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.symptom_services = tuple(
            self.root if s == "root" else s for s, _ in FAULTS[self.name].symptoms
        )

    @property
    def fault(self) -> Fault:
        """The fault type's catalog entry."""
        return FAULTS[self.name]


class Deploy(NamedTuple):
    """One entry of a service's deploy history.

    Attributes:
        version: The version string deployed.
        minutes_before: How long before the incident began it went out.
        kind: ``"code"`` or ``"config"``.
    """

    version: str
    minutes_before: int
    kind: str


NEVER = -1e9
"""``seen_at`` of a service whose metrics were never inspected."""

RECENT_DEPLOY_MINUTES = 60
"""A deploy this close to the incident counts as recent."""


@dataclass
class IncidentState:
    """Everything the simulator knows about the running incident."""

    difficulty: str
    faults: list[ActiveFault]
    red_herrings: tuple[str, ...]
    initial_alerts: tuple[str, ...]
    deploys: dict[str, list[Deploy]]
    recovery_steps: int
    step: int = 0
    budget: float = 1.0
    breaker_open: bool = False
    declared: bool = False
    outcome: str = "in_progress"
    evidence: dict[tuple[str, str], int] = field(default_factory=dict)
    verified: set[str] = field(default_factory=set)
    rolled_back: set[str] = field(default_factory=set)
    penalties: list[list[float]] = field(default_factory=list)
    last_output: str = ""
    last_action: str = ""
    last_result: int = 0
    metrics_seen: np.ndarray = field(
        default_factory=lambda: np.zeros((len(SERVICES), len(METRICS)), np.float32)
    )
    seen_at: list[float] = field(default_factory=lambda: [NEVER] * len(SERVICES))
    logs_seen: np.ndarray = field(
        default_factory=lambda: np.zeros((len(SERVICES), len(LOG_SIGNALS)), np.int8)
    )
    deploys_seen: np.ndarray = field(default_factory=lambda: np.zeros((len(SERVICES), 2), np.int8))
    log_pointers: np.ndarray = field(
        default_factory=lambda: np.zeros((len(SERVICES), len(SERVICES)), np.int8)
    )
    inspected: np.ndarray = field(
        default_factory=lambda: np.zeros((len(SERVICES), len(INSPECTIONS)), np.int8)
    )
    findings: dict[tuple[str, str], str] = field(default_factory=dict)

    def recovery(self, fault: ActiveFault) -> float:
        """Returns how far ``fault`` has recovered, from 0 (unmitigated) to 1."""
        if fault.mitigated_at is None:
            return 0.0
        return min(1.0, (self.step - fault.mitigated_at) / self.recovery_steps)

    def is_recovered(self, fault: ActiveFault) -> bool:
        """Whether ``fault`` has been mitigated and the system has fully recovered."""
        return self.recovery(fault) >= 1.0

    def has_evidence(self, service: str, kind: str) -> bool:
        """Whether the agent has run ``inspect_<kind>`` on ``service``."""
        return (service, kind) in self.evidence

    def active_alerts(self) -> list[str]:
        """Services alerting now: unrecovered fault symptoms and untriaged red herrings."""
        alerting = {
            service
            for fault in self.faults
            if fault.mitigated_at is None or self.step - fault.mitigated_at < self.recovery_steps
            for service in fault.symptom_services
        }
        evidence = self.evidence
        for service in self.red_herrings:
            if (service, "metrics") not in evidence or (service, "logs") not in evidence:
                alerting.add(service)
        return [s for s in SERVICES if s in alerting]


def draw_scenario(difficulty: str, rng: np.random.Generator) -> IncidentState:
    """Draws an incident: its faults, red herrings and deploy history.

    Args:
        difficulty: ``"easy"``, ``"medium"`` or ``"hard"``.
        rng: The env's seeded generator; the scenario depends on it only.

    Returns:
        A fresh state at step 0.
    """
    settings = SETTINGS[difficulty]
    faults = _draw_faults(settings, rng)
    roots = {f.root for f in faults}
    symptomatic = {s for f in faults for s in f.symptom_services}
    candidates = [s for s in SERVICES if s not in roots | symptomatic and s != "dependency"]
    picks = rng.permutation(len(candidates))[: settings.n_red_herrings].tolist()
    herrings = tuple(candidates[i] for i in picks)
    alerting = symptomatic | set(herrings)
    return IncidentState(
        difficulty=difficulty,
        faults=faults,
        red_herrings=herrings,
        initial_alerts=tuple(s for s in SERVICES if s in alerting),
        deploys=_draw_deploys(faults, herrings, rng),
        recovery_steps=settings.recovery_steps,
    )


_FAULT_NAMES = tuple(FAULTS)


def draw_int(uniform: float, low: int, high: int) -> int:
    """Maps a uniform draw in ``[0, 1)`` to an integer in ``[low, high)``.

    Generator.integers costs microseconds a call; one batched ``random`` draw
    mapped with this keeps resets and inspections cheap.
    """
    return low + int(uniform * (high - low))


def _pick(options: tuple[str, ...], rng: np.random.Generator) -> str:
    return options[draw_int(rng.random(), 0, len(options))]


def _draw_faults(settings: DifficultySettings, rng: np.random.Generator) -> list[ActiveFault]:
    if settings.n_faults == 2 and rng.random() < settings.interacting_chance:
        pair = INTERACTING_PAIRS[draw_int(rng.random(), 0, len(INTERACTING_PAIRS))]
        return [ActiveFault(name, FAULTS[name].roots[0]) for name in pair]
    faults: list[ActiveFault] = []
    while len(faults) < settings.n_faults:
        name = _pick(_FAULT_NAMES, rng)
        root = _pick(FAULTS[name].roots, rng)
        clash = any(
            f.root == root
            or f.name == name
            or frozenset({f.name, name}) in INCOMPATIBLE_PAIRS
            or _is_interacting(f.name, name)
            for f in faults
        )
        if not clash:
            faults.append(ActiveFault(name, root))
    return faults


def _is_interacting(a: str, b: str) -> bool:
    return (a, b) in INTERACTING_PAIRS or (b, a) in INTERACTING_PAIRS


def _draw_deploys(
    faults: list[ActiveFault], herrings: tuple[str, ...], rng: np.random.Generator
) -> dict[str, list[Deploy]]:
    """Draws every service's deploy history in a few batched draws (resets stay cheap)."""
    draws = rng.random((len(SERVICES), 6)).tolist()  # one batched draw: resets stay cheap
    faulty = {f.root: f.fault.deploy for f in faults if f.fault.deploy}
    deploys: dict[str, list[Deploy]] = {}
    for service, (major, minor, old, older, recent, coin) in zip(SERVICES, draws, strict=True):
        if service == "dependency":
            deploys[service] = []
            continue
        prefix = f"v{draw_int(major, 1, 6)}.{draw_int(minor, 0, 20)}."
        days_ago = draw_int(old, 1, 15)
        history = [
            Deploy(f"{prefix}0", (days_ago + draw_int(older, 1, 15)) * 1440, "code"),
            Deploy(f"{prefix}1", days_ago * 1440, "code"),
        ]
        minutes = draw_int(recent, 5, 45)
        if service in faulty:
            history.append(Deploy(f"{prefix}2", minutes, faulty[service] or "code"))
        elif service in herrings and coin < 0.5:
            history.append(Deploy(f"{prefix}2", minutes, "code"))
        deploys[service] = history
    return deploys
