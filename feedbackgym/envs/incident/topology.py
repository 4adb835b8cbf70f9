"""Service topologies: a dependency graph drawn per seed, and its canonical shape key.

A topology is a directed acyclic graph of calls (caller -> callee) over
services that sit in role slots (:data:`~feedbackgym.envs.incident.catalog.ROLE_SLOTS`).
:func:`draw_topology` draws one; :func:`shape_key` names its shape up to the
services' names and the order of same-role slots (Weisfeiler-Lehman refinement
over roles and call edges), so two seeds with the same shape share the key.

Example:
    >>> import numpy as np
    >>> topo = draw_topology(TopologySize(5, 7, 2), np.random.default_rng(0))
    >>> topo.roles[0], 5 <= len(topo.slots) <= 7
    ('edge', True)
    >>> shape_key(topo) == shape_key(topo)
    True
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from feedbackgym.envs.incident.catalog import NAMES, ROLE_FIRST_SLOT, ROLE_SLOTS, SLOT_ROLES

__all__ = ["Topology", "TopologySize", "digest", "draw_topology", "paths_to", "shape_key"]


@dataclass(frozen=True)
class TopologySize:
    """How big a drawn topology may be.

    Attributes:
        min_services: Fewest services.
        max_services: Most services (at most the 16 slots).
        max_apis: Most api services (1 to 4); more allow longer call chains.
    """

    min_services: int
    max_services: int
    max_apis: int = 4


@dataclass(frozen=True)
class Topology:
    """One drawn topology.

    Attributes:
        slots: The occupied slots, ascending.
        names: Each occupied slot's service name, aligned with ``slots``.
        calls: Call edges as ``(caller slot, callee slot)`` pairs.
    """

    slots: tuple[int, ...]
    names: tuple[str, ...]
    calls: tuple[tuple[int, int], ...]

    @property
    def roles(self) -> tuple[str, ...]:
        """Each occupied slot's role, aligned with ``slots``."""
        return tuple(SLOT_ROLES[s] for s in self.slots)

    def name_of(self, slot: int) -> str:
        """The name of the service in ``slot``."""
        return self.names[self.slots.index(slot)]

    def callees(self, slot: int) -> tuple[int, ...]:
        """The slots ``slot`` calls."""
        return self._adjacency[0].get(slot, ())

    def callers(self, slot: int) -> tuple[int, ...]:
        """The slots that call ``slot``."""
        return self._adjacency[1].get(slot, ())

    @cached_property
    def _adjacency(self) -> tuple[dict[int, tuple[int, ...]], dict[int, tuple[int, ...]]]:
        """Each slot's callees and callers, in ``calls`` order (built at the first question)."""
        callees: dict[int, list[int]] = {}
        callers: dict[int, list[int]] = {}
        for a, b in self.calls:
            callees.setdefault(a, []).append(b)
            callers.setdefault(b, []).append(a)
        return (
            {s: tuple(v) for s, v in callees.items()},
            {s: tuple(v) for s, v in callers.items()},
        )


@lru_cache(maxsize=1 << 16)
def digest(text: str, size: int = 12) -> str:
    """A short, stable hex digest of ``text`` (the same in every process).

    Example:
        >>> digest("abc", 8)
        'a9993e36'
    """
    return hashlib.sha1(text.encode()).hexdigest()[:size]


def _count(rng: np.random.Generator, low: int, high: int) -> int:
    return int(rng.integers(low, high + 1))


def draw_topology(size: TopologySize, rng: np.random.Generator) -> Topology:
    """Draws a topology: role counts within ``size``, call edges front to back.

    Every topology has one edge service calling every frontend; frontends call
    apis, apis may call later apis and call the back-end roles (cache, queue,
    database, third party), the queue feeds its workers, which call databases
    and third parties. Every service but the edge has at least one caller.
    """
    while True:
        counts = {
            "edge": 1,
            "frontend": _count(rng, 1, 2),
            "api": _count(rng, 1, min(size.max_apis, ROLE_SLOTS["api"])),
            "database": _count(rng, 1, 2),
            "cache": _count(rng, 0, 2),
            "queue": _count(rng, 0, 1),
            "third_party": _count(rng, 0, 2),
        }
        counts["worker"] = _count(rng, 1, 2) if counts["queue"] else 0
        total = sum(counts.values())
        if size.min_services <= total <= size.max_services:
            break
    by_role = {role: [ROLE_FIRST_SLOT[role] + i for i in range(n)] for role, n in counts.items()}
    calls: set[tuple[int, int]] = set()
    edge = by_role["edge"][0]
    calls |= {(edge, f) for f in by_role["frontend"]}
    _wire(calls, by_role["frontend"], by_role["api"], rng, at_most=2)
    apis = by_role["api"]
    for i, api in enumerate(apis):  # service-to-service calls make longer chains
        for later in apis[i + 1 :]:
            if rng.random() < 0.5:
                calls.add((api, later))
    back = by_role["cache"] + by_role["queue"] + by_role["database"] + by_role["third_party"]
    _wire(calls, apis, back, rng, at_most=3)
    calls |= {(q, w) for q in by_role["queue"] for w in by_role["worker"]}
    worker_back = by_role["database"] + by_role["third_party"]
    for worker in by_role["worker"]:
        picks = rng.permutation(len(worker_back))[: _count(rng, 1, 2)]
        calls |= {(worker, worker_back[i]) for i in picks}
    slots = tuple(sorted(s for group in by_role.values() for s in group))
    names = tuple(_names(slots, rng))
    return Topology(slots, names, tuple(sorted(calls)))


def _wire(
    calls: set[tuple[int, int]],
    callers: list[int],
    callees: list[int],
    rng: np.random.Generator,
    *,
    at_most: int,
) -> None:
    """Each caller calls 1..``at_most`` callees; every callee gets at least one caller."""
    if not callees:
        return
    for caller in callers:
        picks = rng.permutation(len(callees))[: _count(rng, 1, min(at_most, len(callees)))]
        calls |= {(caller, callees[i]) for i in picks}
    for callee in callees:
        if not any(b == callee and a in callers for a, b in calls):
            calls.add((callers[int(rng.integers(len(callers)))], callee))


def _names(slots: Iterable[int], rng: np.random.Generator) -> list[str]:
    """Draws distinct names from each role's pool."""
    pools = {role: list(rng.permutation(len(pool))) for role, pool in NAMES.items()}
    return [NAMES[SLOT_ROLES[s]][pools[SLOT_ROLES[s]].pop()] for s in slots]


def _refine(
    calls: tuple[tuple[int, int], ...], slots: tuple[int, ...], labels: tuple[str, ...], rounds: int
) -> list[str]:
    """Weisfeiler-Lehman refinement of the slots' ``labels`` (in slot order) over the call edges.

    Each round a slot's label becomes a digest of its label and the sorted
    labels of its callers and callees, so the result does not depend on which
    same-role slot a service sits in.
    """
    index = {s: i for i, s in enumerate(slots)}
    ins: list[list[int]] = [[] for _ in slots]
    outs: list[list[int]] = [[] for _ in slots]
    for a, b in calls:
        ins[index[b]].append(index[a])
        outs[index[a]].append(index[b])
    current = list(labels)
    neighbours = list(zip(range(len(slots)), ins, outs, strict=True))
    for _ in range(rounds):
        current = [
            digest(
                current[i]
                + "<"
                + ",".join(sorted([current[j] for j in callers]))
                + ">"
                + ",".join(sorted([current[j] for j in callees]))
            )
            for i, callers, callees in neighbours
        ]
    return current


def canonical(topology: Topology, labels: dict[int, str]) -> str:
    """A digest of the topology with per-slot ``labels``, up to names and slot order."""
    return _canonical(topology.calls, topology.slots, tuple(labels[s] for s in topology.slots))


@lru_cache(maxsize=1 << 13)
def _canonical(
    calls: tuple[tuple[int, int], ...], slots: tuple[int, ...], labels: tuple[str, ...]
) -> str:
    """:func:`canonical` of a call graph and its slots' labels (the same graphs recur often)."""
    final = dict(zip(slots, _refine(calls, slots, labels, 3), strict=True))
    nodes = sorted(final.values())
    edges = sorted(f"{final[a]}>{final[b]}" for a, b in calls)
    return digest("|".join(nodes) + "#" + "|".join(edges), 16)


def shape_key(topology: Topology) -> str:
    """The topology's shape: roles and call edges, up to names and same-role slot order."""
    return canonical(topology, {s: SLOT_ROLES[s] for s in topology.slots})


def paths_to(topology: Topology, target: int) -> list[tuple[int, ...]]:
    """Every call path from the edge service down to ``target``, edge first.

    Example:
        >>> topo = Topology((0, 1, 3), ("lb", "web", "orders"), ((0, 1), (1, 3)))
        >>> paths_to(topo, 3)
        [(0, 1, 3)]
    """
    start = topology.slots[0]
    paths: list[tuple[int, ...]] = []

    def walk(path: tuple[int, ...]) -> None:
        if path[-1] == target:
            paths.append(path)
            return
        for callee in topology.callees(path[-1]):
            walk((*path, callee))

    walk((start,))
    return paths
