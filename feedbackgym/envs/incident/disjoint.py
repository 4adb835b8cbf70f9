"""OpsIncident-v2's split rule: test incidents on systems and solutions that training never poses.

v1 held out (fault type, topology shape) pairs, but drew a seed's topology with
the same draws in both splits, so a test seed mostly met its train twin's
service map, and a held-out fault often took the same fix as a train one. v2
keeps v1's pair rule and adds two:

* **Disjoint systems.** Each split draws its topologies from a stream of its
  own (the seed's stream tagged with the split), and a service map (names,
  roles and call edges) belongs to one split by a stable digest of it
  (:func:`map_split`): no test map equals a train map.
* **New solutions.** An incident's *solution key* is its key with each fault
  replaced by what fixes it (the mitigation, and whether the root's deploy
  history is evidence), the shape canonicalised (:func:`solution_key`). A
  solution key belongs to one split by its digest, so no test incident is
  solved, up to names, by the actions of a train incident. Faults keep the
  fix a real fault of their kind takes.

Example:
    >>> import numpy as np
    >>> from feedbackgym.envs.incident.scenario import PRESETS
    >>> state = draw_split_incident("easy", PRESETS["easy"], "test", np.random.default_rng(0))
    >>> map_split(state.topology), solution_split(state)
    ('test', 'test')
"""

from __future__ import annotations

import numpy as np

from feedbackgym.envs.incident.catalog import SLOT_ROLES
from feedbackgym.envs.incident.scenario import (
    Difficulty,
    IncidentFault,
    IncidentState,
    draw_incident,
    incident_key,
)
from feedbackgym.envs.incident.topology import Topology, digest, draw_topology

__all__ = [
    "MAP_SHARE",
    "SOLUTION_SHARE",
    "draw_split_incident",
    "fix_of",
    "map_key",
    "map_split",
    "solution_key",
    "solution_split",
]

MAP_SHARE = 4
"""One service map in this many belongs to the test split."""
SOLUTION_SHARE = 4
"""One solution key in this many belongs to the test split."""
STREAM_TAGS: dict[str, int] = {"train": 0x7472, "test": 0x7465}
"""What tags each split's topology stream (so test seed s and train seed s draw apart)."""
MAX_MAP_DRAWS = 2000
"""Topologies drawn for one map of the split before a reset gives up."""


def map_key(topology: Topology) -> str:
    """The service map: each service's name and role, and the named call edges.

    Two topologies share it exactly when an agent would read the same map.

    Example:
        >>> a = Topology((0, 1, 3), ("lb", "web", "orders"), ((0, 1), (1, 3)))
        >>> map_key(a) == map_key(Topology((0, 2, 3), ("lb", "web", "orders"), ((0, 2), (2, 3))))
        True
    """
    roles = sorted(
        f"{name}:{SLOT_ROLES[slot]}"
        for slot, name in zip(topology.slots, topology.names, strict=True)
    )
    edges = sorted(f"{topology.name_of(a)}>{topology.name_of(b)}" for a, b in topology.calls)
    return digest("|".join(roles) + "#" + "|".join(edges), 16)


def _split_of(key: str, share: int) -> str:
    return "test" if int(key[:8], 16) % share == 0 else "train"


def map_split(topology: Topology) -> str:
    """The split a service map belongs to (``"train"`` or ``"test"``)."""
    return _split_of(map_key(topology), MAP_SHARE)


def fix_of(fault: IncidentFault) -> str:
    """What fixes ``fault``: its mitigation, and ``+deploys`` when its deploy history is evidence.

    Example:
        >>> from feedbackgym.envs.incident.scenario import IncidentFault as F
        >>> fix_of(F("memory_leak", 2, (0, 2))), fix_of(F("disk_full", 9, (9,)))
        ('rollback+deploys', 'clear_disk')
    """
    return fault.fault.mitigation + ("+deploys" if fault.fault.deploy else "")


def solution_key(state: IncidentState) -> str:
    """The incident's key with each fault replaced by what fixes it (:func:`fix_of`).

    Two incidents share it when the same actions, up to names, solve both.
    """
    topology, faults = state.topology, state.faults
    return incident_key(
        state.preset, state.difficulty, topology, faults, state.misleading, describe=fix_of
    )


def solution_split(state: IncidentState) -> str:
    """The split the incident's solution belongs to."""
    return _split_of(digest(solution_key(state), 16), SOLUTION_SHARE)


def draw_split_incident(
    preset: str, difficulty: Difficulty, split: str, rng: np.random.Generator
) -> IncidentState:
    """Draws a v2 incident of ``split``: v1's draw, on the split's own maps and solutions.

    The topology comes from a stream seeded by ``rng`` and tagged with the
    split, and is drawn again until its map belongs to ``split``; the faults
    come from ``rng`` (v1's pair rule) and are drawn again until the
    solution belongs to ``split``.

    Raises:
        ValueError: ``split`` is unknown, or the knobs leave the split no map or incident.
    """
    if split not in STREAM_TAGS:
        raise ValueError(f"split must be one of {tuple(STREAM_TAGS)}, got {split!r}")
    stream = np.random.default_rng([int(rng.integers(2**63)), STREAM_TAGS[split]])

    def draw_map() -> Topology:
        for _ in range(MAX_MAP_DRAWS):
            topology = draw_topology(difficulty.size, stream)
            if map_split(topology) == split:
                return topology
        raise ValueError(f"no service map of the {split} split within {difficulty.size}")

    return draw_incident(
        preset,
        difficulty,
        split,
        rng,
        draw_map=draw_map,
        accept=lambda state: solution_split(state) == split,
    )
