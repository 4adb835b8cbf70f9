"""The process's Chromium, driven by Playwright on a private event-loop thread.

Every web env in a process shares one :class:`BrowserHost`: one Playwright
driver and one Chromium, run by Playwright's asyncio API on a daemon thread.
Envs call into it from any thread (an asyncio program included) through
:meth:`BrowserHost.run`, and may leave work running in the background
(:meth:`BrowserHost.submit`), which is how the next episode's page is prepared
while the current one is played.

Envs hold a lease (:meth:`BrowserHost.acquire` / :meth:`BrowserHost.release`).
When the last lease ends, the browser lingers for :data:`LINGER_S` seconds
(``FEEDBACKGYM_BROWSER_LINGER_S`` sets another; 0: it shuts down at once), so
that closing one env and making the next (as tests and notebooks do) does not
relaunch it, and then shuts down; :func:`close_browser` shuts it down now. A
crashed or killed browser is relaunched on the next use. A forked child never
touches its parent's browser: it starts its own.

Chromium is Debian's, from ``FEEDBACKGYM_CHROMIUM`` (default: the headless
shell if installed, else ``/usr/bin/chromium``; see
:mod:`feedbackgym.envs.web.executable`), launched
with :data:`LAUNCH_FLAGS`. Each browser
process carries ``FEEDBACKGYM_BROWSER_OWNER=<pid of the env process>`` in its
environment, so leaks can be traced to the process that launched them, and
its own temporary directory (``TMPDIR``), removed when it closes or is found
dead; the directories of processes that died without closing theirs (a vector
env's workers end with ``os._exit``) are swept at the next launch.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Coroutine, Hashable
from pathlib import Path
from typing import Any, TypeVar

from feedbackgym._process import pid_alive
from feedbackgym.envs.web.executable import CHROMIUM_ENV, DEFAULT_CHROMIUM, configured_chromium
from feedbackgym.errors import DependencyNotInstalled, FeedbackGymError

try:
    from playwright.async_api import Browser, Page, Playwright, Route, async_playwright
    from playwright.async_api import Error as PlaywrightError
except ImportError as error:  # pragma: no cover - exercised without the extra
    raise DependencyNotInstalled.for_extra("playwright", "web") from error

__all__ = [
    "CHROMIUM_ENV",
    "DEFAULT_CHROMIUM",
    "LAUNCH_FLAGS",
    "LINGER_ENV",
    "OWNER_ENV",
    "BrowserError",
    "BrowserHost",
    "Page",
    "PlaywrightError",
    "Route",
    "chromium_path",
    "close_browser",
    "linger_s",
    "sweep_browser_dirs",
    "wait",
]

T = TypeVar("T")

OWNER_ENV = "FEEDBACKGYM_BROWSER_OWNER"
"""Set in every browser process's environment to the pid of the env process."""
LAUNCH_FLAGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
"""Chromium flags: headless, no network chatter of its own."""
LINGER_S = 5.0
"""Seconds the browser stays up after the last lease ends, unless :data:`LINGER_ENV` says."""
LINGER_ENV = "FEEDBACKGYM_BROWSER_LINGER_S"
"""The environment variable that sets the linger in seconds (0: shut down at once)."""
CALL_TIMEOUT_S = 30.0
"""Longest wait for one browser call before it counts as a hang."""
LAUNCH_TIMEOUT_S = 60.0
"""Longest wait for Playwright and Chromium to start."""


class BrowserError(FeedbackGymError, RuntimeError):
    """Chromium or its Playwright driver failed: missing, crashed, closed or hung."""


def linger_s() -> float:
    """How long the browser stays up after the last env closes: :data:`LINGER_ENV`, or 5 s.

    Raises:
        ValueError: :data:`LINGER_ENV` is not a number >= 0.
    """
    text = os.environ.get(LINGER_ENV)
    if text is None:
        return LINGER_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ValueError(f"{LINGER_ENV} must be a number of seconds >= 0, got {text!r}")
    return value


def close_browser() -> None:
    """Shuts the process's Chromium down now, if it runs (envs still open relaunch it on use).

    Example:
        >>> close_browser()  # nothing runs: a no-op
    """
    with BrowserHost._lock:
        host = BrowserHost._current
    if host is not None and host.pid == os.getpid():
        host.shutdown()


def chromium_path() -> str:
    """Returns the Chromium executable to launch.

    Raises:
        BrowserError: The executable does not exist.
    """
    path = configured_chromium()
    if not Path(path).is_file():
        raise BrowserError(
            f"Chromium not found at {path!r}; install Debian's `chromium-headless-shell` "
            f"or `chromium` (`bash scripts/setup.sh`) or set {CHROMIUM_ENV} to its executable"
        )
    return path


class BrowserHost:
    """One Playwright driver and Chromium per process, on a private event-loop thread.

    Use :meth:`acquire` to get the process's host; do not construct it directly.

    Example:
        >>> host = BrowserHost.acquire()  # doctest: +SKIP
        >>> browser = host.run(host.browser())  # doctest: +SKIP
        >>> host.release()  # doctest: +SKIP
    """

    _current: BrowserHost | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._leases = 0
        self._idle_generation = 0
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="feedbackgym-browser", daemon=True)
        self._thread.start()
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._browser_tmp: str | None = None
        self._launch_lock: asyncio.Lock | None = None
        self._spares: dict[Hashable, list[concurrent.futures.Future[Any]]] = {}

    def _serve(self) -> None:
        """The browser thread: runs the loop until shutdown stops it, then closes it."""
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    # --- leases ----------------------------------------------------------------------------

    @classmethod
    def acquire(cls) -> BrowserHost:
        """Returns the process's host, starting it if needed, and takes a lease on it."""
        with cls._lock:
            host = cls._current
            if host is None or host._closed or host.pid != os.getpid():
                host = cls._current = BrowserHost()
            host._leases += 1
            return host

    def release(self) -> None:
        """Ends a lease; the last one schedules shutdown after :func:`linger_s` seconds.

        Never blocks, so it is safe from finalizers and from the loop thread.
        """
        linger = linger_s()
        with self._lock:
            self._leases -= 1
            if self._leases > 0 or self._closed:
                return
            self._idle_generation += 1
            generation = self._idle_generation
        self._loop.call_soon_threadsafe(
            self._loop.call_later, linger, self._shutdown_if_idle, generation
        )

    def _shutdown_if_idle(self, generation: int) -> None:
        with self._lock:
            if self._leases > 0 or self._closed or generation != self._idle_generation:
                return
            self._mark_closed()
        self._stop_then_halt()

    def _stop_then_halt(self) -> None:
        """On the loop thread: closes Chromium and Playwright, then stops the loop."""
        self._loop.create_task(self._stop()).add_done_callback(lambda _: self._loop.stop())

    def _mark_closed(self) -> None:
        """Takes the host out of service; the caller holds the class lock."""
        self._closed = True
        if BrowserHost._current is self:
            BrowserHost._current = None

    def shutdown(self, timeout: float = 10.0) -> None:
        """Closes Chromium and Playwright now, whatever the leases, and stops the thread."""
        with self._lock:
            if self._closed and not self._thread.is_alive():
                return
            self._mark_closed()
        if threading.current_thread() is self._thread:
            self._stop_then_halt()
            return
        try:
            asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout)
        except (RuntimeError, concurrent.futures.TimeoutError, PlaywrightError):
            pass  # the loop is gone already, or Chromium would not close: stop anyway
        try:
            self._loop.call_soon_threadsafe(self._loop.stop)
        except RuntimeError:
            pass  # closed: the thread is done
        self._thread.join(timeout)

    # --- calls -----------------------------------------------------------------------------

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Starts ``coro`` on the browser thread and returns its future at once."""
        if self._closed:
            coro.close()
            raise BrowserError("the browser host has been shut down")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = CALL_TIMEOUT_S) -> T:
        """Runs ``coro`` on the browser thread and waits for its result.

        Raises:
            BrowserError: A Playwright error (crash, closed target), or no result
                within ``timeout`` seconds.
        """
        return wait(self.submit(coro), timeout)

    # --- spare pages -----------------------------------------------------------------------

    def take_spare(self, key: Hashable) -> concurrent.futures.Future[Any] | None:
        """Takes the oldest spare kept under ``key`` (a future), if any."""
        with self._lock:
            spares = self._spares.get(key)
            return spares.pop(0) if spares else None

    def top_up_spares(
        self, key: Hashable, make: Callable[[], concurrent.futures.Future[Any]], limit: int
    ) -> None:
        """Calls ``make()`` until ``limit`` spares are kept under ``key`` (made concurrently)."""
        with self._lock:
            spares = self._spares.setdefault(key, [])
            while len(spares) < limit and not self._closed:
                spares.append(make())

    # --- the browser (on the loop thread) --------------------------------------------------

    async def browser(self) -> Browser:
        """Returns the connected browser, launching or relaunching it when needed."""
        if self._launch_lock is None:
            self._launch_lock = asyncio.Lock()
        async with self._launch_lock:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            await self._close_browser()
            executable = chromium_path()
            try:
                if self._playwright is None:
                    self._playwright = await async_playwright().start()
                sweep_browser_dirs()
                self._browser_tmp = tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{self.pid}-")
                self._browser = await self._playwright.chromium.launch(
                    executable_path=executable,
                    args=list(LAUNCH_FLAGS),
                    env={**os.environ, OWNER_ENV: str(self.pid), "TMPDIR": self._browser_tmp},
                    timeout=LAUNCH_TIMEOUT_S * 1000,
                )
            except PlaywrightError:
                # The driver itself may be gone; start from scratch next time.
                await self._stop_playwright()
                raise
            return self._browser

    async def _close_browser(self) -> None:
        browser, self._browser = self._browser, None
        tmp, self._browser_tmp = self._browser_tmp, None
        if browser is not None:
            try:
                await browser.close()
            except PlaywrightError:
                pass
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)  # what a killed Chromium left there

    async def _stop_playwright(self) -> None:
        playwright, self._playwright = self._playwright, None
        if playwright is not None:
            try:
                await playwright.stop()
            except (PlaywrightError, OSError):
                pass

    async def _stop(self) -> None:
        await self._close_browser()
        await self._stop_playwright()


_TMP_PREFIX = "feedbackgym-chromium-"


def sweep_browser_dirs() -> int:
    """Removes the browser temp directories of processes that are gone; returns how many."""
    removed = 0
    for path in Path(tempfile.gettempdir()).glob(f"{_TMP_PREFIX}*-*"):
        owner = path.name[len(_TMP_PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and not pid_alive(int(owner)):
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed


def wait(future: concurrent.futures.Future[T], timeout: float = CALL_TIMEOUT_S) -> T:
    """Waits for a browser-thread future, turning failures into :class:`BrowserError`."""
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError as error:
        future.cancel()
        raise BrowserError(f"the browser did not answer within {timeout:.0f} s") from error
    except PlaywrightError as error:
        raise BrowserError(_first_line(str(error))) from error


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0] if message.strip() else "browser error"


def _shutdown_at_exit() -> None:
    host = BrowserHost._current
    if host is not None and host.pid == os.getpid():
        host.shutdown(timeout=5.0)


def _forget_parent_host() -> None:
    # The child of a fork shares nothing usable with the parent's browser thread.
    BrowserHost._current = None
    BrowserHost._lock = threading.Lock()


atexit.register(_shutdown_at_exit)
os.register_at_fork(after_in_child=_forget_parent_host)
