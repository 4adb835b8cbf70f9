"""What a task family of the packaged apps defines, and how its expert acts.

A :class:`WebTask` draws instances from a generator (plain JSON data: what the
app is started with, and the goal), writes the goal in words, builds the
subgoal library, judges success from the app's own state and says what its
expert would do next, as an :class:`Intent` on an element named by its key.
:func:`resolve` turns an intent into an action index of the env's table,
scrolling first when the element is out of view, so the expert acts through
exactly the interface agents use.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from feedbackgym.core import Subgoal
from feedbackgym.envs.web.actions import ActionTable, WebAction
from feedbackgym.envs.web.snapshot import PageSnapshot
from feedbackgym.errors import FeedbackGymError

__all__ = ["ExpertError", "Intent", "WebTask", "fill", "resolve", "route_of"]


class ExpertError(FeedbackGymError):
    """The expert cannot find its next step (a bug in the expert or the app)."""


@dataclass(frozen=True)
class Intent:
    """The expert's next move.

    Attributes:
        verb: ``click``, ``type``, ``select`` or ``back``; in :func:`fill`'s
            input also ``check`` (``value`` ``"on"`` or ``"off"``).
        key: The key (``data-key``, ``id`` or ``name``) of the element to act on.
        value: What to type or select.
    """

    verb: str
    key: str = ""
    value: str | None = None


def route_of(path: str) -> str:
    """The path without query or fragment."""
    return path.split("?", 1)[0].split("#", 1)[0]


def fill(snapshot: PageSnapshot, wanted: Iterable[Intent]) -> Intent | None:
    """The first of ``wanted`` whose field does not hold its value yet, or ``None``.

    A ``type``/``select`` holds when the element's value equals the intent's; a
    ``check`` when the box is ticked for ``"on"`` and clear for ``"off"`` (it is
    returned as a click). Fields that are not on the page are skipped; fields
    out of view are returned, and :func:`resolve` scrolls to them.
    """
    for intent in wanted:
        element = snapshot.by_key(intent.key)
        if element is None and snapshot.where(intent.key) is None:
            continue
        if element is not None:
            if intent.verb == "check":
                if element.checked == (intent.value == "on"):
                    continue
            elif element.value == intent.value:
                continue
        return Intent("click", intent.key) if intent.verb == "check" else intent
    return None


def resolve(intent: Intent, snapshot: PageSnapshot, table: ActionTable) -> int:
    """The action index that carries out ``intent`` on ``snapshot``.

    Raises:
        ExpertError: The element is neither in view nor reachable by scrolling.
    """
    if intent.verb == "back":
        return table.index(WebAction("back"))
    element = snapshot.by_key(intent.key)
    if element is None:
        where = snapshot.where(intent.key)
        if where is None:
            raise ExpertError(f"the expert cannot find {intent.key!r} on {snapshot.path}")
        return table.index(WebAction("scroll", direction="down" if where == "below" else "up"))
    return table.index(WebAction(intent.verb, element.id, intent.value))


class WebTask(ABC):
    """A task family played on one of the packaged apps.

    Attributes:
        name: The ``task`` argument of :class:`~feedbackgym.envs.web.env.WebEnv`.
        app: The app directory under ``apps/``.
        type_values: The vocabulary ``type`` actions draw from.
        select_values: The vocabulary ``select`` actions draw from.
        success_outcome: ``info["outcome"]`` of a successful episode.
    """

    name: str
    app: str
    type_values: tuple[str, ...]
    select_values: tuple[str, ...]
    success_outcome: str

    @abstractmethod
    def generate(self, rng: np.random.Generator) -> dict[str, Any]:
        """Draws an instance: ``{"app": data the app starts with, "goal": the goal}``."""

    @abstractmethod
    def goal_text(self, goal: dict[str, Any]) -> str:
        """The goal in words, as the agent reads it."""

    @abstractmethod
    def goal_values(self, goal: dict[str, Any]) -> set[str]:
        """The vocabulary values the goal asks to type or select."""

    @abstractmethod
    def subgoals(self, goal: dict[str, Any]) -> list[Subgoal]:
        """The subgoal library; predicates read a ``WebState``."""

    @abstractmethod
    def judge(self, goal: dict[str, Any], app: dict[str, Any]) -> tuple[bool, str, bool]:
        """``(terminated, outcome, success)`` from the app's own state."""

    @abstractmethod
    def expert(self, goal: dict[str, Any], app: dict[str, Any], snapshot: PageSnapshot) -> Intent:
        """The expert's next move, from the true state and the page in view."""
