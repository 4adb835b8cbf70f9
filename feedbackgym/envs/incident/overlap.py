"""How much of a test split's structure occurs in its train split, counted on the evaluator's side.

:func:`count_overlap` resets a train env and a test env over seed ranges and
compares, per test seed, four keys of the hidden state (never read from
``info``):

* the **service map** (names, roles, call edges:
  :func:`~feedbackgym.envs.incident.disjoint.map_key`),
* the **shape** (the role-labelled call graph up to isomorphism, names removed),
* the **incident key** (fault types, roots, paths, misleading alerts),
* the **solution key** (each fault replaced by what fixes it): a test
  incident whose solution key occurs in training is solved by a train
  incident's actions, up to names (a *solution twin*).

It counts v1 and v2 alike, so the two can be compared in one run.

Example:
    >>> from feedbackgym.envs.incident.v2 import IncidentEnvV2
    >>> o = count_overlap(lambda split: IncidentEnvV2("easy", split=split), range(200), range(50))
    >>> o.maps_shared, o.keys_shared, o.solution_twins
    (0, 0, 0)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from feedbackgym.envs.incident.disjoint import map_key, solution_key
from feedbackgym.envs.incident.topology import shape_key

__all__ = ["Overlap", "count_overlap"]


@dataclass(frozen=True)
class Overlap:
    """Test seeds whose structure occurs among the train seeds'.

    Attributes:
        train_seeds: Train seeds drawn.
        test_seeds: Test seeds drawn.
        maps_shared: Test seeds whose service map some train seed has.
        shapes_shared: Test seeds whose shape some train seed has.
        keys_shared: Test seeds whose incident key some train seed has.
        solution_twins: Test seeds whose solution key some train seed has.
    """

    train_seeds: int
    test_seeds: int
    maps_shared: int
    shapes_shared: int
    keys_shared: int
    solution_twins: int

    def share(self, field: str) -> float:
        """One count as a share of the test seeds (``field``: e.g. ``"shapes_shared"``)."""
        return int(getattr(self, field)) / max(self.test_seeds, 1)


def _keys(env: Any, seeds: Iterable[int]) -> list[tuple[str, str, str, str]]:
    rows = []
    for seed in seeds:
        env.reset(seed=seed)
        state = env.unwrapped.state
        topology = state.topology
        rows.append((map_key(topology), shape_key(topology), state.incident, solution_key(state)))
    return rows


def count_overlap(
    make_env: Callable[[str], Any], train_seeds: Iterable[int], test_seeds: Iterable[int]
) -> Overlap:
    """Counts the test seeds whose map, shape, incident or solution occurs in training.

    Args:
        make_env: Makes the env of a split (``"train"`` or ``"test"``).
        train_seeds: The train seeds to draw.
        test_seeds: The test seeds to draw.
    """
    train = _keys(make_env("train"), train_seeds)
    test = _keys(make_env("test"), test_seeds)
    seen = [set(column) for column in zip(*train, strict=True)] if train else [set()] * 4
    shared = [sum(row[i] in seen[i] for row in test) for i in range(4)]
    return Overlap(len(train), len(test), *shared)
