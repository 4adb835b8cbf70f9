"""The trainer↔env contract: the info keys envs write, and the env methods trainers call.

Everything a trainer (SB3, our torch loop, a user's own loop) may rely on is
declared here and nowhere else:

* the names of the ``info`` keys the project writes (:data:`FEEDBACK`,
  :data:`SUBGOALS`, ...), with :class:`StepInfo` and :class:`FeedbackInfo`
  describing their values;
* :class:`FeedbackState`, what a :class:`~feedbackgym.control.FeedbackController`
  pushes to every env each round;
* :class:`FeedbackEnv`, the env methods trainers call, and :func:`call_envs`,
  the one adapter that calls them on any collection of envs: a single env, an
  SB3 ``VecEnv`` (``env_method``) or a Gymnasium vector env (``call``);
* which ``info`` keys may depend on an episode's hidden cause
  (:data:`REWARD_FIELDS`) and which keys give the answer away and never
  leave the evaluator's side (:data:`ANSWER_KEYS`), and the one
  evaluator-side method that reads a task's structure (:func:`task_key`).

Example:
    >>> import gymnasium as gym, feedbackgym
    >>> env = feedbackgym.make("feedbackgym/OpsIncidentEasy-v0", feedback="guide-then-review")
    >>> state = FeedbackState(phase="review", guide_weight=0.0, review_weight=1.0)
    >>> call_envs(env, SET_FEEDBACK_STATE, state)
    [None]
    >>> _, info = env.reset(seed=0)
    >>> info[FEEDBACK]["phase"], info[FEEDBACK]["guide_weight"]
    ('review', 0.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, runtime_checkable

if TYPE_CHECKING:
    from feedbackgym.config import FeedbackConfig

__all__ = [
    "ENV_REWARD",
    "EXPLORE_BONUS",
    "FEEDBACK",
    "INFRA_ERROR",
    "INVALID_ACTION",
    "ANSWER_KEYS",
    "INCIDENT",
    "IS_SUCCESS",
    "REWARD_FIELDS",
    "TASK_ID",
    "TASK_ID_KEY_VARIABLE",
    "TASK_KEY",
    "OUTCOME",
    "SET_FEEDBACK_STATE",
    "SHAPING_REWARD",
    "SUBGOALS",
    "CreditInfo",
    "FeedbackEnv",
    "FeedbackInfo",
    "FeedbackState",
    "FeedbackStats",
    "StepInfo",
    "TaskEnv",
    "WrapperStats",
    "call_envs",
    "task_key",
]

# --- info keys ----------------------------------------------------------------------------

FEEDBACK = "feedback"
"""``info[FEEDBACK]``: the step's feedback (:class:`FeedbackInfo`)."""
SUBGOALS = "subgoals"
"""``info[SUBGOALS]``: subgoal id → done, for the whole library."""
OUTCOME = "outcome"
"""``info[OUTCOME]``: how an episode ended (e.g. ``"resolved"``), on its last step."""
ENV_REWARD = "env_reward"
"""``info[ENV_REWARD]``: the env's own reward, before shaping and credit."""
SHAPING_REWARD = "shaping_reward"
"""``info[SHAPING_REWARD]``: the shaping term added to the reward this step."""
EXPLORE_BONUS = "explore_bonus"
"""``info[EXPLORE_BONUS]``: the exploration bonus added to the reward this step."""
INFRA_ERROR = "infra_error"
"""``info[INFRA_ERROR]``: the infrastructure failed (browser, sandbox), not the agent."""
INVALID_ACTION = "invalid_action"
"""``info[INVALID_ACTION]``: the action could not be carried out (its message)."""
INCIDENT = "incident"
"""``info[INCIDENT]``: the task's structure as a string key (OpsIncident-v0 and v1 only, at reset
and every step), fault type and root role included. It gives the answer away: ``serve-env``
withholds it (:data:`ANSWER_KEYS`); OpsIncident-v2 writes :data:`TASK_ID` instead and gives
the key through :func:`task_key` only."""
TASK_ID = "task_id"
"""``info[TASK_ID]``: an opaque task id (OpsIncident-v2, at reset and every step): equal for two
seeds exactly when they pose the same problem, and naming nothing of it (a keyed digest of the
task key: set ``FEEDBACKGYM_TASK_ID_KEY`` to key it with a secret of your own)."""
IS_SUCCESS = "is_success"
"""``info[IS_SUCCESS]``: the episode reached its goal (on its last step; SB3's key)."""

REWARD_FIELDS: tuple[str, ...] = (
    ENV_REWARD,
    SHAPING_REWARD,
    EXPLORE_BONUS,
    SUBGOALS,
    OUTCOME,
    IS_SUCCESS,
)
"""The ``info`` keys that carry reward and its parts, which may depend on the hidden cause as a
training signal does (subgoal progress flips when the agent reaches the root). The ids and the
count of :data:`SUBGOALS` do not depend on it in OpsIncident-v2. A client that shows these
fields to a model hands it part of the answer."""
ANSWER_KEYS: tuple[str, ...] = (INCIDENT,)
"""``info`` keys that name a task's hidden structure: ``serve-env`` never sends them."""
TASK_ID_KEY_VARIABLE = "FEEDBACKGYM_TASK_ID_KEY"
"""The environment variable whose value keys the :data:`TASK_ID` digest (a public default when
unset; ``serve-env`` sets a random one per server unless it is set)."""
TASK_KEY = "task_key"
"""The evaluator-side env method that returns a task's structure (see :func:`task_key`)."""

SET_FEEDBACK_STATE = "set_feedback_state"
"""The one env method a controller calls each round (see :class:`FeedbackEnv`)."""


class CreditInfo(TypedDict):
    """Review credit: ``values[k]`` is added to the reward of episode step ``start + k``."""

    start: int
    values: list[float]


class FeedbackInfo(TypedDict, total=False):
    """``info["feedback"]``: always has ``guide`` and ``review`` (``{}`` when silent).

    Attributes:
        guide: The hint given this step (``Hint.to_dict()``), or ``{}``.
        review: The review of the episode that just ended (``Review.to_dict()``), or ``{}``;
            a review from a slow reviewer may land later (see ``review_episode``).
        review_episode: Which episode ``review`` is about, counted from 0 by the
            env's review wrapper (-1 with no review): the one that just ended,
            or an earlier one for a review that landed late.
        credit: Per-step credit of that review (with the ``credit`` channel).
        phase: ``"guide"``, ``"fade"``, ``"review"``, ``"both"`` or ``"none"``.
        guide_weight: The guide weight in force.
        review_weight: The review weight in force.
        config_version: The version of the feedback config in force (0: none followed).
    """

    guide: dict[str, Any]
    review: dict[str, Any]
    review_episode: int
    credit: CreditInfo
    phase: str
    guide_weight: float
    review_weight: float
    config_version: int


class StepInfo(TypedDict, total=False):
    """The ``info`` keys the project writes (each only where it applies; see the constants)."""

    feedback: FeedbackInfo
    subgoals: dict[str, bool]
    outcome: str
    env_reward: float
    shaping_reward: float
    explore_bonus: float
    infra_error: str
    invalid_action: str
    incident: str
    task_id: str
    is_success: bool


class WrapperStats(TypedDict):
    """One feedback wrapper's counts and latencies since the last call."""

    latencies_ms: list[float]
    misses: int


class FeedbackStats(TypedDict):
    """What :meth:`FeedbackEnv.feedback_stats` returns: guide, review and restart stats.

    Each is ``None`` when the stack has no such wrapper. The guide's dict also
    has ``hints_given``, the review's ``reviews_given`` and ``episodes_ended``,
    the restarts' ``restores``, ``restored_episodes``, ``restored_successes``
    and ``replayed_steps`` (see :meth:`~feedbackgym.wrappers.Reexplore.restart_stats`).
    """

    guide: dict[str, Any] | None
    review: dict[str, Any] | None
    reexplore: dict[str, Any] | None


@dataclass(frozen=True)
class FeedbackState:
    """What the trainer's controller decides for one round, pushed to every env.

    Attributes:
        phase: ``"guide"``, ``"fade"``, ``"review"``, ``"both"`` or ``"none"``.
        guide_weight: Probability that a due hint is given.
        review_weight: Probability that a finished episode is reviewed.
        hints_masked: Withhold every hint (validation with hints masked).
        round: The training round (recorded episodes are filed under it).
        progress: Where training is, in the schedule's unit.
        switch_at: Where the fade starts, as a fraction of training (``None``
            for a constant arm).
        config_version: Version of the feedback config in force (0: no file followed).
        config: The feedback config in force (``None``: the envs keep their
            own settings); an env applies its guide, review and shaping
            settings when it differs from the one it applied last.
        config_changes: Every edit of the followed config file so far
            (version, time, applied, reason): recorded with each episode.
        curriculum: The width of the training tasks (``[0, 1]``; 1: the env's own
            preset), or ``None`` without a curriculum (see
            :class:`~feedbackgym.feedback.curriculum.CurriculumRule`).

    Example:
        >>> state = FeedbackState("guide", 1.0, 0.0)
        >>> state.masked().hints_masked, state.hints_masked
        (True, False)
    """

    phase: str
    guide_weight: float
    review_weight: float
    hints_masked: bool = False
    round: int = 0
    progress: float = 0.0
    switch_at: float | None = None
    config_version: int = 0
    config: FeedbackConfig | None = field(default=None, compare=False)
    config_changes: tuple[dict[str, Any], ...] = field(default=(), compare=False)
    curriculum: float | None = None

    def masked(self, masked: bool = True) -> FeedbackState:
        """This state with hints masked (or shown again)."""
        return replace(self, hints_masked=masked)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe fields (the config as its version only)."""
        return {
            "phase": self.phase,
            "guide_weight": self.guide_weight,
            "review_weight": self.review_weight,
            "hints_masked": self.hints_masked,
            "round": self.round,
            "progress": self.progress,
            "switch_at": self.switch_at,
            "config_version": self.config_version,
            "curriculum": self.curriculum,
        }


@runtime_checkable
class FeedbackEnv(Protocol):
    """The env methods trainers call (through :func:`call_envs`).

    :class:`~feedbackgym.wrappers.FadeGuideToReview` provides the first two,
    :class:`~feedbackgym.wrappers.RecordTrajectories` forwards the first (and
    files episodes by ``state.round``); the others come from the task env.
    Only :meth:`set_feedback_state` is called every round.
    """

    def set_feedback_state(self, state: FeedbackState) -> None:
        """Applies the controller's state (weights, masking, config) from now on."""

    def feedback_stats(self) -> FeedbackStats:
        """Hint and review counts and latencies since the last call; resets them."""


class TaskEnv(Protocol):
    """Task-env attributes trainers read (documented here; see the env base classes).

    ``subgoals`` (the episode's subgoal library), ``validation_seeds`` (held-out
    seeds), ``expert_action()`` (the oracle's next action, for cloning and
    reviews) and ``parse_action(text)`` (text → action index, for LLM agents).
    """

    subgoals: Any
    validation_seeds: Any

    def expert_action(self) -> Any:
        """The oracle's next action (never shown to the agent)."""

    def parse_action(self, text: str) -> Any:
        """The action index that ``text`` names; raises ``InvalidAction`` if none."""


def call_envs(envs: Any, method: str, *args: Any, **kwargs: Any) -> list[Any]:
    """Calls ``method`` on every env of ``envs``; returns one result per env.

    Works on a single Gymnasium env (through its wrapper chain), an SB3
    ``VecEnv`` (``env_method``: subprocess workers too) and a Gymnasium vector
    env (``call``). Arguments must pickle for subprocess workers.

    Args:
        envs: A ``gym.Env``, an SB3 ``VecEnv`` or a ``gym.vector.VectorEnv``.
        method: The env method (one of :class:`FeedbackEnv`'s).
        *args: Positional arguments.
        **kwargs: Keyword arguments.

    Raises:
        TypeError: ``envs`` is none of these.
        AttributeError: An env lacks ``method``.

    Example:
        >>> import gymnasium as gym, feedbackgym
        >>> envs = gym.vector.SyncVectorEnv(
        ...     [lambda: feedbackgym.make("feedbackgym/OpsIncidentEasy-v0", feedback="guide")] * 2
        ... )
        >>> [stats["guide"]["hints_given"] for stats in call_envs(envs, "feedback_stats")]
        [0, 0]
    """
    if hasattr(envs, "env_method"):  # SB3 VecEnv (and its wrappers)
        return list(envs.env_method(method, *args, **kwargs))
    if hasattr(envs, "call") and hasattr(envs, "num_envs"):  # Gymnasium vector env
        return list(envs.call(method, *args, **kwargs))
    if hasattr(envs, "get_wrapper_attr"):  # one Gymnasium env
        return [envs.get_wrapper_attr(method)(*args, **kwargs)]
    raise TypeError(
        f"cannot call {method!r} on {type(envs).__name__}: expected a gymnasium Env, "
        "an SB3 VecEnv or a gymnasium vector env"
    )


def task_key(env: Any) -> str | None:
    """The task's structure as a string key, read on the evaluator's side, or ``None``.

    Equal for two seeds exactly when they pose the same problem up to names
    and numbers (OpsIncident: the topology's shape, each fault's type, root
    and path, the misleading alerts). The store, ``compare``'s statistics and
    the benchmark scripts count train/test overlap with it. It is never in
    ``info`` and never sent to the agent's side (an agent playing a seed again
    would read the answer before its second attempt).

    Args:
        env: A Gymnasium env (through its wrappers) whose task env has a
            ``task_key()`` method (OpsIncident v1 and v2); ``None`` for any other.

    Example:
        >>> import gymnasium as gym, feedbackgym
        >>> env = gym.make("feedbackgym/OpsIncidentEasy-v2", split="test")
        >>> _, info = env.reset(seed=0)
        >>> task_key(env).startswith("easy/"), "incident" in info, len(info["task_id"])
        (True, False, 16)
    """
    method = getattr(getattr(env, "unwrapped", env), TASK_KEY, None)
    return None if method is None else str(method())
