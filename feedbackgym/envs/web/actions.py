"""The web action table: element slot x verb, plus page actions, and its text parser.

Index ``slot * per_slot + k`` acts on the element with id ``slot``:
``k == 0`` clicks it, the next ``len(type_values)`` indices type one value of
the task's vocabulary into it, the next ``len(select_values)`` choose one
option. Page actions follow the slots: ``scroll up``, ``scroll down`` and, where
the app has history, ``back``.

Readable meanings: ``click 12``, ``type 7 "Berlin"``, ``select 3 "XL"``,
``scroll down``, ``back``. A vocabulary value written in braces, such as
``{username}``, names a field of the episode's goal instead of a fixed string
(MiniWoB++ tasks use these); the env resolves it when it acts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from feedbackgym.envs.base import index_or_text
from feedbackgym.errors import InvalidAction

__all__ = ["ActionTable", "WebAction", "is_field_ref"]


def is_field_ref(value: str) -> bool:
    """Whether a vocabulary value names a goal field (``{name}``) rather than a string."""
    return len(value) > 2 and value[0] == "{" and value[-1] == "}"


@dataclass(frozen=True)
class WebAction:
    """One entry of the action table.

    Attributes:
        verb: ``click``, ``type``, ``select``, ``scroll`` or ``back``.
        slot: The element id for ``click``/``type``/``select``.
        value: The vocabulary value for ``type``/``select``.
        direction: ``up`` or ``down`` for ``scroll``.
    """

    verb: str
    slot: int | None = None
    value: str | None = None
    direction: str | None = None

    @property
    def meaning(self) -> str:
        """The readable form, also accepted by :meth:`ActionTable.parse`."""
        if self.verb == "scroll":
            return f"scroll {self.direction}"
        if self.verb == "back":
            return "back"
        if self.value is None:
            return f"{self.verb} {self.slot}"
        shown = self.value if is_field_ref(self.value) else f'"{self.value}"'
        return f"{self.verb} {self.slot} {shown}"


_COMMAND = re.compile(r"^(click|type|select)\s+\[?(\d+)\]?(?:\s+(.+))?$", re.I | re.S)
_PREFIX = re.compile(r"^(?:next\s+)?action\s*:\s*", re.IGNORECASE)


def _fold(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip()).casefold()


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


class ActionTable:
    """The ``Discrete`` action space of a web env, with meanings and a parser.

    Args:
        slots: Element slots (the most elements an observation lists).
        type_values: The vocabulary that ``type`` draws from.
        select_values: The vocabulary that ``select`` draws from.
        back: Whether the table has a ``back`` action.

    Example:
        >>> table = ActionTable(4, ("Berlin", "Paris"), ("XL",))
        >>> table.n
        19
        >>> table.meaning(table.parse('type 1 "Berlin"'))
        'type 1 "Berlin"'
        >>> table.decode(table.parse("scroll down"))
        WebAction(verb='scroll', slot=None, value=None, direction='down')
    """

    def __init__(
        self,
        slots: int,
        type_values: Sequence[str],
        select_values: Sequence[str],
        *,
        back: bool = True,
    ) -> None:
        self.slots = slots
        self.type_values = tuple(type_values)
        self.select_values = tuple(select_values)
        per_slot = [WebAction("click")]
        per_slot += [WebAction("type", value=v) for v in self.type_values]
        per_slot += [WebAction("select", value=v) for v in self.select_values]
        self.per_slot = len(per_slot)
        actions = [WebAction(a.verb, slot, a.value) for slot in range(slots) for a in per_slot]
        actions += [WebAction("scroll", direction="up"), WebAction("scroll", direction="down")]
        if back:
            actions.append(WebAction("back"))
        self.actions: tuple[WebAction, ...] = tuple(actions)
        self.meanings: tuple[str, ...] = tuple(a.meaning for a in self.actions)
        self._index = {a: i for i, a in enumerate(self.actions)}
        self._values = {
            "type": {_fold(v): v for v in self.type_values},
            "select": {_fold(v): v for v in self.select_values},
        }

    @property
    def n(self) -> int:
        """The number of actions."""
        return len(self.actions)

    def decode(self, index: int) -> WebAction:
        """The action at ``index`` (already validated)."""
        return self.actions[index]

    def meaning(self, index: int) -> str:
        """The readable meaning of ``index``."""
        return self.meanings[index]

    def index(self, action: WebAction) -> int:
        """The index of ``action``.

        Raises:
            InvalidAction: The table has no such action.
        """
        try:
            return self._index[action]
        except KeyError:
            raise InvalidAction(
                f"{action.meaning!r} is not an action of this env; {self._choices()}"
            ) from None

    def parse(self, action: Any, resolve: Callable[[str], str | None] | None = None) -> int:
        """Turns an index or text into a valid action index.

        Args:
            action: An index (Python or numpy integer, or a 0-d array) or text
                such as ``"click 12"``, ``'type 7 "Berlin"'``, ``"select 3 XL"``,
                ``"scroll down"``, ``"back"`` or ``"Action: click 2"``.
            resolve: Maps a typed or selected string that is not in the
                vocabulary to a vocabulary value (the env passes one that
                recognises the values of goal fields).

        Returns:
            The action index.

        Raises:
            InvalidAction: The index is out of range, the text names no action,
                or the value is not in the vocabulary. The message lists the
                valid choices.
        """
        action = index_or_text(action, self.n, self._choices)
        if isinstance(action, int):
            return action
        return self._parse_text(action, resolve)

    def _parse_text(self, text: str, resolve: Callable[[str], str | None] | None) -> int:
        cleaned = _PREFIX.sub("", text.strip()).strip().rstrip(".!")
        folded = _fold(cleaned)
        if folded.isdecimal():
            return self.parse(int(folded))
        if folded in ("scroll", "scroll down", "scroll up", "back", "go back"):
            verb, _, direction = folded.replace("go back", "back").partition(" ")
            if verb == "scroll":
                return self.index(WebAction("scroll", direction=direction or "down"))
            return self.index(WebAction("back"))
        match = _COMMAND.match(cleaned)
        if match is None:
            raise InvalidAction(f"cannot parse action {text!r}; {self._choices()}")
        verb, slot_text, raw_value = match.groups()
        verb, slot = verb.lower(), int(slot_text)
        if slot >= self.slots:
            raise InvalidAction(f"element id {slot} is out of range 0..{self.slots - 1}")
        if verb == "click":
            if raw_value:
                raise InvalidAction(f"'click' takes no value, got {text!r}; {self._choices()}")
            return self.index(WebAction("click", slot))
        if not raw_value:
            raise InvalidAction(f"{verb!r} needs a value, e.g. '{verb} {slot} \"...\"'")
        value = self._lookup(verb, _unquote(raw_value), resolve)
        return self.index(WebAction(verb, slot, value))

    def _lookup(self, verb: str, value: str, resolve: Callable[[str], str | None] | None) -> str:
        known = self._values[verb]
        found = known.get(_fold(value))
        if found is None and resolve is not None:
            found = resolve(value)
        if found is None or found not in known.values():
            vocabulary = ", ".join(repr(v) for v in known.values()) or "none"
            raise InvalidAction(
                f"{value!r} is not in the {verb} vocabulary of this task; "
                f"valid values: {vocabulary}"
            )
        return found

    def _choices(self) -> str:
        pages = "'scroll up', 'scroll down'" + (
            ", 'back'" if WebAction("back") in self._index else ""
        )
        return (
            f"valid: 'click <id>', 'type <id> \"<value>\"', 'select <id> \"<value>\"' "
            f"(ids 0..{self.slots - 1}, values from action_meanings), {pages}, "
            f"or an index 0..{self.n - 1}"
        )
