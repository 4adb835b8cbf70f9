"""``FadeGuideToReview``: applies a schedule's weights to the guide and review wrappers."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym

from feedbackgym.schedules import Schedule, ScheduleState, TrendRule, make_schedule
from feedbackgym.wrappers.common import feedback_info, find_wrapper
from feedbackgym.wrappers.guide import AddGuide
from feedbackgym.wrappers.review import AddReview
from feedbackgym.wrappers.shaping import ShapeWithSubgoals

__all__ = ["FadeGuideToReview"]


class FadeGuideToReview(
    gym.Wrapper[Any, Any, Any, Any],
    gym.utils.RecordConstructorArgs,
):
    """Fades the guide into the review over training, following a schedule.

    The guide weight becomes the probability that a due hint is given, the
    review weight the probability that a finished episode is reviewed. Put it
    outside :class:`AddGuide` and/or :class:`AddReview`. Trainers drive it with
    :meth:`set_progress` and :meth:`report`, called through SB3's
    ``VecEnv.env_method`` or Gymnasium's vector ``call`` so that envs in
    subprocess workers get them too (SB3's ``set_attr`` only reaches the
    outermost wrapper).

    With ``config`` (a YAML or TOML file), the file is re-read at most once per
    :meth:`set_progress` call (once per round); a valid edit is applied to the
    schedule, the guide, the review and the shaping without a restart, an
    invalid one is rejected with a logged reason.

    Args:
        env: The env, wrapped in :class:`AddGuide` and/or :class:`AddReview`.
        schedule: An arm name (``"guide-then-review"``, ...), a dict of
            :class:`~feedbackgym.schedules.GuideReviewSchedule` arguments
            (plain data, so the env spec stays JSON-able), or a schedule object.
        config: Path of a feedback config file to follow, or ``None``.
        fade_shaping: Scale the potential of an inner :class:`ShapeWithSubgoals`
            by the guide weight, so dense shaping fades with the guide (a Φ that
            changes over training keeps the policy invariance).
        info_key: The feedback info key.

    Example:
        >>> import gymnasium as gym, feedbackgym
        >>> from feedbackgym.wrappers import AddGuide, AddReview
        >>> env = gym.make("feedbackgym/OpsIncidentEasy-v0")
        >>> schedule = {"switch_at": 0.4, "fade": 5, "total": 100}
        >>> env = FadeGuideToReview(AddReview(AddGuide(env)), schedule=schedule)
        >>> env.set_progress(42.5)["phase"], env.set_progress(80)["guide_weight"]
        ('fade', 0.0)

    Change logs:
     * v0.1.0 - Initially added
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        schedule: str | dict[str, Any] | Schedule = "guide-then-review",
        *,
        config: str | None = None,
        fade_shaping: bool = False,
        info_key: str = "feedback",
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, schedule=schedule, config=config, fade_shaping=fade_shaping, info_key=info_key
        )
        gym.Wrapper.__init__(self, env)
        self._guide = find_wrapper(env, AddGuide)
        self._review = find_wrapper(env, AddReview)
        if self._guide is None and self._review is None:
            raise ValueError("FadeGuideToReview needs AddGuide and/or AddReview inside it")
        self.info_key = info_key
        self._shaping = find_wrapper(env, ShapeWithSubgoals)
        if fade_shaping and self._shaping is None:
            raise ValueError("fade_shaping needs ShapeWithSubgoals inside FadeGuideToReview")
        self._fade_shaping = fade_shaping
        self._shaping_scale = self._shaping.scale if self._shaping is not None else 1.0
        self._watcher = None
        if config is not None:
            from feedbackgym.config import ConfigWatcher

            self._watcher = ConfigWatcher(config)
            self._apply_config()
        else:
            self.schedule = _as_schedule(schedule)
        self.progress = 0.0
        self._masked = False
        self._state = self.schedule.state(0.0)
        self._push(self._state)

    # --- trainer-facing methods (env_method / call) ---------------------------------------

    def set_progress(self, progress: float) -> dict[str, Any]:
        """Sets training progress (in the schedule's unit) and applies the weights.

        Returns:
            The schedule state, as a dict (what ``env_method`` hands back).
        """
        if self._watcher is not None and self._watcher.poll():
            self._apply_config()
        self.progress = float(progress)
        self._state = self.schedule.state(self.progress)
        self._push(self._state)
        return self.feedback_state()

    def mask_hints(self, masked: bool) -> None:
        """Withholds every hint while ``masked`` (to measure reliance on the guide)."""
        self._masked = masked
        self._push(self._state)

    def report(self, **metrics: float) -> None:
        """Reports the training trend (``loss``, ``mean_return``, ``success``) to the schedule."""
        self.schedule.report(self.progress, **metrics)

    def schedule_state(self) -> dict[str, Any]:
        """The schedule's adaptive state (:meth:`~feedbackgym.schedules.Schedule.state_dict`)."""
        return self.schedule.state_dict()

    def load_schedule_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """Restores :meth:`schedule_state` output (a resumed run) at the current progress.

        Returns:
            The schedule state, as :meth:`set_progress` returns it.
        """
        self.schedule.load_state_dict(state)
        return self.set_progress(self.progress)

    def feedback_state(self) -> dict[str, Any]:
        """The schedule state, the switch point, and the config version and changes."""
        state = self._state.to_dict()
        state["switch_at"] = getattr(self.schedule, "switch_at", None)
        state["total"] = self.schedule.total
        state["unit"] = self.schedule.unit
        state["schedule"] = repr(self.schedule)
        if self._watcher is not None:
            state["config_version"] = self._watcher.version
            state["config_changes"] = list(self._watcher.changes)
        return state

    def feedback_stats(self) -> dict[str, Any]:
        """Hint and review counts and latencies since the last call (see the inner wrappers)."""
        return {
            "guide": self._guide.feedback_stats() if self._guide is not None else None,
            "review": self._review.feedback_stats() if self._review is not None else None,
        }

    # --- Gymnasium API --------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Resets the env and tags the info with the phase."""
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, self._tag(info)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Steps the env and tags the info with the phase."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self._tag(info)

    # --- helpers --------------------------------------------------------------------------

    def _tag(self, info: dict[str, Any]) -> dict[str, Any]:
        fields = feedback_info(info, self.info_key)
        fields["phase"] = self._state.phase
        fields["guide_weight"] = self._state.guide_weight
        fields["review_weight"] = self._state.review_weight
        return info

    def _push(self, state: ScheduleState) -> None:
        if self._guide is not None:
            self._guide.set_weight(0.0 if self._masked else state.guide_weight)
        if self._review is not None:
            self._review.set_weight(state.review_weight)
        if self._fade_shaping and self._shaping is not None:
            self._shaping.set_shaping(
                gamma=self._shaping.gamma, scale=self._shaping_scale * state.guide_weight
            )

    def _apply_config(self) -> None:
        assert self._watcher is not None
        config = self._watcher.config
        s = config.schedule
        if s != getattr(self, "_schedule_config", None):
            # Only an edit of the schedule section rebuilds it (and resets the adaptive rule).
            self._schedule_config = s
            adaptive = TrendRule(**s.adaptive.model_dump()) if s.adaptive is not None else None
            kwargs: dict[str, Any] = {"total": s.total, "unit": s.unit}
            if s.arm in ("guide-then-review", "review-then-guide"):
                kwargs.update(switch_at=s.switch_at, fade=s.fade, adaptive=adaptive)
            self.schedule = make_schedule(s.arm, **kwargs)
        if self._guide is not None:
            g = config.guide
            self._guide.configure(every=g.every, lookahead=g.lookahead, dropout=g.dropout)
        if self._review is not None:
            r = config.review
            self._review.configure(
                window=r.window, stall_steps=r.stall_steps, action_level=r.action_level
            )
        if self._shaping is not None:
            self._shaping_scale = config.shaping.scale
            self._shaping.set_shaping(gamma=config.shaping.gamma, scale=config.shaping.scale)


def _as_schedule(schedule: str | dict[str, Any] | Schedule) -> Schedule:
    if isinstance(schedule, Schedule):
        return schedule
    if isinstance(schedule, str):
        return make_schedule(schedule)
    if isinstance(schedule, dict):
        kwargs = dict(schedule)
        arm = kwargs.pop("arm", "guide-then-review")
        if isinstance(kwargs.get("adaptive"), dict):
            kwargs["adaptive"] = TrendRule(**kwargs["adaptive"])
        return make_schedule(arm, **kwargs)
    raise TypeError(
        f"schedule must be an arm name, a dict or a Schedule, got {type(schedule).__name__}"
    )
