"""The wire types of ``serve-env``: OpenEnv's Action, Observation and State, declared.

What a client may read is what these models declare (OpenEnv serialises the
declared fields; ``/schema`` publishes them). Feedback is a channel of its
own: ``hint`` and ``review`` are fields beside the observation, never mixed
into its text.

Example:
    >>> FeedbackAction(action="inspect logs web").action
    'inspect logs web'
    >>> FeedbackObservation(text="Step 0", actions=["wait"]).hint
    ''
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from feedbackgym.errors import requires_extra

with requires_extra("server", "openenv"):
    from openenv.core.env_server.types import Action, Observation, State

__all__ = ["FeedbackAction", "FeedbackObservation", "FeedbackSessionState", "FeedbackStateFields"]


class FeedbackAction(Action):
    """One action: the env's text action (one of the last observation's ``actions``).

    A text that names no action of the episode is answered with OpenEnv's
    ``VALIDATION_ERROR``, its message naming the valid choices; the session
    lives on.
    """

    action: str = Field(
        description="The env's action in words, one of the last observation's `actions`"
    )


class FeedbackObservation(Observation):
    """What the env shows after a reset or a step, with the feedback beside it.

    ``reward`` (the stack's: the env's reward plus the arm's shaping) and
    ``done`` are OpenEnv's own fields.
    """

    text: str = Field(default="", description="The env's text observation")
    actions: list[str] = Field(
        default_factory=list, description="The actions valid now, in words (send one back)"
    )
    hint: str = Field(
        default="",
        description="The guide's hint at the server's hint level; empty when the guide is silent",
    )
    review: str = Field(
        default="",
        description="The review of the last finished episode, on the step that ends it (or "
        "on the first observation after a late one) and on the next reset; empty otherwise",
    )
    info: dict[str, Any] = Field(
        default_factory=dict,
        description="JSON-safe step info: outcome, is_success, subgoals, incident, env_reward, ...",
    )


class FeedbackStateFields(BaseModel):
    """The feedback state a trainer sends with ``reset`` (``data.feedback_state``).

    Sent once, it hands the session's feedback to the trainer: the session's
    own controller stops, and the state applies from that episode on.
    """

    model_config = ConfigDict(extra="forbid")

    phase: str = Field(description="guide, fade, review, both or none")
    guide_weight: float = Field(ge=0.0, le=1.0, description="Probability that a due hint is given")
    review_weight: float = Field(
        ge=0.0, le=1.0, description="Probability that a finished episode is reviewed"
    )
    hints_masked: bool = Field(default=False, description="Withhold every hint (validation)")
    round: int = Field(default=0, ge=0, description="The trainer's round")
    progress: float = Field(default=0.0, description="Where training is, in the schedule's unit")
    curriculum: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="The curriculum's task width (1: the env's own preset); null: none",
    )


class FeedbackSessionState(State):
    """A session's state: the episode, the feedback state and the reviews so far."""

    seed: int | None = Field(default=None, description="The seed of the episode in progress")
    episodes: int = Field(default=0, ge=0, description="Episodes finished in this session")
    phase: str = Field(default="", description="The feedback phase in force")
    guide_weight: float = Field(default=0.0, description="The guide's weight in force")
    review_weight: float = Field(default=0.0, description="The reviewer's weight in force")
    round: int = Field(default=0, description="The feedback round in force")
    driven_by: str = Field(
        default="server",
        description="server: the session's own controller; trainer: states sent with reset",
    )
    reviews: list[dict[str, Any]] = Field(
        default_factory=list, description="The reviews of this session's episodes, oldest first"
    )
