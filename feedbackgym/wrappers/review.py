"""``AddReview``: a critique of each finished episode, delivered after it ends."""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future
from typing import Any, NamedTuple, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from feedbackgym.config import ReviewConfig
from feedbackgym.core import Review, StepRecord
from feedbackgym.feedback.generators import Reviewer, ReviewRequest, as_reviewer
from feedbackgym.feedback.levels import check_level, disclose, observed_targets
from feedbackgym.feedback.review import TrajectoryReviewer
from feedbackgym.protocol import IS_SUCCESS, OUTCOME
from feedbackgym.wrappers.common import (
    add_vector_fields,
    feedback_info,
    json_safe,
    read_only,
    seeded_rng,
    subgoal_library,
    with_appended_text,
    with_vector_fields,
)
from feedbackgym.wrappers.feedback import FeedbackWrapper, subgoal_capacity

__all__ = ["REVIEW_CHANNELS", "AddReview"]

REVIEW_CHANNELS = ("text", "vector", "info", "credit")
REVIEW_TEXT_LIMIT = 1024
"""Most characters a review adds to a text observation."""
MAX_PENDING_REVIEWS = 8
"""Most reviews waited for at once (a reviewer slower than the episodes): past it the
oldest is dropped and counted as a miss."""
_DEFAULTS = ReviewConfig()
"""The review's defaults live in the config (:class:`~feedbackgym.config.ReviewConfig`)."""


class _StepRow(NamedTuple):
    """What the wrapper keeps of a step: a StepRecord without its index (cheap to build)."""

    action: Any
    reward: float
    done_ids: tuple[str, ...]
    harmful: bool
    expert_action: Any
    action_text: str


class _Pending(NamedTuple):
    """A review asked for at an episode's end and not ready then."""

    episode: int
    future: Future[Any]
    reached: tuple[str, ...]
    length: int
    positions: dict[str, int]


class AddReview(FeedbackWrapper):
    """Reviews the last ``window`` steps of each finished episode.

    The review is emitted on the terminal or truncated step (what SB3's and
    Gymnasium's vector envs hand to the learner) — never in the middle of an
    episode. An episode is reviewed with probability ``weight`` (what a
    schedule fades in); draws are seeded by ``reset(seed=...)``.

    Channels:

    * ``"info"``: ``info["feedback"]["review"]`` holds ``Review.to_dict()`` on the
      final step, else ``{}``; ``info["feedback"]["review_episode"]`` says which
      episode it is about (counted from 0 by this wrapper; -1 with no review).
    * ``"text"``: the last review's text is appended to the *next* episode's
      first text observation.
    * ``"vector"``: ``review_reached`` (which library positions were reached last
      time), ``review_flag`` (where the first re-explore point fell, as a
      fraction of the episode) and ``review_present``, held through the next
      episode; zero when there is no review. Read-only arrays, shared by those
      observations.
    * ``"credit"``: ``info["feedback"]["credit"] = {"start": step, "values": [...]}``
      on the final step: per-step credit over the window, for trainers that
      redistribute reward.

    Generators: the review comes from ``reviewer`` (any object meeting
    :class:`~feedbackgym.feedback.generators.Reviewer`, or its
    ``"module:Class"`` name), from a ``feedbackgym serve-feedback`` service
    (``source``), or from the built-in
    :class:`~feedbackgym.feedback.TrajectoryReviewer`. A reviewer that is not
    ``inline`` runs off the step; the final step waits at most
    ``deadline_ms`` for it. A review not ready by then (``reviews_late``) is
    delivered when it is: in the info of the first step after that (with
    ``review_episode`` naming its episode, and no credit: its episode's
    rewards are gone), and in the text and vector channels from the next reset.

    Example:
        >>> import gymnasium as gym, feedbackgym
        >>> env = AddReview(gym.make("feedbackgym/OpsIncidentEasy-v0"), window=10)
        >>> _ = env.reset(seed=0)
        >>> info = env.step("escalate")[-1]
        >>> info["feedback"]["review"]["summary"]
        'Did not succeed; reached 0 of 5 subgoals in steps 0-0. Re-explore from step 0 (harmful).'
        >>> info["feedback"]["review"]["reexplore"][0]["suggestion"]
        'try to triage the alert: inspect its metrics and logs (seen: db_primary)'
        >>> info["feedback"]["review_episode"]
        0

    Change logs:
     * v0.2.0 - ``reviewer=``: any reviewer object or ``"module:Class"``; late reviews land later
     * v0.1.0 - Initially added
    """

    kind = "review"
    offered = REVIEW_CHANNELS
    built_in = TrajectoryReviewer
    text_limit = REVIEW_TEXT_LIMIT
    counters = ("reviews_given", "episodes_ended", "reviews_late")
    reviews_given: int
    """Reviews given since the last :meth:`feedback_stats` call."""
    episodes_ended: int
    """Episodes ended since the last :meth:`feedback_stats` call."""
    reviews_late: int
    """Reviews not ready when their episode ended, since the last :meth:`feedback_stats` call."""

    def __init__(
        self,
        env: gym.Env[Any, Any],
        window: int = _DEFAULTS.window,
        channels: tuple[str, ...] | list[str] = _DEFAULTS.channels,
        *,
        reviewer: Reviewer | str | None = _DEFAULTS.generator,
        source: str = _DEFAULTS.source,
        weight: float = 1.0,
        stall_steps: int = _DEFAULTS.stall_steps,
        level: str = _DEFAULTS.level,
        max_subgoals: int | None = None,
        deadline_ms: float = _DEFAULTS.deadline_ms,
    ) -> None:
        max_subgoals = subgoal_capacity(env, max_subgoals)
        gym.utils.RecordConstructorArgs.__init__(
            self,
            window=window,
            channels=list(channels),
            reviewer=reviewer,
            source=source,
            weight=weight,
            stall_steps=stall_steps,
            level=level,
            max_subgoals=max_subgoals,
            deadline_ms=deadline_ms,
        )
        self._setup(
            env,
            channels=channels,
            generator=None if reviewer is None else lambda: as_reviewer(reviewer),
            source=source,
            deadline_ms=deadline_ms,
            max_subgoals=max_subgoals,
        )
        self.configure(window=window, stall_steps=stall_steps, level=level)
        self.set_weight(weight)
        if "vector" in self.channels:
            self.observation_space = with_vector_fields(
                self.observation_space,
                {
                    "review_reached": spaces.MultiBinary(max_subgoals),
                    "review_flag": spaces.Box(0.0, 1.0, (1,), np.float32),
                    "review_present": spaces.MultiBinary(1),
                },
            )
        self._steps: list[_StepRow] = []
        self._progress: dict[str, bool] | None = None
        self._done: tuple[str, ...] = ()
        self._initial_done: tuple[str, ...] = ()
        self._episode = -1
        self._pending: deque[_Pending] = deque()
        self._landed: deque[tuple[Review, int]] = deque()
        """Late reviews that are ready, with their episodes, for the next steps' info."""
        self._vector_summary = self._summarise(None, (), 1, {})
        self._next_summary: dict[str, np.ndarray] | None = None
        """A late review's vector fields, held until the next reset."""
        self.last_review: Review | None = None

    # --- runtime setters ------------------------------------------------------------------

    def configure(self, *, window: int, stall_steps: int, level: str = _DEFAULTS.level) -> None:
        """Changes the review window, stall length and disclosure level (hot reload)."""
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        if stall_steps < 1:
            raise ValueError(f"stall_steps must be at least 1, got {stall_steps}")
        self.window = window
        self.stall_steps = stall_steps
        self.level = check_level(level)
        self._options = {"stall_steps": stall_steps, "level": level}

    # --- Gymnasium API --------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Resets the env; the text channel carries the last review into the first observation."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._rng = seeded_rng(seed, 0x7276, self._rng)
        self._steps = []
        self._progress = None
        self._episode += 1
        self._initial_done = self._done_ids(info)
        if self._pending:
            self._collect_landed()
        if self._next_summary is not None:
            self._vector_summary, self._next_summary = self._next_summary, None
        fields = feedback_info(info)
        fields["review_weight"] = self.weight
        fields["review_episode"] = -1
        if "credit" in self.channels:
            fields["credit"] = {}
        if "text" in self.channels and self.last_review is not None:
            obs = with_appended_text(obs, self.last_review.text, REVIEW_TEXT_LIMIT)
        return self._with_vector(obs), info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Steps the env and records the step; reviews the episode when it ends."""
        expert = self._expert_action() if self.level == "action" else None
        obs, reward, terminated, truncated, info = self.env.step(action)
        # A plain row per step; StepRecords are built only for the reviewed window.
        self._steps.append(
            _StepRow(
                json_safe(action),
                float(reward),
                self._done_ids(info),
                bool(info.get("harmful", False)),
                json_safe(expert),
                str(info.get("action", "")),
            )
        )
        fields = feedback_info(info)
        fields["review_weight"] = self.weight
        review, episode, on_time = None, -1, False
        if self._pending:
            self._collect_landed()
        if terminated or truncated:
            self.episodes_ended += 1
            assert self._rng is not None
            if self._rng.random() < self.weight:
                review = self._review(info)
                episode, on_time = self._episode, review is not None
        if review is None and self._landed:
            review, episode = self._landed.popleft()
        fields["review"] = (
            review.to_dict() if review is not None and "info" in self.channels else {}
        )
        fields["review_episode"] = episode if review is not None else -1
        if "credit" in self.channels:
            fields["credit"] = (
                {"start": review.window[0], "values": list(review.credit)}
                if review is not None and on_time
                else {}
            )
        return self._with_vector(obs), reward, terminated, truncated, info

    def _expert_action(self) -> Any:
        try:
            return self.env.get_wrapper_attr("expert_action")()
        except AttributeError:
            return None

    def _done_ids(self, info: dict[str, Any]) -> tuple[str, ...]:
        """Ids of the subgoals done, recomputed only when the progress changed."""
        progress = info.get("subgoals", {})
        if progress != self._progress:
            self._progress = dict(progress)
            self._done = tuple(k for k, v in progress.items() if v)
        return self._done

    def _review(self, info: dict[str, Any]) -> Review | None:
        """The ended episode's review if it is ready within the deadline (else it is pending)."""
        request = self._request(info)
        positions = {sg.id: i for i, sg in enumerate(request.library)}
        reached = self._steps[-1].done_ids
        call = self._call
        if call.inline:
            review: Review | None = self._timed(lambda: call(request))
        else:
            future = call.submit(request)
            done, review = self._timed(lambda: call.settle(future, self.deadline_ms / 1000.0))
            if not done:
                self.reviews_late += 1
                if len(self._pending) == MAX_PENDING_REVIEWS:
                    self._pending.popleft().future.cancel()
                    call.lost += 1
                self._pending.append(
                    _Pending(self._episode, future, reached, len(self._steps), positions)
                )
                return None
        if review is not None:
            self.reviews_given += 1
            self.last_review = review
            self._vector_summary = self._summarise(review, reached, len(self._steps), positions)
            self._next_summary = None  # newer than any late review's
        return review

    def quiet_review(self, info: dict[str, Any]) -> Review | None:
        """The just-ended episode's review, for the stack's own use; no channel delivers it.

        :class:`~feedbackgym.wrappers.Reexplore` calls it on an episode this
        wrapper did not review (an arm that shows the policy no review), to
        find the states to restart from. An off-step reviewer has
        ``deadline_ms`` to answer; past that the review is dropped (``None``).
        Nothing is counted or shown.

        Args:
            info: The ended episode's last info.
        """
        request = self._request(info)
        call = self._call
        if call.inline:
            review: Review | None = call(request)
            return review
        future = call.submit(request)
        done, review = call.settle(future, self.deadline_ms / 1000.0)
        if not done:
            future.cancel()
        return review if done else None

    def _collect_landed(self) -> None:
        """Takes the pending reviews that are ready: into the next observation, and the info."""
        for pending in [p for p in self._pending if p.future.done()]:
            self._pending.remove(pending)
            review: Review | None = self._call.collect(pending.future)
            if review is not None:
                self.reviews_given += 1
                self.last_review = review
                self._next_summary = self._summarise(
                    review, pending.reached, pending.length, pending.positions
                )
                self._landed.append((review, pending.episode))

    def _request(self, info: dict[str, Any]) -> ReviewRequest:
        first = max(0, len(self._steps) - self.window)
        window = tuple(
            StepRecord(step, *row) for step, row in enumerate(self._steps[first:], start=first)
        )
        initial_done = self._steps[first - 1].done_ids if first > 0 else self._initial_done
        return ReviewRequest(
            window,
            disclose(tuple(subgoal_library(self.env)), self.level, observed_targets(self.env)),
            bool(info.get(IS_SUCCESS, False)),
            initial_done,
            str(info.get(OUTCOME, "")),
            self._episode,
            self._task,
            self._options,
        )

    def _summarise(
        self,
        review: Review | None,
        reached_ids: tuple[str, ...],
        length: int,
        positions: dict[str, int],
    ) -> dict[str, np.ndarray]:
        reached = np.zeros(self.max_subgoals, np.int8)
        flag = np.zeros(1, np.float32)
        if review is not None:
            for subgoal_id in reached_ids:
                if positions.get(subgoal_id, self.max_subgoals) < self.max_subgoals:
                    reached[positions[subgoal_id]] = 1
            if review.reexplore:
                flag[0] = min(1.0, review.reexplore[0].step / max(1, length))
        present = np.array([review is not None], np.int8)
        return read_only(
            {"review_reached": reached, "review_flag": flag, "review_present": present}
        )

    def _with_vector(self, obs: Any) -> Any:
        if "vector" not in self.channels:
            return obs
        return add_vector_fields(obs, self._vector_summary)

    def close(self) -> None:
        """Closes the env; reviews still pending are dropped."""
        for pending in self._pending:
            pending.future.cancel()
        self._pending.clear()
        self._landed.clear()
        super().close()
