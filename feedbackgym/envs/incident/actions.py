"""The v1 console's action table: eleven kinds on each service position, then three globals.

A preset with at most ``n`` services has ``Discrete(11 * n + 3)``: action
``i < 11 * n`` applies kind ``i % 11`` to the service at position ``i // 11``
(the episode's services in slot order, so a position's role changes little
between episodes; the ``roles`` observation says which); ``wait``,
``escalate`` and ``declare resolved`` follow. An action on a position the
episode leaves empty is valid and answers "no such service" (the env's
``action_masks`` marks it), so a policy never crashes on one; text naming a
service the episode does not have is an error.

Example:
    >>> table = action_table(2)
    >>> len(table), table[0], table[-1]
    (25, ('inspect_metrics', 0), ('declare_resolved', None))
    >>> meanings(table, ("gateway",))[1], meanings(table, ("gateway",))[12]
    ('inspect logs gateway', 'inspect logs <no service 1>')
"""

from __future__ import annotations

import re
from typing import Any

from feedbackgym.envs.base import index_or_text
from feedbackgym.envs.incident.catalog import GLOBAL_KINDS, SERVICE_KINDS
from feedbackgym.errors import InvalidAction

__all__ = [
    "action_table",
    "kind_words",
    "meanings",
    "normalise",
    "parse_action",
    "position_name",
]

ActionTable = tuple[tuple[str, int | None], ...]


def action_table(positions: int) -> ActionTable:
    """``(kind, position)`` of every index, for ``positions`` positions (``None``: global)."""
    return tuple((kind, p) for p in range(positions) for kind in SERVICE_KINDS) + tuple(
        (kind, None) for kind in GLOBAL_KINDS
    )


def kind_words(kind: str) -> str:
    """An action kind in words (``inspect_logs`` -> ``inspect logs``)."""
    return kind.replace("_", " ")


def position_name(names: tuple[str, ...], position: int) -> str:
    """The service at ``position`` by name, or ``<no service p>`` past the episode's services."""
    return names[position] if position < len(names) else f"<no service {position}>"


def meanings(table: ActionTable, names: tuple[str, ...]) -> tuple[str, ...]:
    """Every index in words, ``names`` being the services by position."""
    return tuple(
        kind_words(kind) + ("" if p is None else " " + position_name(names, p)) for kind, p in table
    )


def normalise(text: str) -> str:
    """Text as the parser compares it: lower case, ``_``/``-`` as spaces, no ``Action:``."""
    text = text.strip().lower().replace("_", " ").replace("-", " ")
    text = re.sub(r"^(action|next action)\s*:\s*", "", text)
    return re.sub(r"\s+", " ", text.strip(" .!`'\""))


def parse_action(action: Any, by_meaning: dict[str, int], size: int, names: tuple[str, ...]) -> int:
    """An index or a text into a valid index.

    Args:
        action: An integer (Python or numpy) or text such as ``"inspect logs web"``.
        by_meaning: The episode's normalised meanings (of real services), by index.
        size: The action space's size.
        names: The episode's services (for the error message).

    Raises:
        InvalidAction: Out of range, a service the episode lacks, or another type.
    """
    action = index_or_text(action, size)
    if isinstance(action, int):
        return action
    text = normalise(action)
    if text.isdecimal():
        return parse_action(int(text), by_meaning, size, names)
    if text in by_meaning:
        return by_meaning[text]
    kinds = "|".join(k.replace("_", " ") for k in SERVICE_KINDS)
    raise InvalidAction(
        f"cannot parse action {action!r}; valid: '<{kinds}> <service>' with service one of "
        f"{', '.join(names)}; or one of "
        f"{', '.join(k.replace('_', ' ') for k in GLOBAL_KINDS)}; or an index 0..{size - 1}"
    )
