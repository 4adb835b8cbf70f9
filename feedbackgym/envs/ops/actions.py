"""The incident console's action table and the text parser for LLM agents.

Action ``i < len(SERVICES) * len(ACTION_KINDS_PER_SERVICE)`` applies a
per-service kind to a service (``service = i // 8``, ``kind = i % 8``); the
global actions follow. Every index has a readable meaning such as
``"inspect logs app"`` or ``"declare resolved"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from feedbackgym.envs.base import index_or_text
from feedbackgym.envs.ops.catalog import ACTION_KINDS_PER_SERVICE, GLOBAL_ACTIONS, SERVICES
from feedbackgym.errors import InvalidAction

__all__ = ["ACTIONS", "ACTION_MEANINGS", "N_ACTIONS", "Action", "action_index", "parse_action"]


@dataclass(frozen=True)
class Action:
    """One entry of the action table.

    Attributes:
        kind: The action kind (``"restart"``, ``"flush_cache"``, ...).
        service: The target service, or ``None`` for a global action.
    """

    kind: str
    service: str | None = None

    @property
    def meaning(self) -> str:
        """The readable form, also accepted by :func:`parse_action`."""
        words = self.kind.replace("_", " ")
        if self.kind == "failover_db":
            words = "failover db"
        return words if self.service is None else f"{words} {self.service}"


ACTIONS: tuple[Action, ...] = tuple(
    Action(kind, service) for service in SERVICES for kind in ACTION_KINDS_PER_SERVICE
) + tuple(Action(kind) for kind in GLOBAL_ACTIONS)
"""The action table, by index."""

N_ACTIONS = len(ACTIONS)
ACTION_MEANINGS: tuple[str, ...] = tuple(a.meaning for a in ACTIONS)
_INDEX = {(a.kind, a.service): i for i, a in enumerate(ACTIONS)}


def action_index(kind: str, service: str | None = None) -> int:
    """Returns the index of ``kind`` on ``service`` (``None`` for global kinds)."""
    return _INDEX[(kind, service)]


def _normalise(text: str) -> str:
    text = text.strip().lower().replace("_", " ").replace("-", " ")
    text = re.sub(r"^(action|next action)\s*:\s*", "", text)
    text = text.strip(" .!`'\"")
    return re.sub(r"\s+", " ", text)


_BY_MEANING: dict[str, int] = {_normalise(m): i for i, m in enumerate(ACTION_MEANINGS)}


def _valid_choices() -> str:
    kinds = "|".join(k.replace("_", " ") for k in ACTION_KINDS_PER_SERVICE)
    return (
        f"valid: '<{kinds}> <service>' with service one of {', '.join(SERVICES)}; "
        f"or one of {', '.join(repr(ACTION_MEANINGS[action_index(k)]) for k in GLOBAL_ACTIONS)}; "
        f"or an index 0..{N_ACTIONS - 1}"
    )


def parse_action(action: Any) -> int:
    """Turns an action index or an action text into a valid index.

    Args:
        action: An integer index (Python or numpy), or text such as
            ``"inspect logs app"``, ``"Action: restart db_replica"`` or ``"12"``.

    Returns:
        The action index.

    Raises:
        InvalidAction: The index is out of range, the text names no action, or
            the value has another type. The message lists the valid choices.

    Example:
        >>> parse_action("Restart db_replica")
        35
        >>> ACTION_MEANINGS[parse_action(35)]
        'restart db_replica'
    """
    action = index_or_text(action, N_ACTIONS, _valid_choices)
    if isinstance(action, int):
        return action
    text = _normalise(action)
    if text.isdecimal():
        return parse_action(int(text))
    if text in _BY_MEANING:
        return _BY_MEANING[text]
    raise InvalidAction(f"cannot parse action {action!r}; {_valid_choices()}")
