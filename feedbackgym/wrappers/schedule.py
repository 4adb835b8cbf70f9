"""``FadeGuideToReview``: applies the feedback state to the guide and review wrappers."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym

from feedbackgym.config import FeedbackConfig
from feedbackgym.control import FeedbackController
from feedbackgym.protocol import FeedbackState, FeedbackStats
from feedbackgym.schedules import Schedule, TrendRule, make_schedule
from feedbackgym.wrappers.common import feedback_info, find_wrapper
from feedbackgym.wrappers.curriculum import WidenTasks
from feedbackgym.wrappers.explore import AddExplorationBonus, bonus_kwargs
from feedbackgym.wrappers.guide import AddGuide
from feedbackgym.wrappers.reexplore import Reexplore
from feedbackgym.wrappers.review import AddReview
from feedbackgym.wrappers.shaping import ShapeWithSubgoals

__all__ = ["FadeGuideToReview"]


class FadeGuideToReview(
    gym.Wrapper[Any, Any, Any, Any],
    gym.utils.RecordConstructorArgs,
):
    """Applies the feedback state (guide and review weights) to the guide and review wrappers.

    The guide weight becomes the probability that a due hint is given, the
    review weight the probability that a finished episode is reviewed. Put it
    outside :class:`AddGuide` and/or :class:`AddReview`.

    In training, a :class:`~feedbackgym.control.FeedbackController` on the
    trainer's side decides the state and pushes it each round through
    :meth:`set_feedback_state` (the one trainer-facing method, see
    :mod:`feedbackgym.protocol`); the wrapper then runs no schedule of its own.
    Without a trainer, the wrapper keeps its own schedule: drive it with
    :meth:`set_progress` and :meth:`report` (it holds a private controller for
    that, so the logic is the same).

    A state that carries a config (``state.config``) different from the one in
    force reconfigures the guide, the review, the shaping, the exploration
    bonus and the restarts (hot reload). An inner
    :class:`~feedbackgym.wrappers.Reexplore` learns where training is from each state,
    and an inner :class:`~feedbackgym.wrappers.WidenTasks` its curriculum width.

    Args:
        env: The env, wrapped in :class:`AddGuide` and/or :class:`AddReview`.
        schedule: For use without a trainer: an arm name (``"guide-then-review"``,
            ...), a dict of :class:`~feedbackgym.schedules.GuideReviewSchedule`
            arguments (plain data, so the env spec stays JSON-able), or a schedule object.
        config: A feedback config (its ``model_dump()``) or the path of a config
            file to follow without a trainer; it replaces ``schedule``.
        fade_shaping: Scale the potential of an inner :class:`ShapeWithSubgoals`
            by the guide weight, so dense shaping fades with the guide (a Φ that
            changes over training keeps the policy invariance).

    Example:
        >>> import gymnasium as gym, feedbackgym
        >>> from feedbackgym.wrappers import AddGuide, AddReview
        >>> env = gym.make("feedbackgym/OpsIncidentEasy-v0")
        >>> schedule = {"switch_at": 0.4, "fade": 5, "total": 100}
        >>> env = FadeGuideToReview(AddReview(AddGuide(env)), schedule=schedule)
        >>> env.set_progress(42.5).phase, env.set_progress(80).guide_weight
        ('fade', 0.0)

    Change logs:
     * v0.2.0 - Driven by a controller through ``set_feedback_state``
     * v0.1.0 - Initially added
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        schedule: str | dict[str, Any] | Schedule = "guide-then-review",
        *,
        config: str | dict[str, Any] | None = None,
        fade_shaping: bool = False,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, schedule=schedule, config=config, fade_shaping=fade_shaping
        )
        gym.Wrapper.__init__(self, env)
        self._guide = find_wrapper(env, AddGuide)
        self._review = find_wrapper(env, AddReview)
        if self._guide is None and self._review is None:
            raise ValueError("FadeGuideToReview needs AddGuide and/or AddReview inside it")
        self._shaping = find_wrapper(env, ShapeWithSubgoals)
        self._explore = find_wrapper(env, AddExplorationBonus)
        self._reexplore = find_wrapper(env, Reexplore)
        self._widen = find_wrapper(env, WidenTasks)
        if fade_shaping and self._shaping is None:
            raise ValueError("fade_shaping needs ShapeWithSubgoals inside FadeGuideToReview")
        self._fade_shaping = fade_shaping
        self._shaping_scale = self._shaping.scale if self._shaping is not None else 1.0
        self._config: FeedbackConfig | None = None
        if isinstance(config, dict):
            self._controller = FeedbackController(FeedbackConfig.from_mapping(config))
        elif config is not None:
            self._controller = FeedbackController(config)
        else:
            self._controller = FeedbackController(schedule=_as_schedule(schedule))
        self._state = self._controller.state
        self.set_feedback_state(self._state)

    @property
    def schedule(self) -> Schedule:
        """The schedule used without a trainer (a controller's pushes override it)."""
        return self._controller.schedule

    @property
    def feedback_state(self) -> FeedbackState:
        """The state in force (the last one pushed or scheduled)."""
        return self._state

    # --- trainer-facing methods (see feedbackgym.protocol.FeedbackEnv) --------------------

    def set_feedback_state(self, state: FeedbackState) -> None:
        """Applies a controller's state: weights, hint masking and, if it changed, the config."""
        if state.config is not None and state.config != self._config:
            self._apply_config(state.config)
        self._state = state
        if self._guide is not None:
            self._guide.set_weight(0.0 if state.hints_masked else state.guide_weight)
        if self._review is not None:
            self._review.set_weight(state.review_weight)
        if self._fade_shaping and self._shaping is not None:
            self._shaping.set_shaping(
                gamma=self._shaping.gamma, scale=self._shaping_scale * state.guide_weight
            )
        if self._widen is not None:
            self._widen.set_width(state.curriculum)
        if self._reexplore is not None:
            schedule = self._config.schedule if self._config is not None else None
            total = schedule.total if schedule is not None else getattr(self.schedule, "total", 1)
            switch = state.switch_at
            if switch is None:
                switch = schedule.switch_at if schedule is not None else 1.0
            self._reexplore.set_training_progress(state.progress / total, switch)

    def feedback_stats(self) -> FeedbackStats:
        """Hint, review and restart counts since the last call (see the inner wrappers)."""
        return {
            "guide": self._guide.feedback_stats() if self._guide is not None else None,
            "review": self._review.feedback_stats() if self._review is not None else None,
            "reexplore": (self._reexplore.restart_stats() if self._reexplore is not None else None),
        }

    # --- without a trainer ----------------------------------------------------------------

    def set_progress(self, progress: float) -> FeedbackState:
        """Moves the wrapper's own schedule to ``progress`` (in its unit) and applies it.

        A followed config file is re-read here, at most once per call.
        """
        state = self._controller.update(int(progress), progress=progress)
        self.set_feedback_state(state)
        return state

    def report(self, **metrics: float) -> None:
        """Reports the training trend (``loss``, ``mean_return``, ``success``) to the schedule."""
        self._controller.report(**metrics)

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
        fields = feedback_info(info)
        state = self._state
        fields["phase"] = state.phase
        fields["guide_weight"] = state.guide_weight
        fields["review_weight"] = state.review_weight
        fields["config_version"] = state.config_version
        return info

    def _apply_config(self, config: FeedbackConfig) -> None:
        self._config = config
        if self._guide is not None:
            g = config.guide
            self._guide.configure(
                every=g.every,
                lookahead=g.lookahead,
                dropout=g.dropout,
                dropout_scope=g.dropout_scope,
                when=g.when,
                level=g.level,
            )
        if self._review is not None:
            r = config.review
            self._review.configure(window=r.window, stall_steps=r.stall_steps, level=r.level)
        if self._shaping is not None:
            self._shaping_scale = config.shaping.scale
            shaping = config.shaping
            self._shaping.set_shaping(
                gamma=shaping.gamma, scale=shaping.scale, terminal=shaping.terminal
            )
            self._shaping.set_clip(shaping.clip)
        if self._explore is not None:
            self._explore.set_bonus(**bonus_kwargs(config.explore))
        if self._reexplore is not None:
            self._reexplore.configure(config.reexplore)


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
