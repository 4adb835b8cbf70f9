"""Plain data shared by every part of feedbackgym: subgoals and their progress.

A task's *subgoal library* is a list of :class:`Subgoal`: named, described
milestones with a predicate over the env's state and prerequisites that form a
chain or a DAG. :class:`SubgoalTracker` evaluates the library step by step and
reports which subgoals are done; a subgoal counts as done once its predicate
holds *and* all its prerequisites are done, and stays done (latched).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Subgoal", "SubgoalTracker"]


@dataclass(frozen=True)
class Subgoal:
    """A named milestone of a task.

    Attributes:
        id: Short identifier, unique within the library (``"mitigate"``).
        description: What reaching it means, in words an agent can read.
        predicate: Called with the state the library is evaluated on; returns
            whether the milestone holds. Use module-level functions or
            ``functools.partial`` so that envs holding subgoals still pickle.
        requires: Ids of subgoals that must be done before this one counts.

    Example:
        >>> sg = Subgoal("lit", "turn the light on", lambda s: s["light"])
        >>> sg.predicate({"light": True})
        True
    """

    id: str
    description: str
    predicate: Callable[[Any], bool] = field(compare=False, repr=False)
    requires: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Returns the JSON-safe part of the subgoal (everything but the predicate)."""
        return {"id": self.id, "description": self.description, "requires": list(self.requires)}


class SubgoalTracker:
    """Evaluates a subgoal library against a state and latches progress.

    Example:
        >>> lib = [Subgoal("a", "A", lambda s: s >= 1), Subgoal("b", "B", lambda s: s >= 2, ("a",))]
        >>> tracker = SubgoalTracker(lib)
        >>> tracker.update(2)
        {'a': True, 'b': True}
    """

    def __init__(self, subgoals: Sequence[Subgoal]) -> None:
        self.subgoals: tuple[Subgoal, ...] = tuple(subgoals)
        ids = [sg.id for sg in self.subgoals]
        if len(set(ids)) != len(ids):
            raise ValueError(f"subgoal ids must be unique, got {ids}")
        known = set(ids)
        for sg in self.subgoals:
            unknown = set(sg.requires) - known
            if unknown:
                raise ValueError(f"subgoal {sg.id!r} requires unknown subgoals {sorted(unknown)}")
        self._order = _topological_order(self.subgoals)
        self.done: dict[str, bool] = dict.fromkeys(ids, False)

    def reset(self) -> None:
        """Marks every subgoal as not done."""
        for key in self.done:
            self.done[key] = False

    def update(self, state: Any) -> dict[str, bool]:
        """Evaluates the predicates on ``state`` and returns a copy of the progress."""
        done = self.done
        for sg in self._order:
            if done[sg.id]:
                continue
            if all(done[r] for r in sg.requires) and sg.predicate(state):
                done[sg.id] = True
        return dict(done)

    def next_subgoals(self) -> list[Subgoal]:
        """Returns the subgoals not done yet whose prerequisites are all done, in order."""
        return [
            sg
            for sg in self._order
            if not self.done[sg.id] and all(self.done[r] for r in sg.requires)
        ]

    @property
    def fraction_done(self) -> float:
        """The fraction of subgoals done, in ``[0, 1]``."""
        return sum(self.done.values()) / max(1, len(self.done))


def _topological_order(subgoals: Iterable[Subgoal]) -> list[Subgoal]:
    """Orders subgoals so that prerequisites come first; rejects cycles."""
    pending = list(subgoals)
    placed: set[str] = set()
    ordered: list[Subgoal] = []
    while pending:
        ready = [sg for sg in pending if set(sg.requires) <= placed]
        if not ready:
            raise ValueError(
                f"subgoal prerequisites form a cycle among {[sg.id for sg in pending]}"
            )
        for sg in ready:
            ordered.append(sg)
            placed.add(sg.id)
            pending.remove(sg)
    return ordered
