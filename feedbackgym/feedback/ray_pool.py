"""Feedback generators as Ray actors: a pool per task family, shared by every env of a run.

:class:`RayGenerators` is a guide and a reviewer (it meets both protocols of
:mod:`~feedbackgym.feedback.generators`) whose calls go to Ray actors, each
running a generator named ``"module:Class"``. Actors are named per generator,
task family and place in the pool, so every env that makes one (in the
learner's process or in env worker processes on the same cluster) shares the
same pool. Its methods are coroutines, so the wrappers call it off the step
and keep their ``deadline_ms``: a hint not back in time is skipped and counted,
as with any slow generator.

A feedback config names the built-ins' pools like any generator (made with no
arguments)::

    guide:
      generator: feedbackgym.feedback.ray_pool:RaySubgoalGuide
    review:
      generator: feedbackgym.feedback.ray_pool:RayTrajectoryReviewer

A process that is not connected to Ray yet joins the cluster started on its
machine (``address="auto"``). Needs the ``ray`` extra.
"""

from __future__ import annotations

import inspect
import itertools
import logging
from typing import Any

from feedbackgym.core import Hint, Review
from feedbackgym.errors import requires_extra
from feedbackgym.feedback.generators import GuideRequest, ReviewRequest, make_generator

with requires_extra("ray"):
    import ray

__all__ = ["NAMESPACE", "RayGenerators", "RaySubgoalGuide", "RayTrajectoryReviewer"]

NAMESPACE = "feedbackgym"
"""The Ray namespace of the generator actors."""


@ray.remote(num_cpus=0)
class _GeneratorActor:
    """One generator, answering requests sent as plain data."""

    def __init__(self, spec: str) -> None:
        self._generator = make_generator(spec)
        self.served = 0

    async def hint(self, data: dict[str, Any]) -> dict[str, Any] | None:
        return await self._call("hint", GuideRequest.from_dict(data))

    async def review(self, data: dict[str, Any]) -> dict[str, Any] | None:
        return await self._call("review", ReviewRequest.from_dict(data))

    async def count(self) -> int:
        """Requests answered so far."""
        return self.served

    async def _call(self, method: str, request: Any) -> dict[str, Any] | None:
        result = getattr(self._generator, method)(request)
        if inspect.isawaitable(result):
            result = await result
        self.served += 1
        return None if result is None else result.to_dict()


class RayGenerators:
    """A guide and a reviewer whose calls go to a pool of Ray actors per task family.

    Args:
        spec: The generator each actor runs, as ``"module:Class"`` (made with
            no arguments on the actor's node, so installed there).
        actors: Actors per task family; calls take them in turn.
        num_cpus: CPUs each actor asks for (0: the built-ins take microseconds).

    Example:
        >>> pool = RayGenerators("feedbackgym.feedback:SubgoalGuide", actors=4)
        >>> pool.actor_name("feedbackgym/OpsIncidentEasy", 0)
        'feedbackgym.feedback:SubgoalGuide|feedbackgym/OpsIncidentEasy|0'
    """

    def __init__(self, spec: str, *, actors: int = 2, num_cpus: float = 0.0) -> None:
        if actors < 1:
            raise ValueError(f"actors must be >= 1, got {actors}")
        self.spec = spec
        self.actors = actors
        self.num_cpus = num_cpus
        self._pools: dict[str, list[Any]] = {}
        self._turn = itertools.count()

    def __getstate__(self) -> dict[str, Any]:  # handles stay behind: each process finds them
        return {"spec": self.spec, "actors": self.actors, "num_cpus": self.num_cpus}

    def __setstate__(self, state: dict[str, Any]) -> None:
        RayGenerators.__init__(
            self, state["spec"], actors=state["actors"], num_cpus=state["num_cpus"]
        )

    def actor_name(self, task: str, index: int) -> str:
        """The name of actor ``index`` of ``task``'s pool (in :data:`NAMESPACE`)."""
        return f"{self.spec}|{task}|{index}"

    def pool(self, task: str) -> list[Any]:
        """The actors of ``task``'s pool, started (or found) on first use."""
        pool = self._pools.get(task)
        if pool is None:
            if not ray.is_initialized():
                ray.init(address="auto", log_to_driver=False, logging_level=logging.ERROR)
            pool = self._pools[task] = [
                _GeneratorActor.options(  # type: ignore[attr-defined]
                    name=self.actor_name(task, index),
                    namespace=NAMESPACE,
                    get_if_exists=True,
                    num_cpus=self.num_cpus,
                ).remote(self.spec)
                for index in range(self.actors)
            ]
        return pool

    def _next(self, task: str) -> Any:
        pool = self.pool(task)
        return pool[next(self._turn) % len(pool)]

    async def hint(self, request: GuideRequest) -> Hint | None:
        """The hint of an actor of the request's task family."""
        data = await self._next(request.task).hint.remote(request.to_dict())
        return None if data is None else Hint.from_dict(data)

    async def review(self, request: ReviewRequest) -> Review | None:
        """The review of an actor of the request's task family."""
        data = await self._next(request.task).review.remote(request.to_dict())
        return None if data is None else Review.from_dict(data)

    def served(self) -> dict[str, int]:
        """Requests each actor of this process's pools has answered, by actor name."""
        return {
            self.actor_name(task, index): ray.get(actor.count.remote())
            for task, pool in self._pools.items()
            for index, actor in enumerate(pool)
        }


class RaySubgoalGuide(RayGenerators):
    """The built-in :class:`~feedbackgym.feedback.SubgoalGuide` on a pool of Ray actors."""

    def __init__(self) -> None:
        super().__init__("feedbackgym.feedback:SubgoalGuide")


class RayTrajectoryReviewer(RayGenerators):
    """The built-in :class:`~feedbackgym.feedback.TrajectoryReviewer` on a pool of Ray actors."""

    def __init__(self) -> None:
        super().__init__("feedbackgym.feedback:TrajectoryReviewer")
