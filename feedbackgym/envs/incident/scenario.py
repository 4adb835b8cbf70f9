"""Difficulty presets, the hidden state of an incident, and how a seed draws one.

A scenario is a topology (:mod:`~feedbackgym.envs.incident.topology`), faults
placed where the catalog allows, the call path along which each fault's
symptoms cascade up to the service that alerts first, and misleading alerts.
The *split* decides which compositions a seed may draw: a pair (fault type,
topology shape) is held out for the test split when a stable digest of it
falls in the held-out quarter, so a test incident always holds a pair that no
train incident holds, while every fault type and every shape also occurs in
training.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any

import numpy as np

from feedbackgym.envs.incident.catalog import (
    FAULTS,
    FAULTS_BY_ROLE,
    LOG_SIGNALS,
    METRICS,
    N_SLOTS,
    SLOT_ROLES,
    Fault,
)
from feedbackgym.envs.incident.topology import (
    Topology,
    TopologySize,
    canonical,
    digest,
    draw_topology,
    paths_to,
    shape_key,
)

__all__ = [
    "DIFFICULTIES",
    "INSPECTIONS",
    "PRESETS",
    "SPLITS",
    "Difficulty",
    "IncidentFault",
    "IncidentState",
    "draw_incident",
    "is_held_out",
    "widened",
]

SPLITS: tuple[str, ...] = ("train", "test")
"""Which compositions a seed draws: ``"train"`` or the held-out ``"test"``."""
INSPECTIONS: tuple[str, ...] = ("metrics", "logs", "deploys")
"""What ``inspect_<kind>`` looks at, in the ``inspected`` observation's column order."""
HELD_OUT_SHARE = 4
"""One (fault type, shape) pair in this many is held out for the test split."""
MAX_DRAWS = 200
"""Topologies a reset tries before it gives up (a preset that cannot place its faults)."""


@dataclass(frozen=True)
class Difficulty:
    """The knobs of an incident's difficulty (a preset, or your own).

    Attributes:
        min_services: Fewest services in the topology (at least 3).
        max_services: Most services (at most 16).
        faults: Faults at once (each in its own service).
        min_hops: Fewest call hops from the first alert down to a fault's root.
        max_hops: Most hops (a path shorter than that gives fewer).
        misleading_alerts: Healthy services that alert with misleading symptoms.
        recovery_steps: Steps from a correct mitigation to full recovery.
        max_apis: Most api services (longer service-to-service chains).
        burn: SLO budget an unmitigated fault burns per step at unit pressure.
        step_limit: The preset's step limit (truncation).
        waves: Waves of faults: the next wave's ``faults`` start once every
            fault of the one before has recovered (a cascading failure), so
            the horizon grows with the waves.

    Example:
        >>> PRESETS["easy"].faults, PRESETS["extreme"].faults, PRESETS["extreme"].waves
        (1, 2, 3)
    """

    min_services: int
    max_services: int
    faults: int
    min_hops: int
    max_hops: int
    misleading_alerts: int
    recovery_steps: int
    max_apis: int
    burn: float
    step_limit: int
    waves: int = 1

    def __post_init__(self) -> None:
        problems = []
        if not 3 <= self.min_services <= self.max_services <= N_SLOTS:
            problems.append(
                f"services must satisfy 3 <= min_services <= max_services <= {N_SLOTS}, "
                f"got {self.min_services}..{self.max_services}"
            )
        if not 0 <= self.min_hops <= self.max_hops:
            problems.append(f"hops must satisfy 0 <= min_hops <= max_hops, got {self.min_hops}..")
        needed = self.faults * (self.waves + 1) + self.misleading_alerts
        if self.faults < 1 or self.waves < 1 or needed > self.max_services:
            problems.append(
                f"faults ({self.faults}) and waves ({self.waves}) must be at least 1, and "
                f"every root, each wave's alerts and the misleading alerts "
                f"({self.misleading_alerts}) need {needed} services, more than "
                f"max_services={self.max_services}"
            )
        if self.misleading_alerts < 0 or self.recovery_steps < 1:
            problems.append("misleading_alerts must be >= 0 and recovery_steps >= 1")
        if not 1 <= self.max_apis <= 4:
            problems.append(f"max_apis must be in 1..4, got {self.max_apis}")
        if self.burn < 0 or self.step_limit < 1:
            problems.append("burn must be >= 0 and step_limit >= 1")
        if problems:
            raise ValueError("impossible difficulty: " + "; ".join(problems))

    @property
    def size(self) -> TopologySize:
        """The topology's size bounds."""
        return TopologySize(self.min_services, self.max_services, self.max_apis)

    @classmethod
    def parameters(cls) -> tuple[str, ...]:
        """The knob names, as ``gym.make`` takes them."""
        return tuple(f.name for f in fields(cls))


PRESETS: dict[str, Difficulty] = {
    "easy": Difficulty(5, 8, 1, 1, 2, 0, 2, 3, 0.010, 50),
    "medium": Difficulty(7, 10, 1, 1, 3, 2, 3, 3, 0.008, 70),
    "hard": Difficulty(9, 13, 2, 2, 4, 2, 4, 4, 0.005, 100),
    "extreme": Difficulty(12, 16, 2, 3, 6, 2, 8, 4, 0.0025, 200, waves=3),
}
"""The difficulty presets, easiest first."""
DIFFICULTIES: tuple[str, ...] = tuple(PRESETS)


def widened(target: Difficulty, width: float) -> Difficulty:
    """``target``'s knobs at a curriculum ``width``: the easy preset's at 0, ``target``'s at 1.

    Each count (services, faults, hops, misleading alerts, recovery steps, api
    services, waves) is interpolated and rounded, the burn interpolated; the
    step limit stays ``target``'s (the episode's time limit, which the
    observation's ``time`` is read against), and the services never exceed
    ``target``'s positions (its ``max_services``, below the easy preset's in a
    custom target).

    Raises:
        ValueError: ``width`` is outside ``[0, 1]``.

    Example:
        >>> half = widened(PRESETS["hard"], 0.5)
        >>> (half.min_services, half.max_services, half.faults, half.misleading_alerts)
        (7, 10, 2, 1)
        >>> hard = PRESETS["hard"]
        >>> widened(hard, 0.0).max_services, widened(hard, 1.0) == hard
        (8, True)
    """
    if not 0.0 <= width <= 1.0:
        raise ValueError(f"a curriculum width is in [0, 1], got {width}")
    easiest = PRESETS[DIFFICULTIES[0]]
    knobs: dict[str, Any] = {}
    for name in Difficulty.parameters():
        low, high = getattr(easiest, name), getattr(target, name)
        between = low + width * (high - low)
        knobs[name] = between if isinstance(high, float) else int(round(between))
    knobs["step_limit"] = target.step_limit
    knobs["max_services"] = min(knobs["max_services"], target.max_services)
    knobs["min_services"] = min(knobs["min_services"], knobs["max_services"])
    return Difficulty(**knobs)


PRESSURE_GROWTH = 1.0 / 40.0
"""Pressure an unmitigated fault gains per step; the burn grows with it."""


@dataclass
class IncidentFault:
    """A fault in progress.

    Attributes:
        name: Its type, a key of :data:`~feedbackgym.envs.incident.catalog.FAULTS`.
        root: The slot of the service it started in.
        path: The call path its symptoms cascade along, from the service that
            alerts first down to the root (the root last).
        pressure: Grows each step while unmitigated; burn and symptoms scale with it.
        growth: Pressure gained per step (halved by scaling up a leaking service).
        mitigated_at: The step of the correct mitigation, or ``None``.
        wave: The wave it starts in (0: at the incident's start).
    """

    name: str
    root: int
    path: tuple[int, ...]
    wave: int = 0
    pressure: float = 0.0
    growth: float = PRESSURE_GROWTH
    mitigated_at: int | None = None

    @property
    def fault(self) -> Fault:
        """The fault type's catalog entry."""
        return FAULTS[self.name]

    @property
    def hops(self) -> tuple[int, ...]:
        """The services strictly between the first alert and the root."""
        return self.path[1:-1]


@dataclass
class IncidentState:
    """Everything the simulator knows about the running incident."""

    preset: str
    difficulty: Difficulty
    split: str
    topology: Topology
    faults: list[IncidentFault]
    misleading: tuple[int, ...]
    initial_alerts: tuple[int, ...]
    recent_deploys: dict[int, str]
    deploy_versions: dict[int, str]
    incident: str
    step: int = 0
    budget: float = 1.0
    declared: bool = False
    outcome: str = "in_progress"
    evidence: dict[tuple[int, str], int] = field(default_factory=dict)
    verified: set[int] = field(default_factory=set)
    rolled_back: set[int] = field(default_factory=set)
    breakers: set[int] = field(default_factory=set)
    penalties: list[list[float]] = field(default_factory=list)
    last_output: str = ""
    last_action: str = ""
    last_result: int = 0
    metrics_seen: np.ndarray = field(
        default_factory=lambda: np.zeros((N_SLOTS, len(METRICS)), np.float32)
    )
    seen_at: list[float] = field(default_factory=lambda: [-1e9] * N_SLOTS)
    logs_seen: np.ndarray = field(
        default_factory=lambda: np.zeros((N_SLOTS, len(LOG_SIGNALS)), np.int8)
    )
    deploys_seen: np.ndarray = field(default_factory=lambda: np.zeros((N_SLOTS, 2), np.int8))
    log_pointers: np.ndarray = field(default_factory=lambda: np.zeros((N_SLOTS, N_SLOTS), np.int8))
    inspected: np.ndarray = field(
        default_factory=lambda: np.zeros((N_SLOTS, len(INSPECTIONS)), np.int8)
    )
    findings: dict[tuple[int, str], str] = field(default_factory=dict)
    symptoms_seen: set[int] = field(default_factory=set)
    alerts_seen: set[int] = field(default_factory=set)
    """Slots that have alerted while the agent watched (v2's hints name only what showed)."""
    unhealthy_seen: set[int] = field(default_factory=set)
    """Slots whose inspected metrics or logs were off (a fault's or a misleading alert's)."""
    blamed_seen: set[int] = field(default_factory=set)
    """Slots a log line the agent read blamed."""
    cause_seen: set[int] = field(default_factory=set)
    """Slots whose own logs showed a root-cause signal (the fault's, not a caller's)."""
    wave: int = 0
    wave_starts: list[int] = field(default_factory=lambda: [0])

    def name(self, slot: int) -> str:
        """The service name in ``slot``."""
        return self.topology.name_of(slot)

    def recovery(self, fault: IncidentFault) -> float:
        """How far ``fault`` has recovered, from 0 (unmitigated) to 1."""
        if fault.mitigated_at is None:
            return 0.0
        return min(1.0, (self.step - fault.mitigated_at) / self.difficulty.recovery_steps)

    def is_recovered(self, fault: IncidentFault) -> bool:
        """Whether ``fault`` has been mitigated and the system has fully recovered."""
        return self.recovery(fault) >= 1.0

    def has_evidence(self, slot: int, kind: str, wave: int = 0) -> bool:
        """Whether the agent has run ``inspect_<kind>`` on ``slot`` since ``wave`` began."""
        return self.evidence.get((slot, kind), -1) >= self.wave_starts[wave]

    def active_faults(self) -> list[IncidentFault]:
        """The faults of the waves begun so far (read it; the last wave's is ``faults`` itself)."""
        if self.wave + 1 >= self.difficulty.waves:
            return self.faults
        return [f for f in self.faults if f.wave <= self.wave]

    def active_alerts(self) -> list[int]:
        """Slots alerting now: unrecovered faults' first alerts, untriaged misleading ones."""
        alerting = {f.path[0] for f in self.active_faults() if not self.is_recovered(f)}
        for slot in self.misleading:
            if not (self.has_evidence(slot, "metrics") and self.has_evidence(slot, "logs")):
                alerting.add(slot)
        return sorted(alerting)


@lru_cache(maxsize=1 << 16)
def fault_held_out(fault_type: str, shape: str) -> bool:
    """Whether the pair (``fault_type``, topology ``shape``) belongs to the test split.

    Example:
        >>> sum(fault_held_out(f, "shape-a") for f in FAULTS) < len(FAULTS)
        True
    """
    return int(digest(f"{fault_type}|{shape}", 8), 16) % HELD_OUT_SHARE == 0


def is_held_out(faults: list[IncidentFault], shape: str) -> bool:
    """Whether an incident with ``faults`` in a topology of ``shape`` is a test incident."""
    return any(fault_held_out(f.name, shape) for f in faults)


def draw_incident(
    preset: str,
    difficulty: Difficulty,
    split: str,
    rng: np.random.Generator,
    *,
    draw_map: Callable[[], Topology] | None = None,
    accept: Callable[[IncidentState], bool] | None = None,
) -> IncidentState:
    """Draws an incident of ``split`` from ``rng``.

    Args:
        preset: The preset's name (or ``"custom"``), part of the incident key.
        difficulty: Its knobs.
        split: ``"train"`` or ``"test"``.
        rng: The env's seeded generator; the incident depends on it only.
        draw_map: Draws the topology (default: from ``rng``, v1's stream;
            OpsIncident-v2 draws each split's systems from a stream of its own).
        accept: Whether a drawn incident may be posed (default: every one;
            OpsIncident-v2 keeps each split's solutions apart); a refused one is drawn again.

    Raises:
        ValueError: No topology within the knobs could host the faults.
    """
    for _ in range(MAX_DRAWS):
        topology = draw_map() if draw_map is not None else draw_topology(difficulty.size, rng)
        shape = shape_key(topology)
        faults = _place_faults(topology, shape, difficulty, split, rng)
        if faults is None:
            continue
        used = {s for f in faults for s in f.path}
        free = [s for s in topology.slots if s not in used]
        if len(free) < difficulty.misleading_alerts:
            continue
        picks = rng.permutation(len(free))[: difficulty.misleading_alerts]
        misleading = tuple(sorted(free[i] for i in picks))
        alerts = tuple(sorted({f.path[0] for f in faults if f.wave == 0} | set(misleading)))
        recent = {f.root: str(f.fault.deploy) for f in faults if f.fault.deploy}
        for slot in misleading:
            if rng.random() < 0.5 and SLOT_ROLES[slot] != "third_party":
                recent[slot] = "code"
        versions = {
            s: f"v{int(rng.integers(1, 6))}.{int(rng.integers(0, 20))}." for s in topology.slots
        }
        state = IncidentState(
            preset=preset,
            difficulty=difficulty,
            split=split,
            topology=topology,
            faults=faults,
            misleading=misleading,
            initial_alerts=alerts,
            recent_deploys=recent,
            deploy_versions=versions,
            incident="",
        )
        if accept is None or accept(state):
            state.incident = incident_key(preset, difficulty, topology, faults, misleading)
            return state
    raise ValueError(
        f"no topology within {difficulty} could host {difficulty.faults} faults of the "
        f"{split} split ({MAX_DRAWS} draws); allow more services or fewer faults"
    )


def _place_faults(
    topology: Topology,
    shape: str,
    difficulty: Difficulty,
    split: str,
    rng: np.random.Generator,
) -> list[IncidentFault] | None:
    """Places the faults in distinct services, as the split allows; ``None`` if it cannot.

    Paths may share services, but no path runs through the root of a fault of its wave.
    """
    options = [
        (name, slot)
        for slot in topology.slots
        for name in FAULTS_BY_ROLE[SLOT_ROLES[slot]]
        if slot != topology.slots[0] or difficulty.min_hops == 0
    ]
    held = [(n, s) for n, s in options if fault_held_out(n, shape)]
    kept = [(n, s) for n, s in options if not fault_held_out(n, shape)]
    first_pool = held if split == "test" else kept
    rest_pool = options if split == "test" else kept
    faults: list[IncidentFault] = []
    for index in range(difficulty.faults * difficulty.waves):
        wave = index // difficulty.faults
        same_wave = [f for f in faults if f.wave == wave]
        used = {x for f in same_wave for x in f.path} | {f.root for f in faults}
        pool = [(n, s) for n, s in (rest_pool if index else first_pool) if s not in used]
        roots = {f.root for f in same_wave}
        for pick in rng.permutation(len(pool)).tolist():
            name, root = pool[pick]
            path = _path(topology, root, difficulty, roots, rng)
            if path is not None:
                break
        else:
            return None
        faults.append(IncidentFault(name, root, path, wave=wave))
    return faults


def _path(
    topology: Topology,
    root: int,
    difficulty: Difficulty,
    taken: set[int],
    rng: np.random.Generator,
) -> tuple[int, ...] | None:
    """The cascade path of a fault at ``root``: a call path's tail, first alert first."""
    hops = int(rng.integers(difficulty.min_hops, difficulty.max_hops + 1))
    tails = [
        path[max(0, len(path) - 1 - hops) :]
        for path in paths_to(topology, root)
        if len(path) - 1 >= difficulty.min_hops
    ]
    tails = [t for t in tails if not taken & set(t)]
    if not tails:
        return None
    longest = max(len(t) for t in tails)
    tails = sorted({t for t in tails if len(t) == longest})
    return tails[int(rng.integers(len(tails)))]


def incident_key(
    preset: str,
    difficulty: Difficulty,
    topology: Topology,
    faults: list[IncidentFault],
    misleading: tuple[int, ...],
    describe: Callable[[IncidentFault], str] = lambda fault: fault.name,
) -> str:
    """The incident's key: equal for two seeds exactly when they pose the same problem.

    It covers the topology's shape, each fault's type, root and cascade path,
    and the misleading alerts, up to names, numbers and same-role slot order
    (see :func:`~feedbackgym.envs.incident.topology.canonical`), and the knobs.
    ``describe`` names a fault in the key (its type; OpsIncident-v2's solution
    key names what fixes it instead).
    """
    labels = {s: SLOT_ROLES[s] for s in topology.slots}
    ordered = sorted(faults, key=lambda f: (f.wave, describe(f)))
    for index, fault in enumerate(ordered):
        labels[fault.root] += f"+root:{describe(fault)}:w{fault.wave}"
        for depth, slot in enumerate(fault.path):
            labels[slot] += f"+path{index}:{depth}"
    for slot in misleading:
        labels[slot] += "+misleading"
    faults_part = ",".join(sorted(f"{describe(f)}@{SLOT_ROLES[f.root]}" for f in faults))
    knobs = preset if PRESETS.get(preset) == difficulty else f"custom-{digest(repr(difficulty), 6)}"
    return f"{knobs}/{faults_part}/{canonical(topology, labels)}"
