"""What the page driver reports after each action, as plain frozen data.

``driver.js`` lists the interactive elements in view, in document order, so the
same page state always yields the same ids; :class:`PageSnapshot` holds that
list plus the page's title, path, messages, scroll state and the app's own
state (read by subgoal predicates and success checks, never shown to agents).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ROLES", "Element", "PageSnapshot"]

ROLES: tuple[str, ...] = (
    "button",
    "link",
    "textbox",
    "checkbox",
    "radio",
    "select",
    "tab",
    "clickable",
)
"""Element roles, in the order of the vector observation's one-hot code."""

FLAGS: tuple[str, ...] = (
    "checked",
    "disabled",
    "focused",
    "invalid",
    "required",
    "selected",
    "expanded",
)
"""Boolean element states, in the order of the vector observation."""


@dataclass(frozen=True)
class Element:
    """One interactive element in view.

    Attributes:
        id: Its slot: position in the snapshot's list (document order).
        role: One of :data:`ROLES`.
        label: Accessible name (aria-label, label, text, placeholder).
        value: A text box's text or a select's chosen option; empty otherwise.
        key: The element's ``data-key``, ``id`` or ``name`` (for experts; not shown).
        x: Horizontal centre of its visible part, CSS pixels from the left.
        y: Vertical centre of its visible part, CSS pixels from the top.
        width: Width in CSS pixels.
        height: Height in CSS pixels.
        checked: A checked checkbox or radio.
        disabled: Disabled.
        focused: Has the keyboard focus.
        invalid: Marked ``aria-invalid`` by the page.
        required: Required.
        selected: A selected tab or the current page's link.
        expanded: An expanded disclosure.
        error: The validation message of an invalid element.
        options: A select's option texts.
    """

    id: int
    role: str
    label: str
    value: str = ""
    key: str = ""
    x: float = 0.0
    y: float = 0.0
    width: int = 0
    height: int = 0
    checked: bool = False
    disabled: bool = False
    focused: bool = False
    invalid: bool = False
    required: bool = False
    selected: bool = False
    expanded: bool = False
    error: str = ""
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class PageSnapshot:
    """The page after an action.

    Attributes:
        title: Document title.
        path: Path, query and fragment of the URL.
        heading: Text of the first ``h1``.
        messages: Texts of visible alerts and status regions.
        elements: Interactive elements in view, by id.
        more_above: Interactive elements exist above the view.
        more_below: Interactive elements exist below the view (or past the slots).
        can_scroll_up: The page (or its scrolling pane) can scroll up.
        can_scroll_down: It can scroll down.
        can_go_back: The app has an earlier history entry to go back to.
        hidden: Keys of interactive elements out of view -> ``"above"``/``"below"``.
        app: The app's own state (JSON data), for success checks and subgoals.
    """

    title: str
    path: str
    heading: str = ""
    messages: tuple[str, ...] = ()
    elements: tuple[Element, ...] = ()
    more_above: bool = False
    more_below: bool = False
    can_scroll_up: bool = False
    can_scroll_down: bool = False
    can_go_back: bool = False
    hidden: tuple[tuple[str, str], ...] = ()
    app: Any = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PageSnapshot:
        """Builds a snapshot from the driver's JSON answer."""
        elements = tuple(
            Element(**{**e, "options": tuple(e.get("options", ()))}) for e in data["elements"]
        )
        return cls(
            title=data["title"],
            path=data["path"],
            heading=data["heading"],
            messages=tuple(data["messages"]),
            elements=elements,
            more_above=bool(data["more_above"]),
            more_below=bool(data["more_below"]),
            can_scroll_up=bool(data["scroll"]["up"]),
            can_scroll_down=bool(data["scroll"]["down"]),
            can_go_back=bool(data["can_go_back"]),
            hidden=tuple(sorted(data["hidden"].items())),
            app=data["app"],
        )

    def by_key(self, key: str) -> Element | None:
        """The element in view whose key is ``key``, if any."""
        for element in self.elements:
            if element.key == key:
                return element
        return None

    def where(self, key: str) -> str | None:
        """``"above"`` or ``"below"`` for a keyed element out of view; ``None`` otherwise."""
        return dict(self.hidden).get(key)
