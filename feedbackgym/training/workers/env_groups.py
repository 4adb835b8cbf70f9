"""The torch trainer's envs, stepped in groups: in the learner's process or in worker processes.

:class:`EnvWorkers` splits ``num_envs``
:class:`~feedbackgym.training.common.trainer_view.TrainerView` envs into
groups. With ``processes=True`` each group lives in its own worker process and
steps while the learner picks the next group's actions, so env stepping and
inference overlap (with two groups on two cores, neither waits for the other
for long). Without processes the groups step in place, one after another:
the same calls, the same results, for tests and for envs that are cheaper
than a process hop.

A group's step writes into preallocated arrays (shared memory for a worker),
so a step moves no observations through pipes, only a one-word command.
Autoreset is same-step: a finished episode's last observation is kept in
``final_obs`` and its row of ``obs`` is the next episode's first.

:meth:`EnvWorkers.step_wait_any` takes whichever started group finishes first,
so envs whose steps take long and vary (a browser, a sandbox) are stepped as
they become ready: one slow step holds up its own group only, not the batch.
Each group still steps in order, so its envs' trajectories are what a lockstep
loop would give them.

:class:`EnvGroups` declares what the torch trainer uses of it; the groups'
envs may also live in Ray actors across a cluster's nodes
(:class:`~.ray_actors.RayEnvWorkers`, the same interface).

Example:
    >>> import feedbackgym
    >>> from feedbackgym.training.common.trainer_view import TrainerView
    >>> build = lambda: TrainerView(feedbackgym.make("feedbackgym/OpsIncidentEasy-v0", "sparse"))
    >>> envs = EnvWorkers([build] * 4, groups=2)
    >>> envs.reset(seed=0).shape == (4, envs.single_observation_space.shape[0])
    True
    >>> envs.step_async(0, np.zeros(2, np.int64)); envs.step_wait(0).reward.shape
    (2,)
    >>> envs.close()
"""

from __future__ import annotations

import itertools
import multiprocessing
import multiprocessing.connection
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.shared_memory import SharedMemory
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np

from feedbackgym.errors import FeedbackGymError
from feedbackgym.protocol import ENV_REWARD, IS_SUCCESS
from feedbackgym.registration import env_class

__all__ = [
    "ENV_BACKENDS",
    "check_env_backend",
    "SLOW_ENV_WORKERS",
    "EnvGroups",
    "EnvWorkerError",
    "EnvWorkers",
    "StepBatch",
    "check_layout",
    "split_groups",
    "steps_slowly",
    "worker_layout",
]

ENV_BACKENDS = ("processes", "ray")
"""Where the torch trainer's env groups live: this machine (in the learner's process or in
worker processes, :class:`EnvWorkers`) or Ray actors across a cluster
(:class:`~.ray_actors.RayEnvWorkers`)."""


def check_env_backend(backend: str, actor_cpus: float) -> None:
    """Raises ``ValueError`` for a backend not in :data:`ENV_BACKENDS` or ``actor_cpus < 0``."""
    if backend not in ENV_BACKENDS:
        raise ValueError(f"env_backend must be one of {', '.join(ENV_BACKENDS)}, got {backend!r}")
    if actor_cpus < 0:
        raise ValueError(f"env_actor_cpus must be >= 0, got {actor_cpus}")


SLOW_ENV_WORKERS = 4
"""Worker processes the torch trainer gives envs with slow steps unless told otherwise
(on 2 cores, 4 web envs stepped as they are ready against one: ``benchmarks/web_vector.py``)."""


def steps_slowly(env_id: str) -> bool:
    """Whether ``env_id``'s env declares slow steps (``metadata["slow_steps"]``: browser, sandbox).

    Its class is imported (not built) to read the declaration.

    Example:
        >>> import feedbackgym
        >>> steps_slowly("feedbackgym/OpsIncidentEasy-v0"), steps_slowly("feedbackgym/WebForm-v0")
        (False, True)
    """
    return bool(getattr(env_class(env_id), "metadata", {}).get("slow_steps", False))


def worker_layout(env_id: str, num_envs: int, workers: int | None) -> tuple[int, int]:
    """``(processes, groups)`` for :class:`EnvWorkers` of ``num_envs`` envs of ``env_id``.

    ``workers=None`` picks: :data:`SLOW_ENV_WORKERS` (at most one per env) for
    envs with slow steps (:func:`steps_slowly`), else none (the envs step in the
    learner's process). Envs with slow steps get a group each, so that each is
    stepped again as soon as its own step is back; other envs two groups a
    worker (a worker steps one while the learner acts for the other).

    Example:
        >>> import feedbackgym
        >>> web, ops = "feedbackgym/WebForm-v0", "feedbackgym/OpsIncidentEasy-v0"
        >>> worker_layout(web, 8, None), worker_layout(web, 8, 0), worker_layout(web, 8, 2)
        ((4, 8), (0, 1), (2, 8))
        >>> worker_layout(ops, 8, None), worker_layout(ops, 8, 1)
        ((0, 1), (1, 2))
    """
    slow = steps_slowly(env_id)
    if workers is None:
        workers = min(num_envs, SLOW_ENV_WORKERS) if slow else 0
    if not workers:
        return 0, 1
    return workers, num_envs if slow else min(num_envs, 2 * workers)


def check_layout(num_envs: int, groups: int, workers: int, *, fewest: int, kind: str) -> None:
    """Checks that ``num_envs`` envs split into ``groups`` groups over ``workers`` of ``kind``.

    Raises:
        ValueError: Unless ``1 <= groups <= num_envs`` and ``fewest <= workers <= groups``.

    Example:
        >>> try:
        ...     check_layout(4, 2, 3, fewest=1, kind="actors")
        ... except ValueError as error:
        ...     print(error)
        need 1 <= groups <= envs and 1 <= actors <= groups, got 4 envs, 2 groups, 3 actors
    """
    if not num_envs or not 1 <= groups <= num_envs or not fewest <= workers <= groups:
        raise ValueError(
            f"need 1 <= groups <= envs and {fewest} <= {kind} <= groups, got {num_envs} "
            f"envs, {groups} groups, {workers} {kind}"
        )


def split_groups(num_envs: int, groups: int) -> tuple[list[int], list[slice]]:
    """Each group's size and rows when ``num_envs`` envs split into ``groups`` groups.

    Example:
        >>> split_groups(5, 2)
        ([3, 2], [slice(0, 3, None), slice(3, 5, None)])
    """
    sizes = [len(part) for part in np.array_split(np.arange(num_envs), groups)]
    starts = np.cumsum([0, *sizes])
    return sizes, [slice(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:], strict=True)]


class EnvWorkerError(FeedbackGymError, RuntimeError):
    """An env in a worker process raised, or the worker died; the message holds its traceback."""


@runtime_checkable
class EnvGroups(Protocol):
    """What the torch trainer uses of its envs: groups stepped as they become ready.

    Met by :class:`EnvWorkers` (this machine) and
    :class:`~.ray_actors.RayEnvWorkers` (Ray actors). The
    controller's state reaches the envs through :meth:`call` (with
    :func:`~feedbackgym.protocol.call_envs`, which takes anything with ``call``
    and ``num_envs``).

    Attributes:
        num_envs: Envs in all.
        groups: Each group's rows among all envs.
        single_observation_space: One env's (flat ``Box``) observation space.
        single_action_space: One env's action space.
    """

    num_envs: int
    groups: list[slice]
    single_observation_space: Any
    single_action_space: Any

    def reset(self, seed: int) -> np.ndarray:
        """Resets env ``i`` with ``seed + i``; returns every env's first observation."""

    def step_async(self, group: int, actions: np.ndarray) -> None:
        """Starts a step of ``group``'s envs."""

    def step_wait(self, group: int) -> StepBatch:
        """Waits for ``group``'s step; returns its arrays."""

    def step_wait_any(self) -> tuple[int, StepBatch]:
        """Waits for whichever started group finishes first."""

    def call(self, name: str, *args: Any, **kwargs: Any) -> list[Any]:
        """Calls env method ``name`` on every env; one result per env, in env order."""

    def close(self) -> None:
        """Closes every env and frees what holds them."""


@dataclass(frozen=True)
class StepBatch:
    """A group's arrays: its last step's results, one row per env of the group.

    Attributes:
        obs: The observations to act on next (after a same-step reset: the next episode's first).
        action: The actions of the step (written by :meth:`EnvWorkers.step_async`).
        reward: The rewards.
        terminated: Whether each episode ended.
        truncated: Whether each episode was cut off.
        env_reward: The env's own reward of the step (without shaping).
        is_success: Whether the step finished the task.
        final_obs: A finished episode's last observation (rows where it ended).
    """

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    env_reward: np.ndarray
    is_success: np.ndarray
    final_obs: np.ndarray

    @staticmethod
    def layout(n: int, obs_size: int) -> list[tuple[str, tuple[int, ...], Any]]:
        """Each array's name, shape and dtype, in buffer order."""
        return [
            ("obs", (n, obs_size), np.float32),
            ("final_obs", (n, obs_size), np.float32),
            ("action", (n,), np.int64),
            ("reward", (n,), np.float32),
            ("env_reward", (n,), np.float64),
            ("terminated", (n,), np.bool_),
            ("truncated", (n,), np.bool_),
            ("is_success", (n,), np.bool_),
        ]

    @classmethod
    def nbytes(cls, n: int, obs_size: int) -> int:
        """The bytes of a buffer holding a group of ``n`` envs (8-byte aligned arrays)."""
        return sum(_aligned(shape, dtype) for _, shape, dtype in cls.layout(n, obs_size))

    @classmethod
    def on(cls, buffer: Any, n: int, obs_size: int) -> StepBatch:
        """The arrays of a group of ``n`` envs laid over ``buffer``."""
        arrays, offset = {}, 0
        for name, shape, dtype in cls.layout(n, obs_size):
            arrays[name] = np.ndarray(shape, dtype, buffer=buffer, offset=offset)
            offset += _aligned(shape, dtype)
        return cls(**arrays)


def _aligned(shape: tuple[int, ...], dtype: Any) -> int:
    """The bytes of an array of ``shape`` and ``dtype``, rounded up to a multiple of 8."""
    return -(-int(np.prod(shape)) * np.dtype(dtype).itemsize // 8) * 8


class _Group:
    """Some envs and their arrays: steps them all with the actions in the arrays."""

    def __init__(self, envs: list[gym.Env[Any, Any]], arrays: StepBatch) -> None:
        self.envs = envs
        self.arrays = arrays

    def reset(self, seeds: Sequence[int]) -> None:
        for row, (env, seed) in enumerate(zip(self.envs, seeds, strict=True)):
            self.arrays.obs[row] = env.reset(seed=int(seed))[0]

    def step(self) -> None:
        a = self.arrays
        for row, env in enumerate(self.envs):
            obs, reward, terminated, truncated, info = env.step(int(a.action[row]))
            a.reward[row] = reward
            a.terminated[row] = terminated
            a.truncated[row] = truncated
            a.env_reward[row] = info[ENV_REWARD]
            a.is_success[row] = info[IS_SUCCESS]
            if terminated or truncated:
                a.final_obs[row] = obs
                obs = env.reset()[0]
            a.obs[row] = obs

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        return [env.get_wrapper_attr(name)(*args, **kwargs) for env in self.envs]

    def close(self) -> None:
        close_envs(self.envs)


def close_envs(envs: Sequence[gym.Env[Any, Any]]) -> None:
    """Closes every env, each in its own try; then raises the first error, if any."""
    first: BaseException | None = None
    for env in envs:
        try:
            env.close()
        except BaseException as error:  # noqa: BLE001 - the rest still close
            first = first or error
    if first is not None:
        raise first


def _serve(connection: Any, build: bytes, sizes: list[int]) -> None:
    """A worker process: builds groups of ``sizes`` envs, then serves the learner's commands."""
    import cloudpickle

    envs: list[list[gym.Env[Any, Any]]] = []
    memories: list[SharedMemory] = []
    groups: list[_Group] = []
    try:
        builder = cloudpickle.loads(build)
        envs = [[builder() for _ in range(size)] for size in sizes]
        space = envs[0][0].observation_space
        connection.send(("ok", (space, envs[0][0].action_space)))
        memories = [SharedMemory(name=name) for name in connection.recv()]
        obs_size = int(np.prod(space.shape or ()))
        groups = [
            _Group(each, StepBatch.on(memory.buf, len(each), obs_size))
            for each, memory in zip(envs, memories, strict=True)
        ]
        connection.send(("ok", None))
        while True:
            command, payload = connection.recv()
            if command == "close":
                break
            try:
                if command == "step":
                    result = groups[payload].step()
                elif command == "reset":
                    result = groups[payload[0]].reset(payload[1])
                else:  # "call"
                    result = [group.call(*payload) for group in groups]
                connection.send(("ok", result))
            except Exception:
                connection.send(("error", traceback.format_exc()))
    except (EOFError, KeyboardInterrupt):
        pass  # the learner is gone: close the envs and leave
    except Exception:
        connection.send(("error", traceback.format_exc()))
    finally:
        groups.clear()  # the arrays go first: a memory with views on it cannot close
        for env in (env for each in envs for env in each):
            env.close()
        for memory in memories:
            memory.close()
        connection.close()


class EnvWorkers:
    """``len(env_fns)`` envs in ``groups`` groups, stepped in place or in worker processes.

    With ``processes``, group ``g`` lives in worker ``g % processes``; a worker
    steps its groups in the order the learner asked, so with two groups in one
    worker the worker steps one while the learner acts for the other (two
    processes: no more than two cores busy).

    Args:
        env_fns: Builders of the envs
        (:class:`~feedbackgym.training.common.trainer_view.TrainerView`-wrapped:
            a flat ``Box`` observation, ``env_reward`` and ``is_success`` in each
            info). All must be alike; worker processes take ``env_fns[0]``'s
            builder for their envs (pickled with cloudpickle).
        groups: How many groups (at most one per env).
        processes: Worker processes (0: step the groups in this process; at most ``groups``).

    Raises:
        ValueError: No envs, or ``groups`` or ``processes`` out of range.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env[Any, Any]]],
        groups: int = 1,
        processes: int = 0,
    ) -> None:
        check_layout(len(env_fns), groups, processes, fewest=0, kind="processes")
        self.num_envs = len(env_fns)
        sizes, self.groups = split_groups(self.num_envs, groups)
        """Each group's rows among all envs."""
        self._owner = [group % processes for group in range(groups)] if processes else []
        self._processes: list[Any] = []
        self._connections: list[Any] = []
        self._memories: list[SharedMemory] = []
        self._local: list[_Group] = []
        self._batches: list[StepBatch] = []
        self._pending: list[bool] = [False] * groups
        self._started: dict[int, int] = {}  # pending group -> when it started (a counter)
        self._queues: list[deque[int]] = [deque() for _ in range(max(processes, 1))]
        self._clock = itertools.count()
        try:
            if processes:
                self._start_workers(env_fns[0], sizes, processes)
            else:
                self._build_here(env_fns, sizes)
        except BaseException:
            self.close()
            raise

    def _build_here(self, env_fns: Sequence[Callable[[], Any]], sizes: list[int]) -> None:
        envs = [build() for build in env_fns]
        self.single_observation_space = envs[0].observation_space
        self.single_action_space = envs[0].action_space
        obs_size = int(np.prod(self.single_observation_space.shape))
        for rows, size in zip(self.groups, sizes, strict=True):
            batch = StepBatch.on(bytearray(StepBatch.nbytes(size, obs_size)), size, obs_size)
            self._local.append(_Group(envs[rows], batch))
            self._batches.append(batch)

    def _start_workers(self, build: Callable[[], Any], sizes: list[int], processes: int) -> None:
        import cloudpickle

        context = multiprocessing.get_context("spawn")  # no fork of a process holding torch threads
        pickled = cloudpickle.dumps(build)
        for worker in range(processes):
            ours, theirs = context.Pipe()
            mine = [size for g, size in enumerate(sizes) if self._owner[g] == worker]
            process = context.Process(target=_serve, args=(theirs, pickled, mine), daemon=True)
            process.start()
            theirs.close()
            self._processes.append(process)
            self._connections.append(ours)
        for worker in range(processes):
            space, self.single_action_space = self._receive(worker)
            self.single_observation_space = space
        obs_size = int(np.prod(space.shape))
        for size in sizes:
            memory = SharedMemory(create=True, size=StepBatch.nbytes(size, obs_size))
            self._memories.append(memory)
            self._batches.append(StepBatch.on(memory.buf, size, obs_size))
        for worker, connection in enumerate(self._connections):
            owned = [m.name for g, m in enumerate(self._memories) if self._owner[g] == worker]
            connection.send(owned)
        for worker in range(processes):
            self._receive(worker)

    def _place(self, group: int) -> int:
        """Where ``group`` is among its worker's (worker ``w`` holds ``w``, ``w + P``, ...)."""
        return group // len(self._connections)

    def _died(self, worker: int) -> EnvWorkerError:
        return EnvWorkerError(
            f"env worker {worker} died (exit code {self._processes[worker].exitcode})"
        )

    def _send(self, worker: int, message: Any) -> None:
        try:
            self._connections[worker].send(message)
        except OSError as error:  # BrokenPipeError included
            raise self._died(worker) from error

    def _receive(self, worker: int) -> Any:
        try:
            status, payload = self._connections[worker].recv()
        except (EOFError, OSError) as error:
            raise self._died(worker) from error
        if status == "error":
            raise EnvWorkerError(f"env worker {worker} failed:\n{payload}")
        return payload

    def reset(self, seed: int) -> np.ndarray:
        """Resets env ``i`` with ``seed + i``; returns every env's first observation."""
        for group, rows in enumerate(self.groups):
            seeds = list(range(seed + rows.start, seed + rows.stop))
            if self._local:
                self._local[group].reset(seeds)
            else:
                self._send(self._owner[group], ("reset", (self._place(group), seeds)))
        for group in range(len(self.groups)) if not self._local else ():
            self._receive(self._owner[group])
        return np.concatenate([batch.obs for batch in self._batches])

    def step_async(self, group: int, actions: np.ndarray) -> None:
        """Starts a step of ``group``'s envs with ``actions`` (one per env of the group)."""
        if self._pending[group]:
            raise RuntimeError(f"group {group} is stepping already: wait for it first")
        self._batches[group].action[:] = actions
        self._pending[group] = True
        self._started[group] = next(self._clock)
        self._queues[self._worker_of(group)].append(group)
        if not self._local:
            self._send(self._owner[group], ("step", self._place(group)))

    def step_wait(self, group: int) -> StepBatch:
        """Waits for ``group``'s step; its arrays stay valid until its next step.

        Groups of one worker must be waited for in the order they were started.

        Raises:
            EnvWorkerError: An env raised (its traceback in the message) or a worker died.
        """
        if not self._pending[group]:
            raise RuntimeError(f"step_async({group}, ...) first")
        queue = self._queues[self._worker_of(group)]
        if queue[0] != group:
            raise RuntimeError(f"wait for group {queue[0]} first: its worker stepped it before")
        queue.popleft()
        self._pending[group] = False
        del self._started[group]
        if self._local:
            self._local[group].step()
        else:
            self._receive(self._owner[group])
        return self._batches[group]

    def step_wait_any(self) -> tuple[int, StepBatch]:
        """Waits for whichever started group finishes first; returns it and its arrays.

        In worker processes: the first worker to answer (a worker steps its
        groups in the order they were started; of several answers at once, the
        group started first). In this process: the group started first, stepped
        now, so a loop of :meth:`step_wait_any` and :meth:`step_async` steps
        the groups round-robin, as a lockstep loop would.

        Raises:
            RuntimeError: No group is stepping.
            EnvWorkerError: An env raised (its traceback in the message) or a worker died.

        Example:
            >>> import feedbackgym
            >>> from feedbackgym.training.common.trainer_view import TrainerView
            >>> build = lambda: TrainerView(feedbackgym.make("feedbackgym/OpsIncidentEasy-v0"))
            >>> envs = EnvWorkers([build] * 2, groups=2)
            >>> _ = envs.reset(seed=0)
            >>> for group in (0, 1):
            ...     envs.step_async(group, np.zeros(1, np.int64))
            >>> [envs.step_wait_any()[0] for _ in range(2)]
            [0, 1]
            >>> envs.close()
        """
        heads = [queue[0] for queue in self._queues if queue]
        if not heads:
            raise RuntimeError("no group is stepping: step_async(...) first")
        if not self._local:
            ready = multiprocessing.connection.wait(
                [self._connections[self._owner[group]] for group in heads]
            )
            heads = [group for group in heads if self._connections[self._owner[group]] in ready]
        group = min(heads, key=self._started.__getitem__)
        return group, self.step_wait(group)

    def _worker_of(self, group: int) -> int:
        """The worker whose queue ``group`` joins (0 for every group in this process)."""
        return self._owner[group] if self._owner else 0

    def call(self, name: str, *args: Any, **kwargs: Any) -> list[Any]:
        """Calls env method ``name`` on every env (through its wrappers); one result per env."""
        if self._local:
            return [r for group in self._local for r in group.call(name, args, kwargs)]
        for worker in range(len(self._connections)):
            self._send(worker, ("call", (name, args, kwargs)))
        per_worker = [iter(self._receive(w)) for w in range(len(self._connections))]
        return [
            r for group in range(len(self.groups)) for r in next(per_worker[self._owner[group]])
        ]

    def close(self) -> None:
        """Closes every env and ends the workers (killed if they do not leave within 10 s)."""
        for group in self._local:
            group.close()
        self._local = []
        for connection in self._connections:
            try:
                connection.send(("close", None))
            except (BrokenPipeError, OSError):
                pass
        for process in self._processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join()
        for connection in self._connections:
            connection.close()
        self._batches = []
        for memory in self._memories:
            try:
                memory.close()
            except BufferError:  # a caller still holds a batch: the mapping goes with it
                pass
            memory.unlink()
        self._processes, self._connections, self._memories = [], [], []
