"""``Reexplore``: start training episodes from states a review flagged, or along demonstrations.

Restarts at the edge of what the agent can do (Salimans & Chen 2018, RFCL 2024,
reverse curricula): a state is reached again by ``reset(seed)`` and the replayed
action prefix that led there, so every restart is exact for a deterministic env
and every wrapper inside (time limit, shaping, guide, review) sees the episode
as it was. The env's own snapshots (``get_state``/``set_state``) are not used:
they would leave those wrappers' state (elapsed steps, potential, review
history) at the reset's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from feedbackgym.config import ReexploreConfig
from feedbackgym.errors import FeedbackGymError
from feedbackgym.protocol import FEEDBACK
from feedbackgym.wrappers.common import find_wrapper, json_safe, seeded_rng
from feedbackgym.wrappers.review import AddReview

__all__ = ["Reexplore", "RestartStart"]

SEED_LIMIT = 2**31 - 1


@dataclass(eq=False)
class RestartStart:
    """A state to start from: an episode's seed and the actions that reach the state.

    Each is one entry of the pool (compared by identity): its counts and
    actions change as episodes start from it.

    Attributes:
        seed: The episode's seed.
        actions: The actions replayed after ``reset(seed)``; the start is the
            state before ``actions[len(actions)]`` would be taken.
        kind: ``"review"`` (a review's flagged point) or ``"demo"`` (a start
            along a demonstration).
        successes: Episodes from here that succeeded, since it last moved.
        failures: Episodes from here that failed, since it last moved.
        full: A demonstration's whole action list (its start is a prefix of it).
    """

    seed: int
    actions: list[Any]
    kind: str = "review"
    successes: int = 0
    failures: int = 0
    full: list[Any] = field(default_factory=list)


class Reexplore(
    gym.Wrapper[Any, Any, Any, Any],
    gym.utils.RecordConstructorArgs,
):
    """Starts training episodes from restart points: reviewed states and demonstrations.

    Off (``config=None``, the default) it passes every call through unchanged.
    On, every episode gets a known seed (drawn from the wrapper's generator when
    ``reset`` is called without one) and its actions are recorded, so any of its
    states can be reached again. A reset **with** a seed (validation on held-out
    seeds, a trainer's first reset) is always a true reset. A reset without one:

    * with ``demonstrations``, starts with probability ``demo_prob`` along one of
      the expert's episodes whose start has not reached its true start yet: late
      in the demonstration first, moved back ``back_steps`` after
      ``gate_successes`` successes from there;
    * else, once restarts have begun (``begin``: from the first round, or from
      the schedule's switch) and with probability ``prob``, starts from a point
      of the pool: the points (``points``) of the reviews of failed episodes. A
      point is dropped after ``gate_successes`` successes from it, and moved
      back ``back_steps`` after ``gate_failures`` failures. An episode that the
      arm's review does not review (an arm that shows no review) is reviewed
      here, for the restarts only: the policy never sees that review.
    * ``anneal_by`` lowers both chances linearly to 0 by that fraction of training.

    Where training is comes from the controller's
    :class:`~feedbackgym.protocol.FeedbackState`: the
    :class:`~feedbackgym.wrappers.FadeGuideToReview` outside passes it on through
    :meth:`set_training_progress`. Replayed steps go through every wrapper inside
    (their hints are counted with the others). ``info["restored_from"]``
    names the start of a restored episode (``{"seed", "step", "kind"}``).
    :meth:`restart_stats` counts restores, their successes and the replayed steps.

    ``reset(options={"restore": point})`` starts from ``point`` explicitly: a
    re-explore point of the last finished episode (``{"step": t}``) or
    ``{"seed": s, "actions": [...]}``.

    Args:
        env: The env; with restarts from reviews (``prob > 0``) an
            :class:`~feedbackgym.wrappers.AddReview` must be inside.
        config: The ``reexplore`` section (a
            :class:`~feedbackgym.config.ReexploreConfig` or its dict), or
            ``None`` for off.

    Raises:
        ValueError: Restarts from reviews without an ``AddReview`` inside.

    Example:
        >>> import gymnasium as gym, feedbackgym
        >>> env = Reexplore(gym.make("feedbackgym/OpsIncidentEasy-v0"))
        >>> _ = env.reset(seed=0)
        >>> _ = env.step("wait"); _ = env.step("escalate")
        >>> env.reset(options={"restore": {"step": 1}})[1]["restored_from"]
        {'seed': 0, 'step': 1, 'kind': 'explicit'}

    Change logs:
     * v0.2.0 - A restart pool gated by success, demonstrations, annealing; driven
       by the controller's state; a reset with a seed never restores; the
       pool's points keep their own episode's seed and actions
     * v0.1.0 - Initially added
    """

    counters = (
        "restores",
        "demo_restores",
        "restored_episodes",
        "restored_successes",
        "replayed_steps",
        "true_resets",
    )
    """Names of the counters :meth:`restart_stats` reports and resets."""
    restores: int
    """Episodes started from a restart (review points, demonstrations, explicit)."""
    demo_restores: int
    """Of those, the starts along a demonstration."""
    restored_episodes: int
    """Restored episodes that ended."""
    restored_successes: int
    """Of those, the successes."""
    replayed_steps: int
    """Steps replayed to reach the restarts (the learner never sees them)."""
    true_resets: int
    """Episodes started from a true reset while restarts were on."""

    def __init__(
        self, env: gym.Env[Any, Any], config: ReexploreConfig | dict[str, Any] | None = None
    ) -> None:
        plain = config.model_dump(mode="json") if isinstance(config, ReexploreConfig) else config
        gym.utils.RecordConstructorArgs.__init__(self, config=plain)
        gym.Wrapper.__init__(self, env)
        self._review_wrapper = find_wrapper(env, AddReview)
        self._rng: np.random.Generator | None = None
        self._seed: int | None = None
        self._actions: list[Any] = []
        self._finished: tuple[int, list[Any]] | None = None
        self._from: RestartStart | None = None
        self._pool: list[RestartStart] = []
        self._demos: list[RestartStart] | None = None
        self._fraction = 0.0
        self._switch = 1.0
        self._seeded = False
        self.config: ReexploreConfig | None = None
        self.configure(config)
        for name in self.counters:
            setattr(self, name, 0)

    # --- trainer-facing -------------------------------------------------------------------

    def configure(self, config: ReexploreConfig | dict[str, Any] | None) -> None:
        """Applies a ``reexplore`` config section (``None``: off); the pool is kept.

        Raises:
            ValueError: A restart needs the review wrapper inside, and there is none.
        """
        if isinstance(config, dict):
            config = ReexploreConfig.model_validate(config)
        if config is not None and self._review_wrapper is None and config.prob > 0:
            raise ValueError("reexplore with prob > 0 needs AddReview inside Reexplore")
        old = self.config
        if config is None or old is None or config.demonstrations != old.demonstrations:
            self._demos = None  # played again, at the next reset that needs them
        self.config = config

    def set_training_progress(self, fraction: float, switch_at: float) -> None:
        """Where training is and where its switch is, as fractions of training.

        :class:`~feedbackgym.wrappers.FadeGuideToReview` calls it with each
        :class:`~feedbackgym.protocol.FeedbackState` a controller pushes.
        """
        self._fraction = min(1.0, max(0.0, fraction))
        self._switch = switch_at

    def restart_stats(self) -> dict[str, Any]:
        """Counts since the last call, and the pool's size and the demonstrations' starts.

        ``demo_remaining`` is the mean share of each demonstration still replayed
        (1: at its end, 0: every one starts at its true start).
        """
        stats: dict[str, Any] = {name: getattr(self, name) for name in self.counters}
        for name in self.counters:
            setattr(self, name, 0)
        stats["pool"] = len(self._pool)
        if self._demos:
            stats["demo_remaining"] = float(
                np.mean([len(d.actions) / max(1, len(d.full)) for d in self._demos])
            )
        return stats

    def draw_restart(self) -> RestartStart | None:
        """The start a reset without a seed would restore now, drawn with its chances, or None.

        For a trainer that plays its episodes itself from a seeded reset and the
        start's replayed actions (a language model's chat holds the replayed steps):
        it reports each such episode's end to :meth:`restart_ended`, which gates the
        start as a restored episode's end would.
        """
        if self.config is None:
            return None
        self._rng = seeded_rng(None, 0x7265, self._rng)
        return self._due_start()

    def restart_ended(
        self, start: RestartStart | None, seed: int, actions: list[Any], info: dict[str, Any]
    ) -> None:
        """A trainer's own episode ended: its review's points join the pool, its start is gated.

        Call it right after the episode's last step (a quiet review reads the
        review wrapper's record of that episode).

        Args:
            start: The start it was played from (:meth:`draw_restart`), or ``None``
                from its seed's true start.
            seed: Its seed.
            actions: All its actions, the replayed ones first.
            info: Its last step's info.
        """
        if self.config is None:
            return
        if start is not None:  # counted as a restore, not as the seeded reset it began with
            self.restores += 1
            self.demo_restores += start.kind == "demo"
            self.replayed_steps += len(start.actions)
            self.true_resets = max(0, self.true_resets - 1)
        self._seed, self._actions, self._seeded = int(seed), list(actions), False
        self._from = start
        self._episode_ended(bool(info.get("is_success", False)), info)

    # --- Gymnasium API --------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """A true reset with a seed; else, when due, a restart (see the class docstring)."""
        options = dict(options or {})
        point = options.pop("restore", None)
        if self.config is None and point is None:
            self._seed, self._actions, self._from = seed, [], None
            return self.env.reset(seed=seed, options=options or None)
        self._rng = seeded_rng(seed, 0x7265, self._rng)
        if point is not None:
            return self._restore(self._explicit(point), options)
        start = self._due_start() if seed is None else None
        if start is not None:
            return self._restore(start, options)
        self._seed = int(seed) if seed is not None else int(self._rng.integers(SEED_LIMIT))
        self._actions, self._from, self._seeded = [], None, seed is not None
        self.true_resets += 1
        return self.env.reset(seed=self._seed, options=options or None)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Steps the env and records the action; a finished episode updates the starts."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self._seed is None:  # off, reset without a seed: no state of it can be restored
            if terminated or truncated:
                self._finished = None
            return obs, reward, terminated, truncated, info
        self._actions.append(json_safe(action))
        if terminated or truncated:
            self._finished = (self._seed, self._actions)
            if self.config is not None or self._from is not None:
                self._episode_ended(bool(info.get("is_success", False)), info)
        return obs, reward, terminated, truncated, info

    # --- restarts -------------------------------------------------------------------------

    def _chance(self, base: float) -> float:
        assert self.config is not None
        if self.config.anneal_by is None:
            return base
        return base * max(0.0, 1.0 - self._fraction / self.config.anneal_by)

    def _begun(self) -> bool:
        assert self.config is not None
        return self.config.begin == "start" or self._fraction >= self._switch

    def _due_start(self) -> RestartStart | None:
        config = self.config
        assert config is not None and self._rng is not None
        if config.demonstrations:
            open_demos = [d for d in self._demonstrations() if d.actions]
            if open_demos and self._rng.random() < self._chance(config.demo_prob):
                return open_demos[int(self._rng.integers(len(open_demos)))]
        if self._pool and self._begun() and self._rng.random() < self._chance(config.prob):
            return self._pool[int(self._rng.integers(len(self._pool)))]
        return None

    def _demonstrations(self) -> list[RestartStart]:
        """The expert's episodes, played once on the unwrapped env, each started near its end."""
        if self._demos is None:
            assert self.config is not None
            expert = self.env.get_wrapper_attr("expert_action")
            base, limit = self.env.unwrapped, getattr(self.env.spec, "max_episode_steps", None)
            self._demos = []
            for k in range(self.config.demonstrations):
                seed = self.config.demo_seed + k
                base.reset(seed=seed)
                actions: list[Any] = []
                done = False
                while not done and (limit is None or len(actions) < limit):
                    action = json_safe(expert())
                    actions.append(action)
                    _, _, terminated, truncated, _ = base.step(action)
                    done = terminated or truncated
                start = max(0, len(actions) - self.config.back_steps)
                self._demos.append(RestartStart(seed, actions[:start], "demo", full=actions))
        return self._demos

    def _explicit(self, point: dict[str, Any]) -> RestartStart:
        if "seed" in point and "actions" in point:
            return RestartStart(int(point["seed"]), list(point["actions"]), "explicit")
        if "step" in point:
            if self._finished is None:
                raise FeedbackGymError(
                    "no finished episode with a known seed to restore from (with restarts "
                    "off, reset with a seed); pass seed and actions"
                )
            seed, episode = self._finished
            step = int(point["step"])
            if not 0 <= step <= len(episode):
                raise FeedbackGymError(
                    f"restore step {step} is outside the last episode (0..{len(episode)})"
                )
            return RestartStart(seed, episode[:step], "explicit")
        raise FeedbackGymError(
            f"a restore point needs 'step', or 'seed' and 'actions'; got {sorted(point)}"
        )

    def _restore(self, start: RestartStart, options: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=start.seed, options=options or None)
        for replayed, action in enumerate(start.actions):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                raise FeedbackGymError(
                    f"the replay of seed {start.seed} ended at step {replayed} of "
                    f"{len(start.actions)}: the env is not deterministic"
                )
        self._seed, self._actions, self._from = start.seed, list(start.actions), start
        self._seeded = False
        self.restores += 1
        self.demo_restores += start.kind == "demo"
        self.replayed_steps += len(start.actions)
        info["restored_from"] = {"seed": start.seed, "step": len(start.actions), "kind": start.kind}
        return obs, info

    def _episode_ended(self, success: bool, info: dict[str, Any]) -> None:
        start, self._from = self._from, None
        if not success:
            self._add_points(info)
        if start is not None:
            self.restored_episodes += 1
            self.restored_successes += success
            self._gate(start, success)

    def _add_points(self, info: dict[str, Any]) -> None:
        """Adds the restart points of a failed episode's review to the pool."""
        if self.config is None or self.config.prob <= 0 or self._seeded:
            return  # a seeded reset's episode (validation, a first reset) adds no points
        review = (info.get(FEEDBACK) or {}).get("review") or None
        if review is None and self._review_wrapper is not None:
            quiet = self._review_wrapper.quiet_review(info)
            review = quiet.to_dict() if quiet is not None else None
        assert self._seed is not None
        for step in self._chosen_steps(review):
            if step > 0:
                self._add(RestartStart(self._seed, self._actions[:step]))

    def _chosen_steps(self, review: dict[str, Any] | None) -> list[int]:
        """The steps of ``review``'s re-explore points that the config's ``points`` pick."""
        points = (review or {}).get("reexplore") or []
        if not points:
            return []
        assert self.config is not None
        kinds = set(self.config.points)
        chosen = {
            int(p["step"])
            for p in points
            if ("harmful" in kinds and p.get("reason") == "harmful")
            or ("stalled" in kinds and p.get("reason") == "stalled")
        }
        if "first" in kinds:
            chosen.add(int(points[0]["step"]))
        if "last" in kinds:
            chosen.add(int(points[-1]["step"]))
        return sorted(chosen)

    def _add(self, start: RestartStart) -> None:
        assert self.config is not None
        if any(p.seed == start.seed and len(p.actions) == len(start.actions) for p in self._pool):
            return
        self._pool.append(start)
        del self._pool[: max(0, len(self._pool) - self.config.pool)]

    def _gate(self, start: RestartStart, success: bool) -> None:
        """Moves a start back, or drops it, by the successes and failures from it."""
        config = self.config
        if config is None or start.kind == "explicit":
            return
        if success:
            start.successes += 1
        else:
            start.failures += 1
            if start.kind == "demo":
                start.successes = 0  # a demonstration's start moves back on successes in a row
        if start.kind == "demo":
            if start.successes >= config.gate_successes:
                start.actions = start.actions[: max(0, len(start.actions) - config.back_steps)]
                start.successes = start.failures = 0
            return
        if start.successes >= config.gate_successes:
            self._drop(start)
        elif start.failures >= config.gate_failures:
            start.actions = start.actions[: max(0, len(start.actions) - config.back_steps)]
            start.successes = start.failures = 0
            if not start.actions:
                self._drop(start)

    def _drop(self, start: RestartStart) -> None:
        self._pool = [p for p in self._pool if p is not start]
