"""The v1 console's action table: eleven kinds on each of the 16 slots, then three globals.

Action ``i < 16 * 11`` applies kind ``i % 11`` to the service in slot
``i // 11``; the globals (``wait``, ``escalate``, ``declare resolved``)
follow. An action on an empty slot is valid and answers "no such service"
(``action_masks`` marks it), so a policy over ``Discrete(179)`` never crashes;
text naming a service the episode does not have is an error.

Example:
    >>> N_ACTIONS, ACTIONS[0], ACTIONS[N_ACTIONS - 1]
    (179, ('inspect_metrics', 0), ('declare_resolved', None))
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from feedbackgym.envs.incident.catalog import GLOBAL_KINDS, N_SLOTS, SERVICE_KINDS
from feedbackgym.errors import InvalidAction

__all__ = [
    "ACTIONS",
    "N_ACTIONS",
    "action_index",
    "meanings",
    "normalise",
    "parse_action",
]

ACTIONS: tuple[tuple[str, int | None], ...] = tuple(
    (kind, slot) for slot in range(N_SLOTS) for kind in SERVICE_KINDS
) + tuple((kind, None) for kind in GLOBAL_KINDS)
"""``(kind, slot)`` of every action index; ``slot`` is ``None`` for a global action."""
N_ACTIONS = len(ACTIONS)
_INDEX = {action: i for i, action in enumerate(ACTIONS)}


def action_index(kind: str, slot: int | None = None) -> int:
    """The index of ``kind`` on ``slot`` (``None`` for a global kind)."""
    return _INDEX[(kind, slot)]


def meanings(names: dict[int, str]) -> tuple[str, ...]:
    """Every index's meaning in words, for the services ``names`` (slot -> name).

    An empty slot's actions read ``"<kind> <empty slot N>"``.

    Example:
        >>> meanings({0: "gateway"})[1]
        'inspect logs gateway'
    """
    return tuple(
        kind.replace("_", " ")
        + ("" if slot is None else " " + names.get(slot, f"<empty slot {slot}>"))
        for kind, slot in ACTIONS
    )


def normalise(text: str) -> str:
    """Text as the parser compares it: lower case, ``_``/``-`` as spaces, no ``Action:``."""
    text = text.strip().lower().replace("_", " ").replace("-", " ")
    text = re.sub(r"^(action|next action)\s*:\s*", "", text)
    return re.sub(r"\s+", " ", text.strip(" .!`'\""))


def parse_action(action: Any, by_meaning: dict[str, int], names: dict[int, str]) -> int:
    """An index or a text into a valid index.

    Args:
        action: An integer (Python or numpy) or text such as ``"inspect logs web"``.
        by_meaning: The episode's normalised meanings, by index.
        names: The episode's services, slot -> name (for the error message).

    Raises:
        InvalidAction: Out of range, a service the episode lacks, or another type.
    """
    if isinstance(action, np.ndarray) and action.shape == ():
        action = action.item()
    if isinstance(action, (bool, np.bool_)):
        raise InvalidAction(f"action must be an integer or text, got {action!r}")
    if isinstance(action, (int, np.integer)):
        if not 0 <= int(action) < N_ACTIONS:
            raise InvalidAction(f"action {int(action)} is outside Discrete({N_ACTIONS})")
        return int(action)
    if isinstance(action, str):
        text = normalise(action)
        if text.isdigit():
            return parse_action(int(text), by_meaning, names)
        if text in by_meaning:
            return by_meaning[text]
        kinds = "|".join(k.replace("_", " ") for k in SERVICE_KINDS)
        raise InvalidAction(
            f"cannot parse action {action!r}; valid: '<{kinds}> <service>' with service one of "
            f"{', '.join(names.values())}; or one of "
            f"{', '.join(k.replace('_', ' ') for k in GLOBAL_KINDS)}; or an index "
            f"0..{N_ACTIONS - 1}"
        )
    raise InvalidAction(f"action must be an integer or text, got {type(action).__name__}")
