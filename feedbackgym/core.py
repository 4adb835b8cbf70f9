"""Plain data shared by every part of feedbackgym: subgoals, progress, feedback.

A task's *subgoal library* is a list of :class:`Subgoal`: named, described
milestones with a predicate over the env's state and prerequisites that form a
chain or a DAG. :class:`SubgoalTracker` evaluates the library step by step and
reports which subgoals are done; a subgoal counts as done once its predicate
holds *and* all its prerequisites are done, and stays done (latched).

Feedback is plain, JSON-safe data with a text rendering for LLM agents: a
:class:`Hint` names the subgoals to pursue next; a :class:`Review` critiques the
last steps of a finished episode. :class:`StepRecord` is what a reviewer reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property, lru_cache
from typing import Any

__all__ = [
    "DEFAULT_HINT_LEVEL",
    "HINT_LEVELS",
    "Hint",
    "ReexplorePoint",
    "Review",
    "ReusableSegment",
    "StepRecord",
    "Subgoal",
    "SubgoalTracker",
    "as_clause",
    "next_subgoal_ids",
    "prerequisite_order",
]


HINT_LEVELS: tuple[str, ...] = ("phase", "target", "action")
"""How much a guide's hint or a review discloses: ``"phase"`` names the kind of
next step and only services (entities) the agent has seen a symptom of;
``"target"`` names the hidden target (the root service and the fault);
``"action"`` adds the expert's next action, for ablations."""
DEFAULT_HINT_LEVEL = "phase"
"""The level everywhere unless asked otherwise: it reveals nothing unobserved."""


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
        targets: Entities the subgoal concerns (services, elements, files), from
            the env's ``target_vocabulary`` when it has one; a guide's vector
            channel encodes them. Where to look, never what to do.
        kind: The type of milestone, shared across episodes (``"triage"``),
            from the env's ``subgoal_kinds`` when it has one; a guide's vector
            channel one-hots it.
        phase: The milestone in words at the ``phase`` hint level: the kind of
            step, naming nothing the agent has not observed (``description``
            is the ``target`` level's). Empty: ``description`` reveals nothing
            hidden, so every level uses it.

    Example:
        >>> sg = Subgoal("lit", "turn the light on", lambda s: s["light"])
        >>> sg.predicate({"light": True})
        True
    """

    id: str
    description: str
    predicate: Callable[[Any], bool] = field(compare=False, repr=False)
    requires: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    kind: str = ""
    phase: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Returns the JSON-safe part of the subgoal (everything but the predicate)."""
        return {
            "id": self.id,
            "description": self.description,
            "requires": list(self.requires),
            "targets": list(self.targets),
            "kind": self.kind,
            "phase": self.phase,
        }


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
        self._order = prerequisite_order(self.subgoals)
        self._dependents: dict[str, list[str]] = {sg.id: [] for sg in self.subgoals}
        for sg in self.subgoals:
            for required in sg.requires:
                self._dependents[required].append(sg.id)
        self.done: dict[str, bool] = dict.fromkeys(ids, False)
        """Progress by id; read it, change it only through :meth:`reset` or :meth:`restore`."""
        self._pending: list[Subgoal] = []
        self._blocked: dict[str, int] = {}
        self.restore({})

    def reset(self) -> None:
        """Marks every subgoal as not done."""
        self.restore({})

    def restore(self, progress: dict[str, bool]) -> None:
        """Sets the progress (e.g. from a snapshot); ids not in ``progress`` are not done."""
        done = self.done
        for key in done:
            done[key] = bool(progress.get(key, False))
        self._pending = [sg for sg in self._order if not done[sg.id]]
        self._blocked = {
            sg.id: sum(not done[required] for required in sg.requires) for sg in self._order
        }

    def update(self, state: Any) -> dict[str, bool]:
        """Evaluates the predicates on ``state`` and returns a copy of the progress.

        Only subgoals not done yet whose prerequisites are all done are
        evaluated, in prerequisite order, so one that completes can unlock the
        next within the same update.
        """
        done, blocked = self.done, self._blocked
        completed = False
        for sg in self._pending:
            if not blocked[sg.id] and sg.predicate(state):
                done[sg.id] = completed = True
                for dependent in self._dependents[sg.id]:
                    blocked[dependent] -= 1
        if completed:
            self._pending = [sg for sg in self._pending if not done[sg.id]]
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


def prerequisite_order(library: Sequence[Subgoal]) -> list[Subgoal]:
    """The library with prerequisites first (as given when it already is); rejects cycles."""
    placed: set[str] = set()
    for sg in library:
        if not placed.issuperset(sg.requires):
            return [library[i] for i in _order_of(_structure(library))]
        placed.add(sg.id)
    return list(library)


def _structure(subgoals: Iterable[Subgoal]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple((sg.id, sg.requires) for sg in subgoals)


@lru_cache(maxsize=1024)
def _order_of(structure: tuple[tuple[str, tuple[str, ...]], ...]) -> tuple[int, ...]:
    """Positions of a library's subgoals in prerequisite order; rejects cycles.

    Takes only ids and prerequisites, so libraries that differ in descriptions
    or predicates but not in shape share one cache entry.
    """
    pending = list(range(len(structure)))
    placed: set[str] = set()
    ordered: list[int] = []
    while pending:
        ready = [i for i in pending if set(structure[i][1]) <= placed]
        if not ready:
            raise ValueError(
                f"subgoal prerequisites form a cycle among {[structure[i][0] for i in pending]}"
            )
        for i in ready:
            ordered.append(i)
            placed.add(structure[i][0])
            pending.remove(i)
    return tuple(ordered)


def as_clause(description: str) -> str:
    """A subgoal description as a clause inside a sentence: lower-case first letter, no full stop.

    Example:
        >>> as_clause("Triage the app alert.")
        'triage the app alert'
    """
    return description[:1].lower() + description[1:].rstrip(".")


@lru_cache(maxsize=1024)
def _hint_sentence(texts: tuple[str, ...]) -> str:
    """The words of a hint (one per set of subgoals: a guide repeats the same hint often)."""
    if not texts:
        return "Hint: all subgoals are done"
    clauses = [as_clause(t) for t in texts]
    parts = [f"first {clauses[0]}"] + [f"then {c}" for c in clauses[1:]]
    return "Hint: " + ", ".join(parts)


def next_subgoal_ids(library: Sequence[Subgoal], progress: Mapping[str, bool]) -> list[str]:
    """Ids of the subgoals not done yet, in the order to pursue them.

    Subgoals whose prerequisites are all done come first (in library order),
    then the rest in prerequisite order, so ``[:2]`` reads "first A, then B".
    """
    ready: list[str] = []
    blocked: list[str] = []
    for sg in prerequisite_order(library):
        if not progress.get(sg.id, False):
            unblocked = all(progress.get(r, False) for r in sg.requires)
            (ready if unblocked else blocked).append(sg.id)
    return ready + blocked


@dataclass(frozen=True)
class Hint:
    """Guide feedback: the subgoals to pursue next, in order (an action only at ``action`` level).

    Attributes:
        subgoal_ids: Ids of the subgoals to reach next, first one first.
        texts: Their descriptions, aligned with ``subgoal_ids``.
        step: The episode step at which the hint was given.
        positions: Each subgoal's index in the episode's library (for the
            vector channel's one-hot).
        targets: The entities the first subgoal concerns.
        kind: The first subgoal's kind.

    Example:
        >>> Hint(("a", "b"), ("open the door", "reach the goal"), step=3).text
        'Hint: first open the door, then reach the goal'
    """

    subgoal_ids: tuple[str, ...]
    texts: tuple[str, ...]
    step: int
    positions: tuple[int, ...] = ()
    targets: tuple[str, ...] = ()
    kind: str = ""

    @property
    def text(self) -> str:
        """The hint in words, for text observations."""
        return _hint_sentence(self.texts)

    def to_dict(self) -> dict[str, Any]:
        """Returns the hint as JSON-safe data."""
        return {
            "subgoal_ids": list(self.subgoal_ids),
            "texts": list(self.texts),
            "step": self.step,
            "positions": list(self.positions),
            "targets": list(self.targets),
            "kind": self.kind,
            "text": self.text,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Hint:
        """Rebuilds a hint from :meth:`to_dict` output."""
        return cls(
            tuple(data["subgoal_ids"]),
            tuple(data["texts"]),
            int(data["step"]),
            tuple(data.get("positions", ())),
            tuple(data.get("targets", ())),
            str(data.get("kind", "")),
        )


@dataclass(frozen=True)
class StepRecord:
    """One step of an episode, as a reviewer reads it.

    Attributes:
        step: Index of the step in its episode (0 for the first action).
        action: The action taken (JSON-safe: an int or a string).
        reward: The env reward.
        done_ids: Ids of the subgoals done after the step.
        harmful: Whether the env flagged the action as harmful
            (``info["harmful"]``).
        expert_action: The expert's action in the state before the step, when
            action-level suggestions are enabled and the env has an expert.
        action_text: The action in words, when the env can say it.
    """

    step: int
    action: Any
    reward: float
    done_ids: tuple[str, ...]
    harmful: bool = False
    expert_action: Any = None
    action_text: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Returns the record as JSON-safe data."""
        data = asdict(self)
        data["done_ids"] = list(self.done_ids)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepRecord:
        """Rebuilds a record from :meth:`to_dict` output."""
        return cls(**{**data, "done_ids": tuple(data["done_ids"])})


@dataclass(frozen=True)
class ReusableSegment:
    """A stretch of steps that reached a subgoal and can be reused.

    Attributes:
        start: First step of the segment.
        end: Last step of the segment (inclusive), where the subgoal was reached.
        subgoal_id: The subgoal it reached.
    """

    start: int
    end: int
    subgoal_id: str


@dataclass(frozen=True)
class ReexplorePoint:
    """A step to explore again, with what to try in that state.

    Attributes:
        step: The step to restart from (the state before this step's action).
        state_summary: A short description of the state there.
        suggestion: What to try, at the subgoal level ("reach: ...").
        reason: ``"harmful"`` (the env flagged the action) or ``"stalled"``
            (no subgoal progress for too long).
        action_suggestion: The expert's action there, only when the user
            opted in to action-level suggestions.
    """

    step: int
    state_summary: str
    suggestion: str
    reason: str
    action_suggestion: Any = None


@dataclass(frozen=True)
class Review:
    """Review feedback on the last ``window`` steps of a finished episode.

    Attributes:
        window: ``(first_step, last_step)`` covered, inclusive.
        reusable: Segments that advanced subgoals.
        reexplore: Points to explore again, with suggestions.
        summary: The critique in words.
        score: In ``[0, 1]``: the fraction of subgoals reached, 1 on success.
        credit: Per-step credit over the window (aligned with its steps):
            positive on reusable segments, negative at re-explore points.
        success: Whether the episode succeeded.
    """

    window: tuple[int, int]
    reusable: tuple[ReusableSegment, ...]
    reexplore: tuple[ReexplorePoint, ...]
    summary: str
    score: float
    credit: tuple[float, ...] = ()
    success: bool = False

    @cached_property
    def text(self) -> str:
        """The review in words, for text observations."""
        lines = [f"Review of your last attempt (score {self.score:.2f}): {self.summary}"]
        lines += [
            f"- Reuse steps {s.start}-{s.end}: they reached {s.subgoal_id}." for s in self.reusable
        ]
        lines += [
            f"- Step {p.step} ({p.reason}): in the state '{p.state_summary}', {p.suggestion}"
            for p in self.reexplore
        ]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """Returns the review as JSON-safe data."""
        return {
            "window": list(self.window),
            "reusable": [dict(vars(s)) for s in self.reusable],
            "reexplore": [dict(vars(p)) for p in self.reexplore],
            "summary": self.summary,
            "score": self.score,
            "credit": list(self.credit),
            "success": self.success,
            "text": self.text,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Review:
        """Rebuilds a review from :meth:`to_dict` output."""
        return cls(
            window=(int(data["window"][0]), int(data["window"][1])),
            reusable=tuple(ReusableSegment(**s) for s in data["reusable"]),
            reexplore=tuple(ReexplorePoint(**p) for p in data["reexplore"]),
            summary=data["summary"],
            score=float(data["score"]),
            credit=tuple(data.get("credit", ())),
            success=bool(data.get("success", False)),
        )
