"""The generator protocols: what a guide and a reviewer receive and return.

A *guide* is any object with ``hint(request: GuideRequest) -> Hint | None``;
a *reviewer* is any object with ``review(request: ReviewRequest) -> Review | None``.
Neither needs to subclass anything of ours: :class:`~feedbackgym.wrappers.AddGuide`
(``guide=``), :class:`~feedbackgym.wrappers.AddReview` (``reviewer=``) and
``feedbackgym serve-feedback --generator`` take any object meeting them, or a
class named as ``"module:Class"`` (config files, the command line), which is
made with no arguments. The built-in :class:`~feedbackgym.feedback.SubgoalGuide`
and :class:`~feedbackgym.feedback.TrajectoryReviewer` are two implementations
among others; one object may be both a guide and a reviewer.

How a generator is called:

* A method may be a plain function or a coroutine function (``async def``).
* A generator whose class sets ``inline = True`` is called in the env's step:
  it promises to answer in microseconds (the built-ins) or to bound its own
  wait (the service client). Any other generator runs off the step (a
  coroutine on a background event loop, a plain method in a worker thread of
  its own) and the step waits at most the wrapper's ``deadline_ms``: a hint
  not ready by then is skipped and counted; a review not ready when its
  episode ends is delivered when it is, on a later step, and the info says
  which episode it is about.
* An exception raised off the step is logged and counted as a miss, never
  raised into training. A generator may count misses of its own (a reply
  that did not parse) in an integer ``misses`` attribute; the wrappers report
  them with theirs.

Requests are plain data (:meth:`GuideRequest.to_dict` round-trips through
JSON), so the same generator runs in-process or behind the service.

Example:
    >>> from feedbackgym.core import Hint, Subgoal
    >>> class FirstUndone:  # a guide: no base class needed
    ...     def hint(self, request):
    ...         todo = [sg for sg in request.library if not request.progress.get(sg.id)]
    ...         return Hint((todo[0].id,), (todo[0].description,), request.step) if todo else None
    >>> guide = as_guide(FirstUndone())
    >>> lib = (Subgoal("key", "pick up the key", bool), Subgoal("door", "open the door", bool))
    >>> guide.hint(GuideRequest(lib, {"key": True}, step=3)).text
    'Hint: first open the door'
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import os
import queue
import threading
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, TypeVar, runtime_checkable

from feedbackgym.config import split_generator_name
from feedbackgym.core import Hint, Review, StepRecord, Subgoal
from feedbackgym.errors import GeneratorError

__all__ = [
    "Guide",
    "GuideRequest",
    "OffStepCall",
    "ReviewRequest",
    "Reviewer",
    "as_guide",
    "as_reviewer",
    "load_generator",
    "make_generator",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
MaybeAwaitable: TypeAlias = T | Awaitable[T]

WARN_EVERY = 100
"""A generator failure is logged the first time and then every this many times."""


def _never(state: Any) -> bool:
    return False


def _library(data: Any) -> tuple[Subgoal, ...]:
    """Subgoals from their :meth:`Subgoal.to_dict` form (predicates are not sent)."""
    return tuple(
        Subgoal(
            d["id"],
            d["description"],
            _never,
            tuple(d.get("requires", ())),
            tuple(d.get("targets", ())),
            str(d.get("kind", "")),
            str(d.get("phase", "")),
        )
        for d in data
    )


@dataclass(frozen=True)
class GuideRequest:
    """What a guide receives, once per due hint.

    Attributes:
        library: The episode's subgoal library (predicates are not sent to a
            service: read ids, descriptions, prerequisites, targets, kinds).
        progress: Which subgoals are done (``info["subgoals"]``).
        step: The episode step the hint is for.
        text: The current text observation, when the env has one.
        task: The task family (the env id without its version, e.g.
            ``"feedbackgym/OpsIncidentEasy"``); the service keeps one generator
            per family.
        options: The wrapper's settings for generators (the built-in guide
            reads ``lookahead``); a generator ignores those it does not know.

    Example:
        >>> lib = (Subgoal("a", "reach A", bool),)
        >>> request = GuideRequest(lib, {"a": False}, step=2, text="You see A.")
        >>> GuideRequest.from_dict(request.to_dict()) == request
        True
    """

    library: tuple[Subgoal, ...]
    progress: Mapping[str, bool]
    step: int
    text: str | None = None
    task: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Returns the request as JSON-safe data."""
        return {
            "library": [sg.to_dict() for sg in self.library],
            "progress": dict(self.progress),
            "step": self.step,
            "text": self.text,
            "task": self.task,
            "options": dict(self.options),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GuideRequest:
        """Rebuilds a request from :meth:`to_dict` output.

        Raises:
            KeyError, TypeError, ValueError: ``data`` is not such output.
        """
        progress = data["progress"]
        if not isinstance(progress, dict):
            raise TypeError(f"progress must be an object, got {type(progress).__name__}")
        text = data.get("text")
        return cls(
            _library(data["library"]),
            {str(k): bool(v) for k, v in progress.items()},
            int(data["step"]),
            None if text is None else str(text),
            str(data.get("task", "")),
            dict(data.get("options") or {}),
        )


@dataclass(frozen=True)
class ReviewRequest:
    """What a reviewer receives, once per finished episode it reviews.

    Attributes:
        records: The window's steps, oldest first (the last ``window`` steps).
        library: The episode's subgoal library.
        success: Whether the episode reached its goal.
        initial_done: Subgoals done before the window's first step.
        outcome: How the episode ended (``info["outcome"]``), when the env says.
        episode: Which episode this is, counted from 0 by the env's review
            wrapper (a late review names it in ``info["feedback"]["review_episode"]``).
        task: The task family (see :attr:`GuideRequest.task`).
        options: The wrapper's settings for generators (the built-in reviewer
            reads ``stall_steps`` and ``level``).

    Example:
        >>> lib = (Subgoal("a", "reach A", bool), Subgoal("b", "reach B", bool, ("a",)))
        >>> request = ReviewRequest((StepRecord(0, 1, 0.0, ("a",)),), lib, success=False)
        >>> request.progress
        {'a': True, 'b': False}
    """

    records: tuple[StepRecord, ...]
    library: tuple[Subgoal, ...]
    success: bool
    initial_done: tuple[str, ...] = ()
    outcome: str = ""
    episode: int = 0
    task: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def progress(self) -> dict[str, bool]:
        """Which subgoals are done at the window's end."""
        done = set(self.records[-1].done_ids if self.records else self.initial_done)
        return {sg.id: sg.id in done for sg in self.library}

    def to_dict(self) -> dict[str, Any]:
        """Returns the request as JSON-safe data."""
        return {
            "records": [r.to_dict() for r in self.records],
            "library": [sg.to_dict() for sg in self.library],
            "success": self.success,
            "initial_done": list(self.initial_done),
            "outcome": self.outcome,
            "episode": self.episode,
            "task": self.task,
            "options": dict(self.options),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReviewRequest:
        """Rebuilds a request from :meth:`to_dict` output.

        Raises:
            KeyError, TypeError, ValueError: ``data`` is not such output.
        """
        return cls(
            tuple(StepRecord.from_dict(r) for r in data["records"]),
            _library(data["library"]),
            bool(data["success"]),
            tuple(str(i) for i in data.get("initial_done", ())),
            str(data.get("outcome", "")),
            int(data.get("episode", 0)),
            str(data.get("task", "")),
            dict(data.get("options") or {}),
        )


@runtime_checkable
class Guide(Protocol):
    """A guide: names what to pursue next in a state; an action only at the ``action`` level.

    ``hint`` may be ``async def``; see the module docstring for how it is called.
    """

    def hint(self, request: GuideRequest) -> MaybeAwaitable[Hint | None]:
        """The hint for ``request``'s state, or ``None`` for no hint this time."""


@runtime_checkable
class Reviewer(Protocol):
    """A reviewer: critiques the last steps of a finished episode.

    ``review`` may be ``async def``; see the module docstring for how it is called.
    """

    def review(self, request: ReviewRequest) -> MaybeAwaitable[Review | None]:
        """The review of ``request``'s window, or ``None`` for no review this time."""


def load_generator(spec: str) -> type:
    """The class that ``"module:Class"`` names.

    Raises:
        GeneratorError: ``spec`` is not ``"module:Class"``, the module or name
            cannot be found, or it is not a class (the message says which).

    Example:
        >>> load_generator("feedbackgym.feedback:SubgoalGuide").__name__
        'SubgoalGuide'
    """
    try:
        module_name, name = split_generator_name(spec)
    except ValueError as error:
        raise GeneratorError(str(error)) from None
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise GeneratorError(
            f"generator {spec!r}: cannot import {module_name!r}: {error}"
        ) from None
    for part in name.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise GeneratorError(
                f"generator {spec!r}: module {module_name!r} has no {name!r}"
            ) from None
    if not isinstance(target, type):
        raise GeneratorError(f"generator {spec!r} names a {type(target).__name__}, not a class")
    return target


def make_generator(spec: str) -> Any:
    """A new generator from ``"module:Class"``: the class, made with no arguments.

    Raises:
        GeneratorError: The spec cannot be loaded, names no class, or making
            it failed.
    """
    cls = load_generator(spec)
    try:
        return cls()
    except Exception as error:
        raise GeneratorError(f"generator {spec!r}: {cls.__name__}() failed: {error}") from error


def _checked(generator: Any, protocol: type, method: str) -> Any:
    if isinstance(generator, str):
        generator = make_generator(generator)
    if not isinstance(generator, protocol):
        raise GeneratorError(
            f"{type(generator).__name__} is not a {protocol.__name__.lower()}: it needs a "
            f"{method}(request) method (see feedbackgym.feedback.generators.{protocol.__name__})"
        )
    return generator


def as_guide(guide: Guide | str) -> Guide:
    """``guide`` itself, or the guide a ``"module:Class"`` string names.

    Raises:
        GeneratorError: It does not load, or has no ``hint`` method.
    """
    return _checked(guide, Guide, "hint")


def as_reviewer(reviewer: Reviewer | str) -> Reviewer:
    """``reviewer`` itself, or the reviewer a ``"module:Class"`` string names.

    Raises:
        GeneratorError: It does not load, or has no ``review`` method.
    """
    return _checked(reviewer, Reviewer, "review")


# --- running generators off the step ------------------------------------------------------

_RESULTS: dict[str, type] = {"hint": Hint, "review": Review}
"""What each generator method returns (besides ``None``)."""

_LOOP: tuple[int, asyncio.AbstractEventLoop] | None = None
_LOOP_LOCK = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    """This process's event loop for coroutine generators, on a daemon thread (made once)."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None or _LOOP[0] != os.getpid():  # a forked worker makes its own
            loop = asyncio.new_event_loop()
            threading.Thread(
                target=loop.run_forever, name="feedbackgym-generators", daemon=True
            ).start()
            _LOOP = (os.getpid(), loop)
        return _LOOP[1]


class _Worker:
    """One daemon thread running calls in order (a hung generator never blocks exit)."""

    def __init__(self, name: str) -> None:
        self.pid = os.getpid()
        self._calls: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None]
        self._calls = queue.SimpleQueue()
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def _run(self) -> None:
        while (item := self._calls.get()) is not None:
            future, call = item
            if not future.set_running_or_notify_cancel():
                continue  # cancelled while queued: its deadline passed
            try:
                future.set_result(call())
            except BaseException as error:  # handed to the waiting side, which counts it
                future.set_exception(error)

    def submit(self, call: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        self._calls.put((future, call))
        return future

    def stop(self) -> None:
        self._calls.put(None)


class OffStepCall:
    """Calls one generator method, in the step or off it, and counts what went wrong.

    Inline generators (``inline = True``) are called directly; the others run
    off the step: coroutines on this process's background event loop, plain
    methods in a worker thread of this call's own (so one generator is never
    called from two threads at once). The object pickles (without its thread),
    so wrapped envs still go to subprocess workers.

    Args:
        generator: The guide or reviewer.
        method: ``"hint"`` or ``"review"``.

    Attributes:
        errors: Calls that raised off the step (logged, never re-raised).
        lost: Calls whose result never arrived (the caller counts: a hint past
            its deadline, a review dropped).

    Example:
        >>> import asyncio
        >>> class SlowGuide:
        ...     async def hint(self, request):
        ...         await asyncio.sleep(1.0)
        >>> call = OffStepCall(SlowGuide(), "hint")
        >>> call.settle(call.submit(GuideRequest((), {}, 0)), timeout_s=0.01)
        (False, None)
        >>> call.close()
    """

    def __init__(self, generator: Any, method: str) -> None:
        if method not in _RESULTS:
            raise ValueError(f"method must be one of {sorted(_RESULTS)}, got {method!r}")
        self.generator = generator
        self.method = method
        self.inline = bool(getattr(generator, "inline", False))
        self.errors = 0
        self.lost = 0
        self._worker: _Worker | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_worker": None}

    @property
    def misses(self) -> int:
        """Errors and lost calls here, plus the generator's own count (``misses``, if any)."""
        own = getattr(self.generator, "misses", 0)
        return self.errors + self.lost + (own if isinstance(own, int) else 0)

    def __call__(self, request: Any) -> Any:
        """Calls the method in the step (inline generators only)."""
        return self.checked(getattr(self.generator, self.method)(request))

    def checked(self, result: Any) -> Any:
        """``result`` if it is what the method should return (a Hint, a Review) or ``None``.

        Raises:
            GeneratorError: It is something else (a bug of the generator).
        """
        expected = _RESULTS[self.method]
        if result is not None and not isinstance(result, expected):
            raise GeneratorError(
                f"{type(self.generator).__name__}.{self.method} returned a "
                f"{type(result).__name__}, not a {expected.__name__} or None"
            )
        return result

    def submit(self, request: Any) -> Future[Any]:
        """Starts the call off the step; the future holds its result."""
        function = getattr(self.generator, self.method)
        if inspect.iscoroutinefunction(function):
            return asyncio.run_coroutine_threadsafe(function(request), _background_loop())
        if self._worker is None or self._worker.pid != os.getpid():
            self._worker = _Worker(f"feedbackgym-{self.method}")
        return self._worker.submit(lambda: function(request))

    def settle(self, future: Future[Any], timeout_s: float) -> tuple[bool, Any]:
        """Waits up to ``timeout_s`` for ``future``: ``(done, result)``.

        A future not done by then is cancelled if it has not started; a
        failed call is logged and counted in :attr:`errors` and gives ``None``.
        An awaitable result (a plain method that returned a coroutine) is
        awaited on the background loop within the same wait.
        """
        try:
            result = future.result(timeout=timeout_s)
        except TimeoutError:
            future.cancel()
            return False, None
        except Exception as error:
            self._failed(error)
            return True, None
        if inspect.isawaitable(result):
            return self.settle(_awaited(result), timeout_s)
        return True, self.checked(result)

    def collect(self, future: Future[Any]) -> Any:
        """The result of a done ``future`` (``None``, counted, if it failed)."""
        return self.settle(future, 0.0)[1]

    def _failed(self, error: BaseException) -> None:
        self.errors += 1
        if self.errors % WARN_EVERY == 1:
            logger.warning(
                "%s.%s failed (%d failures so far; feedback goes on without it): %s: %s",
                type(self.generator).__name__,
                self.method,
                self.errors,
                type(error).__name__,
                error,
            )

    def close(self) -> None:
        """Stops the worker thread, if any (a call in progress finishes first)."""
        if self._worker is not None:
            self._worker.stop()
            self._worker = None


def _awaited(awaitable: Awaitable[Any]) -> Future[Any]:
    async def wait() -> Any:
        return await awaitable

    return asyncio.run_coroutine_threadsafe(wait(), _background_loop())
