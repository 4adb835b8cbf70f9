"""The MiniWoB++ tasks feedbackgym ships: goal fields, subgoal libraries and experts.

A task reads two things: the goal fields of its instruction (MiniWoB++'s own
extractor, e.g. ``{"target": "Nieves"}``) and its page state, which
``miniwob_hooks.js`` reads from the task's DOM after every action and the
driver returns as ``app["page"]`` (the text typed, the option chosen, the
boxes ticked, the tab, email or search results shown). Subgoal predicates read
a :class:`~feedbackgym.envs.web.base.WebState` (its ``app``); the library is
built from the page as the episode starts, so it holds only what is left to
do. The expert picks its next action from the page state and the elements in
view, through the env's own action table (``type`` actions name goal fields,
``{target}``), so it acts exactly as an agent can. Neither is shown to agents.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple

from feedbackgym.core import Subgoal
from feedbackgym.envs.web.actions import WebAction
from feedbackgym.envs.web.snapshot import Element, PageSnapshot
from feedbackgym.envs.web.tasks.base import ExpertError

__all__ = [
    "MINIWOB_TASKS",
    "Box",
    "ChooseList",
    "ClickCheckboxes",
    "ClickTab",
    "ClickTarget",
    "EmailInbox",
    "FillAndSubmit",
    "MiniWoBTask",
    "SearchEngine",
    "succeeded",
]

Fields = dict[str, str]
"""Goal fields of the instruction: name -> value, e.g. ``{"username": "kasie"}``."""
Page = dict[str, Any]
"""The task's page state (``app["page"]``), as ``miniwob_hooks.js`` reads it."""

# --- predicates (module level, so that envs holding subgoals pickle) ------------------------


def _page(state: Any) -> Page:
    page: Page = (state.app or {}).get("page") or {}
    return page


def succeeded(state: Any) -> bool:
    """Whether the task ended with a positive reward (its own success).

    Example:
        >>> from feedbackgym.envs.web.base import WebState
        >>> succeeded(WebState({}, app={"done": True, "reward": 1.0}))
        True
    """
    app = state.app or {}
    return bool(app.get("done")) and float(app.get("reward", 0.0)) > 0


def _holds(name: str, value: str, state: Any) -> bool:
    return _page(state).get(name) == value


def _holds_folded(name: str, value: str, state: Any) -> bool:
    return str(_page(state).get(name, "")).casefold() == value.casefold()


def _among(name: str, value: Any, state: Any) -> bool:
    return value in _page(state).get(name, ())


def _tab_shows(link: str, state: Any) -> bool:
    return link in _shown_links(_page(state))


def _searched(state: Any) -> bool:
    return _has_results(_page(state))


def _shown_links(page: Page) -> list[str]:
    """The links of the open tab (click-tab-2)."""
    active, links = int(page.get("active", -1)), page.get("links", [])
    return list(links[active]) if 0 <= active < len(links) else []


def _has_results(page: Page) -> bool:
    """Whether results of the right query are listed (search-engine; a wrong one lists -1s)."""
    return any(index >= 0 for index in page.get("results", ()))


def _library(
    steps: Sequence[tuple[str, str, Callable[[Any], bool]]],
    finish: tuple[str, str],
    *,
    chain: bool = True,
) -> list[Subgoal]:
    """Subgoals for ``steps``, then ``finish`` (the task's own success) after all of them.

    With ``chain``, each step requires the one before; otherwise they are
    independent and only ``finish`` requires them all.
    """
    library: list[Subgoal] = []
    for sid, description, predicate in steps:
        requires = (library[-1].id,) if chain and library else ()
        library.append(Subgoal(sid, description, predicate, requires))
    last = (library[-1].id,) if chain and library else tuple(s.id for s in library)
    return [*library, Subgoal(finish[0], finish[1], succeeded, last)]


# --- expert helpers ------------------------------------------------------------------------


def _find(
    snapshot: PageSnapshot,
    *,
    key: str = "",
    role: str = "",
    label: str | None = None,
    prefix: str = "",
) -> Element | None:
    """The first element in view with all the given properties."""
    for element in snapshot.elements:
        if key and element.key != key:
            continue
        if role and element.role != role:
            continue
        if label is not None and element.label != label:
            continue
        if prefix and not element.label.startswith(prefix):
            continue
        return element
    return None


def _need(element: Element | None, what: str, snapshot: PageSnapshot) -> Element:
    if element is None:
        shown = ", ".join(f"{e.role} {e.label!r}" for e in snapshot.elements) or "nothing"
        raise ExpertError(f"the expert cannot find {what} on {snapshot.path} (in view: {shown})")
    return element


def _click(snapshot: PageSnapshot, what: str, **where: Any) -> WebAction:
    """Clicks the element ``where`` describes (see :func:`_find`)."""
    return WebAction("click", _need(_find(snapshot, **where), what, snapshot).id)


def _type(snapshot: PageSnapshot, field: str, **where: Any) -> WebAction:
    """Types goal field ``field`` into the element ``where`` describes."""
    element = _need(_find(snapshot, **where), f"a text box for {field}", snapshot)
    return WebAction("type", element.id, f"{{{field}}}")


def _scroll_to(snapshot: PageSnapshot, what: str) -> WebAction:
    """Scrolls on to look for ``what`` (down first, then back up)."""
    if snapshot.can_scroll_down:
        return WebAction("scroll", direction="down")
    if snapshot.can_scroll_up:
        return WebAction("scroll", direction="up")
    raise ExpertError(f"the expert cannot find {what} on {snapshot.path}")


# --- the tasks -----------------------------------------------------------------------------


class MiniWoBTask(ABC):
    """What feedbackgym knows of one MiniWoB++ task page.

    Attributes:
        name: The page's name (``"enter-text"``).
        type_fields: Goal fields that ``type`` actions can enter.
        select_fields: Goal fields that ``select`` actions can choose.

    Example:
        >>> task = MINIWOB_TASKS["login-user"]
        >>> fields = {"username": "kasie", "password": "x1"}
        >>> library = task.subgoals(fields, {"username": "", "password": ""})
        >>> [(sg.id, sg.requires) for sg in library]  # doctest: +NORMALIZE_WHITESPACE
        [('type_username', ()), ('type_password', ()),
         ('log_in', ('type_username', 'type_password'))]
        >>> library[0].description
        'Type the username "kasie".'

    Change logs:
     * v0.1.0 - Initially added
    """

    name: str
    type_fields: tuple[str, ...] = ()
    select_fields: tuple[str, ...] = ()

    @abstractmethod
    def subgoals(self, fields: Fields, page: Page) -> list[Subgoal]:
        """The episode's library, from its goal fields and the page as it starts."""

    @abstractmethod
    def expert(self, fields: Fields, page: Page, snapshot: PageSnapshot) -> WebAction:
        """The expert's next action on the page in view.

        Raises:
            ExpertError: What it needs is not on the page.
        """


class ClickTarget(MiniWoBTask):
    """One click on the element the instruction names ends the task.

    Args:
        name: The page.
        subgoal: The subgoal's id.
        description: The subgoal in words (formatted with the goal fields).
        role: The role of the element to click.
        label: Its label, formatted with the goal fields.
    """

    def __init__(self, name: str, subgoal: str, description: str, role: str, label: str) -> None:
        self.name, self._subgoal, self._description = name, subgoal, description
        self._role, self._label = role, label

    def subgoals(self, fields: Fields, page: Page) -> list[Subgoal]:
        """Just the click: ``click_button``, ``close_dialog`` or ``click_link``."""
        return _library((), (self._subgoal, self._description.format(**fields)))

    def expert(self, fields: Fields, page: Page, snapshot: PageSnapshot) -> WebAction:
        """Clicks the element with the named role and label."""
        label = self._label.format(**fields)
        return _click(snapshot, f"{self._role} {label!r}", role=self._role, label=label)


class ClickCheckboxes(MiniWoBTask):
    """Tick exactly the named boxes (``target 0``, ``target 1``...), then Submit."""

    name = "click-checkboxes"

    @staticmethod
    def _wanted(fields: Fields) -> list[str]:
        return [value for key, value in fields.items() if key.startswith("target")]

    def subgoals(self, fields: Fields, page: Page) -> list[Subgoal]:
        """``tick_1`` ... (one per named box, in any order), then ``submit``."""
        wanted = self._wanted(fields)
        ticks = [
            (f"tick_{n}", f'Tick the "{label}" box.', partial(_among, "checked", label))
            for n, label in enumerate(wanted, 1)
        ]
        boxes = ", ".join(f'"{label}"' for label in wanted) or "no box"
        return _library(ticks, ("submit", f"Click Submit with {boxes} ticked."), chain=False)

    def expert(self, fields: Fields, page: Page, snapshot: PageSnapshot) -> WebAction:
        """Clicks every box whose state is wrong, then Submit."""
        wanted = set(self._wanted(fields))
        for element in snapshot.elements:
            if element.role == "checkbox" and element.checked != (element.label in wanted):
                return WebAction("click", element.id)
        return _click(snapshot, "the Submit button", key="subbtn")


class ClickTab(MiniWoBTask):
    """Open the tab whose text holds the named link, then click the link."""

    name = "click-tab-2"

    def subgoals(self, fields: Fields, page: Page) -> list[Subgoal]:
        """``open_tab`` (unless the first tab holds the link), then ``click_link``."""
        link = fields["target"]
        steps = []
        if link not in _shown_links(page):
            steps.append(
                (
                    "open_tab",
                    f'Open the tab that holds the link "{link}".',
                    partial(_tab_shows, link),
                )
            )
        return _library(steps, ("click_link", f'Click the link "{link}".'))

    def expert(self, fields: Fields, page: Page, snapshot: PageSnapshot) -> WebAction:
        """Clicks the link if its tab is open, else the first tab that holds it."""
        link = fields["target"]
        if link in _shown_links(page):
            return _click(snapshot, f"the link {link!r}", role="clickable", label=link)
        for number, links in enumerate(page.get("links", []), 1):
            if link in links:
                return _click(snapshot, f"tab #{number}", key=f"ui-id-{number}")
        raise ExpertError(f"no tab of {snapshot.path} holds the link {link!r}")


class ChooseList(MiniWoBTask):
    """Choose the named option in the list, then Submit."""

    name = "choose-list"
    select_fields = ("target",)

    def subgoals(self, fields: Fields, page: Page) -> list[Subgoal]:
        """``choose`` (unless the list starts on it), then ``submit``."""
        target = fields["target"]
        steps = []
        if page.get("selected") != target:
            steps.append(
                ("choose", f'Choose "{target}" in the list.', partial(_holds, "selected", target))
            )
        return _library(steps, ("submit", f'Click Submit with "{target}" chosen.'))

    def expert(self, fields: Fields, page: Page, snapshot: PageSnapshot) -> WebAction:
        """Selects the option, then clicks Submit."""
        if page.get("selected") != fields["target"]:
            select = _need(_find(snapshot, key="options"), "the list", snapshot)
            return WebAction("select", select.id, "{target}")
        return _click(snapshot, "the Submit button", role="button", label="Submit")


class Box(NamedTuple):
    """A text box of a :class:`FillAndSubmit` page.

    Attributes:
        subgoal: The id of the subgoal "the box holds the field".
        field: The goal field to type.
        key: The box's id, which also names its text in the page state.
        description: The subgoal in words, formatted with the goal fields.
    """

    subgoal: str
    field: str
    key: str
    description: str


class FillAndSubmit(MiniWoBTask):
    """Type goal fields into the page's text boxes, then click its button.

    Args:
        name: The page.
        boxes: The text boxes, each with its subgoal.
        submit: ``(subgoal id, description, button id)`` of the submission.
    """

    def __init__(self, name: str, boxes: Sequence[Box], submit: tuple[str, str, str]) -> None:
        self.name = name
        self.type_fields = tuple(box.field for box in boxes)
        self._boxes, self._submit = tuple(boxes), submit

    def subgoals(self, fields: Fields, page: Page) -> list[Subgoal]:
        """One subgoal per box (in any order), then the submission."""
        steps = [
            (
                box.subgoal,
                box.description.format(**fields),
                partial(_holds, box.key, fields[box.field]),
            )
            for box in self._boxes
        ]
        sid, text, _ = self._submit
        return _library(steps, (sid, text.format(**fields)), chain=False)

    def expert(self, fields: Fields, page: Page, snapshot: PageSnapshot) -> WebAction:
        """Types each field whose box does not hold it yet, then clicks the button."""
        for box in self._boxes:
            if page.get(box.key) != fields[box.field]:
                return _type(snapshot, box.field, key=box.key)
        return _click(snapshot, "the submit button", key=self._submit[2])


class SearchEngine(MiniWoBTask):
    """Search for the query, go to the results page holding the rank, click that result."""

    name = "search-engine"
    type_fields = ("query",)
    per_page = 3
    """Results per page."""

    def subgoals(self, fields: Fields, page: Page) -> list[Subgoal]:
        """``type_query``, ``search``, ``open_page`` (past page 1), then ``click_result``."""
        query, rank = fields["query"], int(fields["rank"])
        steps: list[tuple[str, str, Callable[[Any], bool]]] = [
            (
                "type_query",
                f'Type "{query}" into the search box.',
                partial(_holds_folded, "query", query),
            ),
            ("search", f'Search for "{query}".', _searched),
        ]
        if rank > self.per_page:
            number = (rank - 1) // self.per_page + 1
            steps.append(
                (
                    "open_page",
                    f"Open results page {number}.",
                    partial(_among, "results", rank - 1),
                )
            )
        return _library(steps, ("click_result", f"Click search result number {rank}."))

    def expert(self, fields: Fields, page: Page, snapshot: PageSnapshot) -> WebAction:
        """Types the query, searches, pages on and clicks the result by its position."""
        query, rank = fields["query"], int(fields["rank"])
        results = page.get("results", [])
        if rank - 1 in results:
            position = results.index(rank - 1)
            links = [e for e in snapshot.elements if e.role == "link"]
            if position >= len(links) or links[position].label != page["titles"][position]:
                raise ExpertError(f"search result {rank} is not in view on {snapshot.path}")
            return WebAction("click", links[position].id)
        if _has_results(page):
            number = str((rank - 1) // self.per_page + 1)
            return _click(snapshot, f"results page {number}", role="link", label=number)
        if str(page.get("query", "")).casefold() != query.casefold():
            return _type(snapshot, "query", key="search-text")
        return _click(snapshot, "the Search button", key="search")


class EmailInbox(MiniWoBTask):
    """Find the sender's email and trash it, star it, reply to it or forward it."""

    name = "email-inbox"
    type_fields = ("to", "message")
    _ICONS = {"delete": "trash", "star": "star"}  # the instruction's verb -> the icon

    def subgoals(self, fields: Fields, page: Page) -> list[Subgoal]:
        """``open_email``, then the action: a click, or compose, fill in and send."""
        sender, task = fields["by"], fields["task"]
        steps: list[tuple[str, str, Callable[[Any], bool]]] = [
            ("open_email", f"Open the email from {sender}.", partial(_holds, "open", sender)),
        ]
        if task == "reply":
            message = fields["message"]
            steps += [
                ("start_reply", "Click Reply.", partial(_holds, "compose", "reply")),
                (
                    "write_reply",
                    f'Write "{message}" as the reply.',
                    partial(_holds, "body", message),
                ),
            ]
            finish = ("send", "Send the reply.")
        elif task == "forward":
            to = fields["to"]
            steps += [
                ("start_forward", "Click Forward.", partial(_holds, "compose", "forward")),
                ("address_forward", f"Address it to {to}.", partial(_holds, "to", to)),
            ]
            finish = ("send", "Send the forward.")
        else:
            icon = self._ICONS[task]
            finish = (f"{icon}_email", f"Click the {icon} icon of the email.")
        return _library(steps, finish)

    def expert(self, fields: Fields, page: Page, snapshot: PageSnapshot) -> WebAction:
        """Opens the email (scrolling the inbox), then clicks, or composes and sends."""
        sender, task = fields["by"], fields["task"]
        compose = page.get("compose", "")
        if compose == "reply":
            if page.get("body") != fields["message"]:
                return _type(snapshot, "message", key="reply-text")
            return _click(snapshot, "the send button", key="send-reply")
        if compose == "forward":
            if page.get("to") != fields["to"]:
                return _type(snapshot, "to", role="textbox")  # the first: the body follows
            return _click(snapshot, "the send button", key="send-forward")
        if page.get("open") == sender:
            label = self._ICONS.get(task, task.capitalize())
            return _click(snapshot, f"the {label} button", label=label)
        if page.get("open"):
            return _click(snapshot, "the close button", key="close-email")
        thread = _find(snapshot, role="clickable", prefix=f"{sender} ")
        if thread is None:
            return _scroll_to(snapshot, f"the email from {sender}")
        return WebAction("click", thread.id)


MINIWOB_TASKS: dict[str, MiniWoBTask] = {
    task.name: task
    for task in (
        ClickTarget(
            "click-button", "click_button", 'Click the "{target}" button.', "button", "{target}"
        ),
        ClickCheckboxes(),
        ClickTarget(
            "click-dialog", "close_dialog", 'Close the dialog with its "x".', "button", "Close"
        ),
        ClickTarget(
            "click-link", "click_link", 'Click the link "{target}".', "clickable", "{target}"
        ),
        ClickTab(),
        ChooseList(),
        EmailInbox(),
        FillAndSubmit(
            "enter-text",
            [Box("type_text", "target", "tt", 'Type "{target}" into the text field.')],
            ("submit", "Press Submit.", "subbtn"),
        ),
        FillAndSubmit(
            "login-user",
            [
                Box("type_username", "username", "username", 'Type the username "{username}".'),
                Box("type_password", "password", "password", 'Type the password "{password}".'),
            ],
            ("log_in", "Press Login.", "subbtn"),
        ),
        SearchEngine(),
    )
}
"""The supported tasks by page name. Each needs only clicking, typing and selecting,
and runs the same under a seed: no animations, no clock in what it shows."""
