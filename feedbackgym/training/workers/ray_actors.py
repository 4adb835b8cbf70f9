"""Rollout workers as Ray actors: env groups that live on a cluster's nodes.

For envs whose steps are slow (a browser, a sandbox) and many, one machine's
cores run out before the learner does. Here each group of envs lives in a Ray
actor that builds them on its node from the same env builders the worker
processes use, and holds them (and their browser or sandbox) for the run:

* :class:`EnvActors` starts the actors (``num_cpus`` each, spread over the
  nodes by default: Ray's ``SPREAD`` strategy), names them, turns a dead actor
  or an env's error into an :class:`EnvActorError` naming the actor and its
  node, and kills every actor on :meth:`EnvActors.close`;
* :class:`RayEnvWorkers` is the torch trainer's
  :class:`~.env_groups.EnvGroups` over them: the same
  interface as :class:`~.env_groups.EnvWorkers`, whose
  step logic each actor runs on its groups;
* :class:`~.ray_vec_env.RayVecEnv` is SB3's ``VecEnv``
  over them.

The controller's state reaches the actors as it reaches worker processes:
:func:`~feedbackgym.protocol.call_envs` calls the envs' ``set_feedback_state``
through :meth:`RayEnvWorkers.call`, which each actor runs on its envs.

A process not connected to Ray yet connects (``ray.init()``: the cluster
started on its machine, else a Ray instance of its own, shut down on close).
Needs the ``ray`` extra.
"""

from __future__ import annotations

import itertools
import logging
import os
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

from feedbackgym.errors import requires_extra
from feedbackgym.training.workers.env_groups import (
    SLOW_ENV_WORKERS,
    EnvWorkerError,
    StepBatch,
    _Group,
    check_layout,
    close_envs,
    split_groups,
)

with requires_extra("ray"):
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError, RayError

__all__ = [
    "ENV_ACTOR_CPUS",
    "NAMESPACE",
    "EnvActorError",
    "EnvActors",
    "RayEnvWorkers",
    "actor_layout",
    "ray_env_workers",
]

NAMESPACE = "feedbackgym"
"""The Ray namespace of the env actors (the generator pools' too)."""

ENV_ACTOR_CPUS = 1.0
"""CPUs each env actor asks for unless told otherwise (its envs step one after another)."""

_CLOSE_S = 10.0
"""Seconds an actor gets to close its envs before it is killed."""

PLACE_TIMEOUT_S = 120.0
"""Seconds the actors get to be placed and build their envs before the run gives up."""

_self_started = 0
"""Open :class:`EnvActors` that rely on the Ray instance this module started."""


class EnvActorError(EnvWorkerError):
    """An env actor died (its node or process lost, or killed), or an env in it raised.

    Attributes:
        actor: The actor's name (in :data:`NAMESPACE`).
        node: The id of the node it was placed on (``None`` if it never started).
    """

    def __init__(self, message: str, actor: str, node: str | None) -> None:
        super().__init__(message)
        self.actor = actor
        self.node = node

    def __reduce__(self) -> tuple[type[EnvActorError], tuple[str, str, str | None]]:
        return type(self), (self.args[0], self.actor, self.node)


@ray.remote
class _EnvActor:
    """Holds what ``make`` builds (groups of envs) on its node and runs its methods."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._held = make()

    def node(self) -> str:
        """The id of the node this actor lives on."""
        return str(ray.get_runtime_context().get_node_id())

    def run(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Calls ``method`` of what it holds."""
        return getattr(self._held, method)(*args, **kwargs)


class EnvActors:
    """Ray actors that each hold what one of ``makers`` builds; their calls, errors and end.

    Args:
        makers: One builder per actor, run on the actor's node (pickled with
            cloudpickle, so closures and partials of module functions work).
        num_cpus: CPUs each actor asks for (its node keeps them for the run).
        strategy: Ray's scheduling strategy: ``"SPREAD"`` (over the nodes,
            the default), ``"DEFAULT"`` (packed where resources are) or a
            strategy object.
        name: Prefix of the actors' names (``PREFIX-TOKEN-N`` in :data:`NAMESPACE`).

    Raises:
        EnvActorError: An actor could not build what it holds, the actors ask
            more CPUs than the cluster has, or they could not be placed within
            :data:`PLACE_TIMEOUT_S`.

    Example:
        >>> actors = EnvActors([list, list], num_cpus=0)  # doctest: +SKIP
        >>> actors.get_all("__len__"), len(set(actors.names))  # doctest: +SKIP
        ([0, 0], 2)
        >>> actors.close()  # doctest: +SKIP
    """

    def __init__(
        self,
        makers: Sequence[Callable[[], Any]],
        *,
        num_cpus: float = ENV_ACTOR_CPUS,
        strategy: Any = "SPREAD",
        name: str = "feedbackgym-envs",
    ) -> None:
        if not makers:
            raise ValueError("need at least one actor")
        if num_cpus < 0:
            raise ValueError(f"num_cpus must be >= 0, got {num_cpus}")
        global _self_started
        self._connected = _connect()
        if self._connected:
            _self_started += 1
        self.actors: list[Any] = []
        self.names: list[str] = []
        self.nodes: list[str | None] = []
        asked = len(makers) * num_cpus
        total = ray.cluster_resources().get("CPU", 0.0)
        if asked > total:
            self.close()
            raise EnvActorError(
                f"{len(makers)} env actors x {num_cpus} CPUs = {asked} CPUs asked, "
                f"but the cluster has {total} CPUs: fewer actors or env_actor_cpus",
                f"{name}-*",
                None,
            )
        token = uuid.uuid4().hex[:8]
        self.names = [f"{name}-{token}-{index}" for index in range(len(makers))]
        """Each actor's name (in :data:`NAMESPACE`)."""
        self.nodes = [None] * len(makers)
        """The node each actor was placed on."""
        env_vars = {k: v for k, v in os.environ.items() if k.startswith("FEEDBACKGYM_")}
        try:
            for actor_name, make in zip(self.names, makers, strict=True):
                self.actors.append(
                    _EnvActor.options(  # type: ignore[attr-defined]
                        name=actor_name,
                        namespace=NAMESPACE,
                        num_cpus=num_cpus,
                        scheduling_strategy=strategy,
                        max_restarts=0,  # an env's state is lost with its actor: no silent restart
                        max_task_retries=0,
                        runtime_env={"env_vars": env_vars} if env_vars else None,
                    ).remote(make)
                )
            refs = [actor.node.remote() for actor in self.actors]
            try:
                ray.get(refs, timeout=PLACE_TIMEOUT_S)
            except GetTimeoutError as error:
                available = ray.available_resources().get("CPU", 0.0)
                raise EnvActorError(
                    f"env actors {self.names} could not be placed within {PLACE_TIMEOUT_S} s: "
                    f"{asked} CPUs asked, {available} available now",
                    self.names[0],
                    None,
                ) from error
            except RayError:
                pass  # named by the per-actor get below
            self.nodes = [self.get(index, ref) for index, ref in enumerate(refs)]
        except BaseException:
            self.close()
            raise

    def ask(self, index: int, method: str, *args: Any, **kwargs: Any) -> Any:
        """Starts ``method(*args, **kwargs)`` of actor ``index``'s holding; returns its ref.

        Raises:
            EnvActorError: The actors are closed.
        """
        if not self.actors:
            raise EnvActorError("env actors are closed", self.names[index], self.nodes[index])
        return self.actors[index].run.remote(method, *args, **kwargs)

    def get(self, index: int, ref: Any) -> Any:
        """The result of actor ``index``'s call ``ref``.

        Raises:
            EnvActorError: The actor died, or the call raised (its traceback in the message).
        """
        try:
            return ray.get(ref)
        except RayActorError as error:
            raise self._error(index, "died", error) from error
        except RayError as error:
            raise self._error(index, "failed", error) from error

    def get_all(self, method: str, *args: Any, **kwargs: Any) -> list[Any]:
        """Calls ``method`` on every actor's holding; one result per actor."""
        refs = [self.ask(index, method, *args, **kwargs) for index in range(len(self.actors))]
        return [self.get(index, ref) for index, ref in enumerate(refs)]

    def _error(self, index: int, what: str, error: Exception) -> EnvActorError:
        name, node = self.names[index], self.nodes[index]
        return EnvActorError(f"env actor {name} (node {node}) {what}:\n{error}", name, node)

    def close(self) -> None:
        """Closes what every actor holds (``close()``, if it has one) and kills the actors.

        Idempotent. An actor that is dead already or does not close within
        10 s is killed all the same.
        """
        actors, self.actors = self.actors, []
        refs = [actor.run.remote("close") for actor in actors]
        if refs:
            try:
                ray.wait(refs, num_returns=len(refs), timeout=_CLOSE_S)
            except RayError:
                pass
        for actor in actors:
            try:
                ray.kill(actor, no_restart=True)
            except (RayError, ValueError):
                pass
        global _self_started
        if self._connected:
            self._connected = False
            _self_started -= 1
            if _self_started == 0:
                ray.shutdown()


def _connect() -> bool:
    """Connects this process to Ray if it is not yet; returns whether it relies on our Ray.

    That is the Ray this call starts, or the one an open pool of this module started.
    """
    if ray.is_initialized():
        return _self_started > 0
    ray.init(log_to_driver=False, logging_level=logging.ERROR)
    return True


class _ActorGroups:
    """An actor's groups of envs, stepped as :class:`~.env_groups.EnvWorkers` steps its own."""

    def __init__(self, build: Callable[[], gym.Env[Any, Any]], sizes: list[int]) -> None:
        envs: list[list[gym.Env[Any, Any]]] = []
        try:
            for size in sizes:
                envs.append([])
                for _ in range(size):
                    envs[-1].append(build())
        except BaseException:
            close_envs([env for each in envs for env in each])
            raise
        first = envs[0][0]
        self.spaces = (first.observation_space, first.action_space)
        obs_size = int(np.prod(first.observation_space.shape or ()))
        self._buffers = [np.zeros(StepBatch.nbytes(size, obs_size), np.uint8) for size in sizes]
        self._groups = [
            _Group(each, StepBatch.on(buffer, len(each), obs_size))
            for each, buffer in zip(envs, self._buffers, strict=True)
        ]

    def observation_and_action_space(self) -> tuple[Any, Any]:
        return self.spaces

    def reset(self, place: int, seeds: list[int]) -> np.ndarray:
        self._groups[place].reset(seeds)
        return self._groups[place].arrays.obs

    def step(self, place: int, actions: np.ndarray) -> np.ndarray:
        group = self._groups[place]
        group.arrays.action[:] = actions
        group.step()
        return self._buffers[place]  # every array of the group in one buffer

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[list[Any]]:
        return [group.call(name, args, kwargs) for group in self._groups]

    def close(self) -> None:
        for group in self._groups:
            group.close()
        self._groups = []


class RayEnvWorkers:
    """``len(env_fns)`` envs in ``groups`` groups held by ``actors`` Ray actors.

    The torch trainer's :class:`~.env_groups.EnvGroups`,
    as :class:`~.env_groups.EnvWorkers` with worker
    processes, but the workers are Ray actors placed over the cluster's nodes:
    group ``g`` lives in actor ``g % actors``, which steps its groups in the
    order they were started. A group's step comes back as one buffer holding
    its arrays (:class:`~.env_groups.StepBatch`); unlike
    worker processes, groups may be waited for in any order.

    Args:
        env_fns: Builders of the envs
        (:class:`~feedbackgym.training.common.trainer_view.TrainerView`-wrapped).
            All must be alike; every actor builds its envs with ``env_fns[0]``
            on its node (so the env's package, browser or sandbox must be
            installed on every node).
        groups: How many groups (at most one per env).
        actors: How many actors (at least 1, at most ``groups``).
        num_cpus: CPUs each actor asks for.
        strategy: Where the actors go (``"SPREAD"``: over the nodes; see :class:`EnvActors`).

    Raises:
        ValueError: No envs, or ``groups`` or ``actors`` out of range.
        EnvActorError: An actor could not build its envs.

    Example:
        >>> import feedbackgym
        >>> from feedbackgym.training.common.trainer_view import TrainerView
        >>> build = lambda: TrainerView(feedbackgym.make("feedbackgym/OpsIncidentEasy-v0"))
        >>> envs = RayEnvWorkers([build] * 4, groups=2, actors=2)  # doctest: +SKIP
        >>> envs.reset(seed=0).shape[0], len(envs.nodes)  # doctest: +SKIP
        (4, 2)
        >>> envs.step_async(1, np.zeros(2, np.int64)); envs.step_wait_any()[0]  # doctest: +SKIP
        1
        >>> envs.close()  # doctest: +SKIP
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env[Any, Any]]],
        groups: int = 1,
        actors: int = 1,
        *,
        num_cpus: float = ENV_ACTOR_CPUS,
        strategy: Any = "SPREAD",
    ) -> None:
        check_layout(len(env_fns), groups, actors, fewest=1, kind="actors")
        self.num_envs = len(env_fns)
        self._sizes, self.groups = split_groups(self.num_envs, groups)
        """Each group's rows among all envs."""
        self._owner = [group % actors for group in range(groups)]
        self._pending: dict[int, Any] = {}  # stepping group -> its step's ref
        self._started: dict[int, int] = {}  # stepping group -> when it started (a counter)
        self._clock = itertools.count()
        makers = [
            partial(
                _ActorGroups, env_fns[0], [s for g, s in enumerate(self._sizes) if g % actors == a]
            )
            for a in range(actors)
        ]
        self.actors = EnvActors(makers, num_cpus=num_cpus, strategy=strategy)
        """The actors (their names and nodes: ``actors.names``, ``actors.nodes``)."""
        try:
            spaces = self.actors.get_all("observation_and_action_space")
        except BaseException:
            self.actors.close()
            raise
        self.single_observation_space, self.single_action_space = spaces[0]
        self._obs_size = int(np.prod(self.single_observation_space.shape))

    @property
    def nodes(self) -> list[str | None]:
        """The node of each actor."""
        return self.actors.nodes

    def _place(self, group: int) -> int:
        """Where ``group`` is among its actor's (actor ``a`` holds ``a``, ``a + A``, ...)."""
        return group // len(self.actors.names)

    def reset(self, seed: int) -> np.ndarray:
        """Resets env ``i`` with ``seed + i``; returns every env's first observation."""
        refs = [
            self.actors.ask(
                self._owner[g],
                "reset",
                self._place(g),
                list(range(seed + rows.start, seed + rows.stop)),
            )
            for g, rows in enumerate(self.groups)
        ]
        return np.concatenate([self.actors.get(self._owner[g], ref) for g, ref in enumerate(refs)])

    def step_async(self, group: int, actions: np.ndarray) -> None:
        """Starts a step of ``group``'s envs with ``actions`` (one per env of the group)."""
        if group in self._pending:
            raise RuntimeError(f"group {group} is stepping already: wait for it first")
        actions = np.asarray(actions, np.int64)
        self._pending[group] = self.actors.ask(
            self._owner[group], "step", self._place(group), actions
        )
        self._started[group] = next(self._clock)

    def step_wait(self, group: int) -> StepBatch:
        """Waits for ``group``'s step; returns its arrays (read-only).

        Raises:
            EnvActorError: An env raised (its traceback in the message) or its actor died.
        """
        if group not in self._pending:
            raise RuntimeError(f"step_async({group}, ...) first")
        ref = self._pending.pop(group)
        del self._started[group]
        buffer = self.actors.get(self._owner[group], ref)
        return StepBatch.on(buffer, self._sizes[group], self._obs_size)

    def step_wait_any(self) -> tuple[int, StepBatch]:
        """Waits for whichever started group finishes first; returns it and its arrays.

        Of several groups back at once, the one started first.

        Raises:
            RuntimeError: No group is stepping.
            EnvActorError: An env raised (its traceback in the message) or its actor died.
        """
        if not self._pending:
            raise RuntimeError("no group is stepping: step_async(...) first")
        group_of = {ref: group for group, ref in self._pending.items()}
        refs = list(group_of)
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        if not ready:
            ray.wait(refs, num_returns=1)
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        group = min((group_of[ref] for ref in ready), key=self._started.__getitem__)
        return group, self.step_wait(group)

    def call(self, name: str, *args: Any, **kwargs: Any) -> list[Any]:
        """Calls env method ``name`` on every env (through its wrappers); one result per env.

        Each actor runs it on its envs after the steps started before it.
        """
        per_actor = [iter(groups) for groups in self.actors.get_all("call", name, args, kwargs)]
        return [r for group in range(len(self.groups)) for r in next(per_actor[self._owner[group]])]

    def close(self) -> None:
        """Closes every env and kills the actors (idempotent)."""
        self._pending.clear()
        self._started.clear()
        self.actors.close()


def actor_layout(num_envs: int, actors: int | None, *, slow: bool) -> tuple[int, int]:
    """``(actors, groups)`` for :class:`RayEnvWorkers` of ``num_envs`` envs.

    ``actors=None`` (or 0) picks 2 (one per node of a two-node cluster), or for
    envs with slow steps :data:`~.env_groups.SLOW_ENV_WORKERS`, at most one per
    env. Envs with slow steps get a group each (each stepped again as soon as
    its own step is back); other envs two groups an actor (an actor steps one
    while the learner acts for the other).

    Example:
        >>> actor_layout(8, None, slow=False), actor_layout(8, None, slow=True)
        ((2, 4), (4, 8))
        >>> actor_layout(2, 3, slow=False)
        (2, 2)
    """
    if not actors:
        actors = SLOW_ENV_WORKERS if slow else 2
    actors = min(actors, num_envs)
    return actors, num_envs if slow else min(num_envs, 2 * actors)


def ray_env_workers(
    env_fns: Sequence[Callable[[], gym.Env[Any, Any]]],
    actors: int | None,
    *,
    slow: bool,
    num_cpus: float = ENV_ACTOR_CPUS,
) -> RayEnvWorkers:
    """:class:`RayEnvWorkers` laid out by :func:`actor_layout`."""
    count, groups = actor_layout(len(env_fns), actors, slow=slow)
    return RayEnvWorkers(env_fns, groups=groups, actors=count, num_cpus=num_cpus)
