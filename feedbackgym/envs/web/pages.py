"""Episode pages: a fresh browser context per episode, the next one prepared ahead.

A :class:`Site` is what a context serves: files from package data under a fake
``*.feedbackgym.test`` origin, answered by Playwright routing inside the
browser, so no socket is opened and every other request is refused; nothing
leaves the machine. :class:`EpisodePages` opens one new context and page per
episode and, while an episode is played, prepares the next page in the
background (context, routing, load), so that a reset only has to start the
task on a page that is already there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import mimetypes
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from feedbackgym.envs.web.browser import (
    CALL_TIMEOUT_S,
    BrowserError,
    BrowserHost,
    Page,
    PlaywrightError,
    Route,
    wait,
)

__all__ = ["DRIVER_JS", "SPARES_PER_SITE", "VIEWPORT", "EpisodePages", "Site"]

T = TypeVar("T")

DRIVER_JS = Path(__file__).with_name("driver.js")
"""The page driver installed in every document (see ``driver.js``)."""
VIEWPORT = {"width": 1024, "height": 768}
"""The browser window, in CSS pixels."""
SPARES_PER_SITE = 2
"""Most spare pages the browser host keeps ready per site."""
_CLOSE_TIMEOUT_S = 10.0
_PRELOAD = """urls => Promise.all(urls.map(url => new Promise(done => {
  const image = new Image();
  image.onload = image.onerror = done;
  image.src = url;
  (window.__fgPreloaded = window.__fgPreloaded || []).push(image);
})))"""


@dataclass(frozen=True)
class Site:
    """Files served under a fake origin, plus scripts run in each document first.

    Attributes:
        origin: ``http://<name>.feedbackgym.test``; requests elsewhere are refused.
        mounts: URL path prefix -> directory, longest prefix first.
        start_path: The page an episode opens.
        fallback: File served for unknown paths (an app's ``index.html``, so
            that its client-side routes reload), or ``None`` (404).
        init_scripts: Files whose JavaScript runs before the page's own.
        preload: Image URLs (paths) loaded into the page before an episode
            starts, so that layout never waits for them.
    """

    origin: str
    mounts: tuple[tuple[str, Path], ...]
    start_path: str
    fallback: Path | None = None
    init_scripts: tuple[Path, ...] = (DRIVER_JS,)
    preload: tuple[str, ...] = ()

    @property
    def start_url(self) -> str:
        """The absolute URL an episode opens."""
        return self.origin + self.start_path

    def read(self, path: str) -> tuple[bytes, str] | None:
        """Returns the body and content type served at ``path``, or ``None`` (404)."""
        found = self._resolve(path)
        if found is None:
            found = self.fallback
        if found is None:
            return None
        content_type = mimetypes.guess_type(found.name)[0] or "application/octet-stream"
        return _read(found), content_type

    def _resolve(self, path: str) -> Path | None:
        for prefix, directory in self.mounts:
            if path.startswith(prefix):
                candidate = (directory / path[len(prefix) :]).resolve()
                if candidate.is_relative_to(directory.resolve()) and candidate.is_file():
                    return candidate
        return None


@functools.cache
def _read(path: Path) -> bytes:
    return path.read_bytes()


class EpisodePages:
    """Opens a new browser context per episode on the process's shared Chromium.

    Spare pages (fresh contexts with the site loaded, no task started) are kept
    by the browser host per site: each start takes one if there is one and, with
    ``prefetch``, tops them up to :data:`SPARES_PER_SITE`, made concurrently in
    the background (so back-to-back short episodes wait less). Envs of the same
    site share them, so a new env's first reset is as fast as a later one.

    Args:
        site: What the pages serve and open.
        prefetch: Keep spare pages ready for the next episodes.
    """

    def __init__(self, site: Site, *, prefetch: bool = True) -> None:
        self.site = site
        self.prefetch = prefetch
        self._host: BrowserHost | None = None
        self._page: Page | None = None

    @property
    def page(self) -> Page:
        """The current episode's page."""
        if self._page is None:
            raise BrowserError("no page is open; call reset() first")
        return self._page

    def start(self, begin: Callable[[Page], Coroutine[Any, Any, T]], *, reuse: bool = False) -> T:
        """Opens a page for a new episode and returns ``begin(page)``.

        The previous episode's context is closed in the background once the
        new episode has started. If the
        spare page turns out dead (the browser crashed meanwhile), a fresh one
        is opened, relaunching the browser if needed.

        With ``reuse``, the current page is kept when it is still open: the
        caller vouches that nothing has touched it since its own start (a reset
        right after a reset), and ``begin`` starts the task from scratch in it.

        Raises:
            BrowserError: No page could be opened or ``begin`` failed twice.
        """
        host = self._acquire()
        if reuse and self._page is not None and not self._page.is_closed():
            try:
                return host.run(begin(self._page))
            except BrowserError:
                pass  # fall through to a fresh page
        old, self._page = self._page, None
        spare = host.take_spare(self.site)
        try:
            page, result = host.run(_start(host, self.site, spare, begin))
        finally:
            # Closing the old context only once the new episode has started keeps
            # the browser free for it: a close running beside the start doubled
            # the reset time.
            if old is not None:
                try:
                    host.submit(_close_context(old))
                except BrowserError:  # the host is shutting down: its browser goes with it
                    pass
        self._page = page
        if self.prefetch:
            host.top_up_spares(
                self.site, lambda: host.submit(_open_page(host, self.site)), SPARES_PER_SITE
            )
        return result

    def run(self, call: Callable[[Page], Coroutine[Any, Any, T]]) -> T:
        """Runs ``call(page)`` on the current page and waits for it."""
        page = self.page
        assert self._host is not None
        return self._host.run(call(page))

    def close(self) -> None:
        """Closes this env's context and ends its browser lease. Idempotent."""
        self._close(wait_s=_CLOSE_TIMEOUT_S)

    def close_nowait(self) -> None:
        """Like :meth:`close` but without waiting; safe from finalizers."""
        self._close(wait_s=None)

    def _close(self, *, wait_s: float | None) -> None:
        """Closes the context (waiting ``wait_s`` seconds at most; ``None``: not) and the lease."""
        host, self._host = self._host, None
        page, self._page = self._page, None
        if host is None:
            return
        try:
            if page is not None:
                closing = host.submit(_close_context(page))
                if wait_s is not None:
                    wait(closing, wait_s)
        except BrowserError:
            pass
        finally:
            host.release()

    def _acquire(self) -> BrowserHost:
        if self._host is None:
            self._host = BrowserHost.acquire()
        return self._host


# --- on the browser thread -------------------------------------------------------------------


async def _start(
    host: BrowserHost,
    site: Site,
    spare: concurrent.futures.Future[Page] | None,
    begin: Callable[[Page], Coroutine[Any, Any, T]],
) -> tuple[Page, T]:
    page = None
    if spare is not None:
        try:
            page = await asyncio.wrap_future(spare)
        except (PlaywrightError, BrowserError):
            page = None
    for attempt in range(2):
        if page is None or page.is_closed():
            page = await _open_page(host, site)
        try:
            return page, await begin(page)
        except PlaywrightError:
            await _close_context(page)
            page = None
            if attempt == 1:
                raise
    raise AssertionError("unreachable")


async def _open_page(host: BrowserHost, site: Site) -> Page:
    browser = await host.browser()
    context = await browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    try:
        context.set_default_timeout(CALL_TIMEOUT_S * 1000)
        for script in site.init_scripts:
            await context.add_init_script(path=script)
        await context.route("**/*", functools.partial(_serve, site))
        page = await context.new_page()
        await page.goto(site.start_url, wait_until="load")
        if site.preload:
            await page.evaluate(_PRELOAD, list(site.preload))
    except BaseException:
        await _close_quietly(context.close())
        raise
    return page


async def _serve(site: Site, route: Route) -> None:
    url = urlsplit(route.request.url)
    if f"{url.scheme}://{url.netloc}" != site.origin:
        await route.abort("blockedbyclient")
        return
    found = site.read(url.path)
    if found is None:
        await route.fulfill(status=404, body="not found", content_type="text/plain")
        return
    body, content_type = found
    await route.fulfill(status=200, body=body, content_type=content_type)


async def _close_context(page: Page) -> None:
    await _close_quietly(page.context.close())


async def _close_quietly(closing: Coroutine[Any, Any, None]) -> None:
    try:
        await closing
    except PlaywrightError:
        pass
