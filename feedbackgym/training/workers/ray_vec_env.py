"""SB3's ``VecEnv`` over Ray actors: the SB3 path's envs on a cluster's nodes.

:class:`RayVecEnv` is what ``SubprocVecEnv`` is, with the envs in
:class:`~.ray_actors.EnvActors` instead of local
processes: each actor holds a ``DummyVecEnv`` of its share of the envs (SB3's
own step, autoreset, ``terminal_observation`` and ``TimeLimit.truncated``),
and the adapter joins their batches. ``env_method`` (the controller's
``set_feedback_state`` included, through
:func:`~feedbackgym.protocol.call_envs`) runs on each actor's envs. Needs the
``ray`` and ``baselines`` extras.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

from feedbackgym.errors import requires_extra
from feedbackgym.training.workers.env_groups import split_groups
from feedbackgym.training.workers.ray_actors import ENV_ACTOR_CPUS, EnvActors

with requires_extra("baselines", "stable_baselines3"):
    from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv
    from stable_baselines3.common.vec_env.base_vec_env import (
        VecEnvIndices,
        VecEnvObs,
        VecEnvStepReturn,
    )

__all__ = ["RayVecEnv"]


class _ActorVecEnv(DummyVecEnv):
    """An actor's share of the envs; reset takes the seeds and options the adapter holds."""

    def reset_with(
        self, seeds: list[int | None], options: list[dict[str, Any]]
    ) -> tuple[VecEnvObs, list[dict[str, Any]]]:
        self._seeds, self._options = list(seeds), list(options)
        return self.reset(), self.reset_infos

    def spaces(self) -> tuple[gym.Space[Any], gym.Space[Any]]:
        return self.observation_space, self.action_space


def _actor_vec_env(env_fns: list[Callable[[], gym.Env[Any, Any]]]) -> _ActorVecEnv:
    return _ActorVecEnv(env_fns)


class RayVecEnv(VecEnv):
    """``len(env_fns)`` envs on ``actors`` Ray actors, as one SB3 ``VecEnv``.

    Args:
        env_fns: Builders of the envs; actor ``a`` builds its share (envs in
            order, split as evenly as can be) on its node.
        actors: How many actors (at most one per env).
        num_cpus: CPUs each actor asks for.
        strategy: Where the actors go (``"SPREAD"``: over the nodes; see
            :class:`~.ray_actors.EnvActors`).

    Raises:
        ValueError: No envs, or ``actors`` out of range.
        EnvActorError: An actor could not build its envs, died, or an env raised.

    Example:
        >>> import gymnasium as gym, feedbackgym
        >>> make = lambda: gym.make("feedbackgym/OpsIncidentEasy-v0")
        >>> venv = RayVecEnv([make] * 4, actors=2)  # doctest: +SKIP
        >>> _ = venv.seed(0); obs = venv.reset()  # doctest: +SKIP
        >>> _, rewards, dones, infos = venv.step(np.zeros(4, np.int64))  # doctest: +SKIP
        >>> rewards.shape, len(venv.nodes)  # doctest: +SKIP
        ((4,), 2)
        >>> venv.close()  # doctest: +SKIP
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env[Any, Any]]],
        actors: int = 2,
        *,
        num_cpus: float = ENV_ACTOR_CPUS,
        strategy: Any = "SPREAD",
    ) -> None:
        if not env_fns or not 1 <= actors <= len(env_fns):
            raise ValueError(f"need 1 <= actors <= envs, got {len(env_fns)} envs, {actors} actors")
        _, self._rows = split_groups(len(env_fns), actors)
        makers = [partial(_actor_vec_env, list(env_fns[rows])) for rows in self._rows]
        self.actors = EnvActors(makers, num_cpus=num_cpus, strategy=strategy)
        """The actors (their names and nodes: ``actors.names``, ``actors.nodes``)."""
        self._stepping: list[Any] = []
        try:
            observation_space, action_space = self.actors.get_all("spaces")[0]
            super().__init__(len(env_fns), observation_space, action_space)
        except BaseException:
            self.actors.close()
            raise

    @property
    def nodes(self) -> list[str | None]:
        """The node of each actor."""
        return self.actors.nodes

    def reset(self) -> VecEnvObs:
        """Resets every env (with the seeds and options set since the last reset)."""
        refs = [
            self.actors.ask(a, "reset_with", self._seeds[rows], self._options[rows])
            for a, rows in enumerate(self._rows)
        ]
        results = [self.actors.get(a, ref) for a, ref in enumerate(refs)]
        self.reset_infos = [info for _, infos in results for info in infos]
        self._reset_seeds()
        self._reset_options()
        return self._join([obs for obs, _ in results])

    def step_async(self, actions: np.ndarray) -> None:
        """Starts a step of every env."""
        self._stepping = [
            self.actors.ask(a, "step", np.asarray(actions)[rows])
            for a, rows in enumerate(self._rows)
        ]

    def step_wait(self) -> VecEnvStepReturn:
        """Waits for every env's step (SB3's autoreset: ``terminal_observation`` in the info)."""
        refs, self._stepping = self._stepping, []
        results = [self.actors.get(a, ref) for a, ref in enumerate(refs)]
        obs = self._join([r[0] for r in results])
        rewards = np.concatenate([r[1] for r in results])
        dones = np.concatenate([r[2] for r in results])
        return obs, rewards, dones, [info for r in results for info in r[3]]

    def _join(self, parts: list[Any]) -> VecEnvObs:
        if isinstance(parts[0], dict):
            return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
        return np.concatenate(parts)

    def _per_actor(
        self, method: str, indices: VecEnvIndices, *args: Any, **kwargs: Any
    ) -> list[Any]:
        """Calls ``method(*args, indices=local, **kwargs)`` on the actors holding ``indices``.

        One result per index, in the order of ``indices`` (as ``SubprocVecEnv``).
        """
        order = list(self._get_indices(indices))
        wanted = set(order)
        refs = []
        for a, rows in enumerate(self._rows):
            mine = [i for i in range(rows.start, rows.stop) if i in wanted]
            if mine:
                local = [i - rows.start for i in mine]
                refs.append((a, mine, self.actors.ask(a, method, *args, indices=local, **kwargs)))
        results: dict[int, Any] = {}
        for a, mine, ref in refs:
            results.update(zip(mine, self.actors.get(a, ref) or [None] * len(mine), strict=True))
        return [results[i] for i in order]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """An attribute of each env in ``indices``."""
        return self._per_actor("get_attr", indices, attr_name)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Sets an attribute of each env in ``indices``."""
        self._per_actor("set_attr", indices, attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        """Calls an env method on each env in ``indices`` (through its wrappers)."""
        return self._per_actor("env_method", indices, method_name, *method_args, **method_kwargs)

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper[Any, Any, Any, Any]], indices: VecEnvIndices = None
    ) -> list[bool]:
        """Whether each env in ``indices`` is wrapped in ``wrapper_class``."""
        return self._per_actor("env_is_wrapped", indices, wrapper_class)

    def close(self) -> None:
        """Closes every env and kills the actors (idempotent)."""
        self._stepping = []
        self.actors.close()
