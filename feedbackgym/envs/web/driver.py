"""Python side of the page driver: one browser round trip per action.

A click is a real mouse click (Playwright's ``mouse.click``) at the point the
last snapshot reported, followed by a snapshot; typing, selecting, scrolling
and going back run inside ``driver.js`` (as Playwright's own ``fill`` and
``select_option`` do) and return the snapshot in the same call. Each function
here is a coroutine run on the browser thread.
"""

from __future__ import annotations

import json
from typing import Any

from feedbackgym.envs.web.actions import WebAction
from feedbackgym.envs.web.browser import BrowserError, Page
from feedbackgym.envs.web.snapshot import PageSnapshot

__all__ = ["DriverConfig", "act", "click", "screenshot", "snapshot", "start"]

DriverConfig = dict[str, Any]
"""``{"max": slots, "root": CSS selector or None, "exclude": [element ids]}``."""

# Arguments and answers cross as JSON strings: Playwright's own transfer of nested
# values is several times slower.
_SNAPSHOT = "cfg => window.__fg.snapshot(JSON.parse(cfg))"
_ACT = "args => window.__fg.act(...JSON.parse(args))"


def _parse(answer: Any) -> PageSnapshot:
    data = json.loads(answer) if isinstance(answer, str) else None
    if not isinstance(data, dict):
        raise BrowserError("the page has no document to observe")
    return PageSnapshot.from_json(data)


async def snapshot(page: Page, cfg: DriverConfig) -> PageSnapshot:
    """Observes the page."""
    return _parse(await page.evaluate(_SNAPSHOT, json.dumps(cfg)))


async def start(page: Page, script: str, arg: Any, cfg: DriverConfig) -> PageSnapshot:
    """Runs the task's start ``script`` (a JS function of ``arg``), then observes.

    Send large arguments as a JSON string (see ``_SNAPSHOT``).
    """
    await page.evaluate(script, arg)
    return await snapshot(page, cfg)


async def click(page: Page, x: float, y: float, cfg: DriverConfig) -> PageSnapshot:
    """Clicks with the mouse at ``(x, y)``, then observes."""
    await page.mouse.click(x, y)
    return await snapshot(page, cfg)


async def act(page: Page, action: WebAction, value: str | None, cfg: DriverConfig) -> PageSnapshot:
    """Types, selects, scrolls or goes back in the page, then observes.

    Args:
        page: The page.
        action: The action; ``action.slot`` is an id of the last snapshot.
        value: The concrete string to type or select (goal fields resolved).
        cfg: The driver configuration.
    """
    payload = {"verb": action.verb, "id": action.slot, "value": value, "dir": action.direction}
    return _parse(await page.evaluate(_ACT, json.dumps([payload, cfg])))


async def screenshot(page: Page) -> bytes:
    """A PNG of the page's viewport as it stands (the text caret hidden).

    Animations are left alone: stopping them would fire their end events and
    could change what the page does next.
    """
    return await page.screenshot(type="png", caret="hide")
