"""``AddGuide``: a hint about the next subgoals every k steps, through the channels you pick."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from feedbackgym.config import GuideConfig
from feedbackgym.core import Hint, Subgoal
from feedbackgym.feedback.generators import Guide, GuideRequest, as_guide
from feedbackgym.feedback.guide import SubgoalGuide
from feedbackgym.feedback.levels import ObservedTargets, check_level, disclose, observed_targets
from feedbackgym.wrappers.common import (
    add_vector_fields,
    feedback_info,
    read_only,
    seeded_rng,
    subgoal_library,
    text_observation,
    with_appended_text,
    with_vector_fields,
)
from feedbackgym.wrappers.feedback import FeedbackWrapper, subgoal_capacity

__all__ = ["GUIDE_CHANNELS", "AddGuide"]

GUIDE_CHANNELS = ("text", "vector", "info")

_DEFAULTS = GuideConfig()
"""The guide's defaults live in the config (:class:`~feedbackgym.config.GuideConfig`)."""

Observed = tuple[str, ...] | ObservedTargets | None
"""What the agent has observed, as the disclosure cache keys it."""
DROPOUT_SCOPES = ("step", "episode")
"""What ``dropout`` withholds: single due hints, or whole episodes' hints."""
WHEN = ("always", "after-failure")
"""Which episodes a guide may hint in: every one, or those starting where the policy failed."""
OUTCOMES_KEPT = 4096
"""Most seeds whose last outcome the ``after-failure`` guide remembers."""
VECTOR_CACHE_SIZE = 1024
"""Distinct hint encodings kept; hints repeat, so their vector fields are built once."""
HINT_TEXT_LIMIT = 512
"""Most characters a hint adds to a text observation."""


class AddGuide(FeedbackWrapper):
    """Gives a hint naming the next subgoals every ``every`` steps (the guide density).

    A hint is state-based, discrete direction ("first A, then B") computed from
    the subgoal library and ``info["subgoals"]``. Its ``level`` decides what it
    may disclose (:mod:`feedbackgym.feedback.levels`): ``"phase"`` (the
    default) names the kind of next step and only services the agent has seen
    a symptom of, in every channel; ``"target"`` names the hidden target;
    ``"action"`` gives the expert's next action (an ablation: the only level
    whose hints carry an action).
    A due hint is given with probability ``weight * (1 - dropout)``: the weight
    is what a schedule fades, the dropout keeps the policy able to act without
    hints even in the guide phase. With ``dropout_scope="episode"`` the dropout
    withholds whole episodes' hints instead (drawn at reset), so the policy
    also plays complete episodes unguided. Draws are seeded by ``reset(seed=...)``.
    The default dropout is 0: the wrapper alone hints in every episode. The
    training recipe the arms use (half the episodes unguided) is
    :class:`~feedbackgym.config.GuideConfig`'s default, which
    :func:`feedbackgym.make` passes.

    With ``when="after-failure"`` the guide speaks only in episodes that start
    where the policy recently failed (Guide-GRPO, ActGuide-RL): an episode reset
    with a seed whose last episode here failed (a restart from a reviewed state
    keeps its episode's seed), or, for a seed not seen yet or a reset without
    one, an episode after a failed one; it stays silent after a success.

    Channels:

    * ``"info"``: ``info["feedback"]["guide"]`` holds the hint (``Hint.to_dict()``)
      on the steps it is given, else ``{}``.
    * ``"text"``: the hint's text is appended to the text observation on those steps.
    * ``"vector"``: ``hint_next`` (one-hot position of the next subgoal in the
      library, size ``max_subgoals``), ``hint_present`` and, when the env has a
      ``target_vocabulary``, ``hint_targets`` (multi-hot of the entities the
      next subgoal concerns) and, when it has ``subgoal_kinds``, ``hint_kind``
      (one-hot of the next subgoal's kind) are added to the Dict observation;
      the last hint is held until the next due step, and all are zero when no
      hint is in force, so the space never changes. The arrays are read-only and
      shared by the observations a hint is held for: copy one before writing to it.

    Generators: the hint comes from ``guide`` (any object meeting
    :class:`~feedbackgym.feedback.generators.Guide`, or its ``"module:Class"``
    name), from a ``feedbackgym serve-feedback`` service (``source``), or from
    the built-in :class:`~feedbackgym.feedback.SubgoalGuide`. A guide that is
    not ``inline`` runs off the step: a hint not ready within ``deadline_ms``
    is skipped and counted (``hints_late``).

    Example:
        >>> import gymnasium as gym, feedbackgym
        >>> env = AddGuide(gym.make("feedbackgym/OpsIncidentEasy-v0"), every=2, dropout=0.0)
        >>> _, info = env.reset(seed=0)
        >>> info["feedback"]["guide"]["subgoal_ids"]
        ['triage_db_primary', 'find_root_cause']
        >>> info["feedback"]["guide"]["text"].split(", then")[0]
        'Hint: first triage the alert: inspect its metrics and logs (seen: db_primary)'

    Change logs:
     * v0.2.0 - ``guide=``: any guide object or ``"module:Class"``; late hints skipped
     * v0.1.0 - Initially added
    """

    kind = "guide"
    offered = GUIDE_CHANNELS
    built_in = SubgoalGuide
    text_limit = HINT_TEXT_LIMIT
    counters = ("hints_given", "hints_due", "hints_late")
    hints_given: int
    """Hints given since the last :meth:`feedback_stats` call."""
    hints_due: int
    """Steps a hint was due on since the last :meth:`feedback_stats` call."""
    hints_late: int
    """Hints skipped since the last :meth:`feedback_stats` call: not ready within the deadline."""

    def __init__(
        self,
        env: gym.Env[Any, Any],
        every: int = _DEFAULTS.every,
        channels: tuple[str, ...] | list[str] = _DEFAULTS.channels,
        *,
        guide: Guide | str | None = _DEFAULTS.generator,
        source: str = _DEFAULTS.source,
        lookahead: int = _DEFAULTS.lookahead,
        weight: float = 1.0,
        dropout: float = 0.0,
        dropout_scope: str = _DEFAULTS.dropout_scope,
        when: str = _DEFAULTS.when,
        level: str = _DEFAULTS.level,
        max_subgoals: int | None = None,
        deadline_ms: float = _DEFAULTS.deadline_ms,
    ) -> None:
        max_subgoals = subgoal_capacity(env, max_subgoals)
        gym.utils.RecordConstructorArgs.__init__(
            self,
            every=every,
            channels=list(channels),
            guide=guide,
            source=source,
            lookahead=lookahead,
            weight=weight,
            dropout=dropout,
            dropout_scope=dropout_scope,
            when=when,
            level=level,
            max_subgoals=max_subgoals,
            deadline_ms=deadline_ms,
        )
        self._setup(
            env,
            channels=channels,
            generator=None if guide is None else lambda: as_guide(guide),
            source=source,
            deadline_ms=deadline_ms,
            max_subgoals=max_subgoals,
        )
        self.configure(
            every=every,
            lookahead=lookahead,
            dropout=dropout,
            dropout_scope=dropout_scope,
            when=when,
            level=level,
        )
        self.set_weight(weight)
        self._targets = _vocabulary(env, "target_vocabulary")
        self._kinds = _vocabulary(env, "subgoal_kinds")
        if "vector" in self.channels:
            fields: dict[str, spaces.Space[Any]] = {
                "hint_next": spaces.MultiBinary(max_subgoals),
                "hint_present": spaces.MultiBinary(1),
            }
            if self._targets:
                fields["hint_targets"] = spaces.MultiBinary(len(self._targets))
            if self._kinds:
                fields["hint_kind"] = spaces.MultiBinary(len(self._kinds))
            self.observation_space = with_vector_fields(self.observation_space, fields)
        self._t = 0
        self._unguided_episode = False
        self._seed: int | None = None
        self._outcomes: dict[int, bool] = {}
        """The last outcome (success) of each seed's episodes, for ``when="after-failure"``."""
        self._last_success = False
        self._held: Hint | None = None
        self._held_vector: dict[str, np.ndarray] | None = None
        self._vector_cache: dict[Any, dict[str, np.ndarray]] = {}
        self._library: tuple[Subgoal, ...] | None = None
        self._disclosed: dict[tuple[str, Observed], tuple[Subgoal, ...]] = {}
        """The episode's library as disclosed, by level and targets observed (few an episode)."""
        """The episode's subgoal library, read at its first hint."""

    # --- runtime setters (reach subprocess workers through env_method / call) -------------

    def configure(
        self,
        *,
        every: int,
        lookahead: int,
        dropout: float,
        dropout_scope: str,
        when: str = "always",
        level: str = _DEFAULTS.level,
    ) -> None:
        """Changes density, lookahead, dropout, when it speaks and its level (hot reload)."""
        if every < 1:
            raise ValueError(f"every must be at least 1, got {every}")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"dropout must be in [0, 1], got {dropout}")
        if dropout_scope not in DROPOUT_SCOPES:
            raise ValueError(
                f"dropout_scope must be one of {DROPOUT_SCOPES}, got {dropout_scope!r}"
            )
        if lookahead < 1:
            raise ValueError(f"lookahead must be at least 1, got {lookahead}")
        if when not in WHEN:
            raise ValueError(f"when must be one of {WHEN}, got {when!r}")
        self.level = check_level(level)
        self.when = when
        self.every = every
        self.lookahead = lookahead
        self.dropout = dropout
        self.dropout_scope = dropout_scope
        self._options = {"lookahead": lookahead, "level": level}

    # --- Gymnasium API --------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Resets the env; a hint is due at the first step."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._rng = seeded_rng(seed, 0x6775, self._rng)
        self._t = 0
        self._library = None
        self._disclosed = {}
        self._unguided_episode = (
            self.dropout_scope == "episode" and self._rng.random() < self.dropout
        )
        self._seed = seed
        if self.when == "after-failure":
            succeeded = self._outcomes.get(seed, self._last_success) if seed is not None else None
            self._unguided_episode |= self._last_success if succeeded is None else succeeded
        self._set_held(None)
        return self._with_hint(obs, info, due=True)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Steps the env; on due steps a hint may be given."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._t += 1
        if terminated or truncated:
            self._ended(bool(info.get("is_success", False)))
        due = self._t % self.every == 0 and not (terminated or truncated)
        obs, info = self._with_hint(obs, info, due=due)
        return obs, reward, terminated, truncated, info

    def _with_hint(
        self, obs: Any, info: dict[str, Any], *, due: bool
    ) -> tuple[Any, dict[str, Any]]:
        hint = None
        if due:
            self.hints_due += 1
            assert self._rng is not None
            if self._rng.random() < self._hint_chance():
                hint = self._make_hint(obs, info)
            self._set_held(hint)
        fields = feedback_info(info)
        fields["guide"] = hint.to_dict() if hint is not None and "info" in self.channels else {}
        fields["guide_weight"] = self.weight
        if hint is not None and "text" in self.channels:
            obs = with_appended_text(obs, hint.text, HINT_TEXT_LIMIT)
        if "vector" in self.channels:
            assert self._held_vector is not None
            obs = add_vector_fields(obs, self._held_vector)
        return obs, info

    def _ended(self, success: bool) -> None:
        """Keeps the episode's outcome, by its seed, for ``when="after-failure"``."""
        self._last_success = success
        if self._seed is not None:
            self._outcomes.pop(self._seed, None)
            self._outcomes[self._seed] = success
            if len(self._outcomes) > OUTCOMES_KEPT:
                del self._outcomes[next(iter(self._outcomes))]

    def _hint_chance(self) -> float:
        """The chance that a due hint is given: the weight, less the dropout."""
        if self._unguided_episode:
            return 0.0
        if self.dropout_scope == "step":
            return self.weight * (1.0 - self.dropout)
        return self.weight

    def _set_held(self, hint: Hint | None) -> None:
        """Holds ``hint`` until the next due step, with its (cached, read-only) vector fields."""
        self._held = hint
        if "vector" in self.channels:
            marks = self._target_marks(hint)
            key = None if hint is None else (hint.positions[:1], marks, hint.kind)
            if key not in self._vector_cache:
                if len(self._vector_cache) >= VECTOR_CACHE_SIZE:
                    self._vector_cache.clear()
                self._vector_cache[key] = read_only(self._vector(hint, marks))
            self._held_vector = self._vector_cache[key]

    def _make_hint(self, obs: Any, info: dict[str, Any]) -> Hint | None:
        hint: Hint | None = self._timed(lambda: self._ask(self._request(obs, info)))
        if hint is not None:
            self.hints_given += 1
        return hint

    def _ask(self, request: GuideRequest) -> Hint | None:
        call = self._call
        if call.inline:
            return call(request)
        done, hint = call.settle(call.submit(request), self.deadline_ms / 1000.0)
        if not done:
            self.hints_late += 1
            call.lost += 1
        return hint

    def _request(self, obs: Any, info: dict[str, Any]) -> GuideRequest:
        library = self._library
        if library is None:  # the library is the episode's: read it once an episode
            library = self._library = tuple(subgoal_library(self.env))
            if len(library) > self.max_subgoals:
                raise ValueError(
                    f"the subgoal library has {len(library)} subgoals, "
                    f"more than max_subgoals={self.max_subgoals}"
                )
        options = self._options
        if self.level == "action":
            options = {**options, "expert_action": self._expert_words()}
        key = (self.level, observed_targets(self.env))
        if key not in self._disclosed:
            self._disclosed[key] = disclose(library, *key)
        return GuideRequest(
            self._disclosed[key],
            info.get("subgoals", {}),
            self._t,
            text_observation(obs),
            self._task,
            options,
        )

    def _expert_words(self) -> str | None:
        """The expert's next action in words (the ``action`` level), or ``None``."""
        try:
            action = self.env.get_wrapper_attr("expert_action")()
        except AttributeError:
            return None
        try:
            return str(self.env.get_wrapper_attr("action_meanings")[int(action)])
        except (AttributeError, IndexError, TypeError, ValueError):
            return str(action)

    def _target_marks(self, hint: Hint | None) -> tuple[int, ...]:
        """Positions in the target vocabulary of the hint's targets.

        An env whose targets change names per episode (OpsIncident-v1's services
        in slots) maps them with its ``target_index``; others by vocabulary position.
        """
        if hint is None or not self._targets:
            return ()
        index = getattr(self.env.unwrapped, "target_index", None)
        if index is not None:
            found = (index(name) for name in hint.targets)
            return tuple(sorted({i for i in found if i is not None}))
        return tuple(sorted({self._targets.index(n) for n in hint.targets if n in self._targets}))

    def _vector(self, hint: Hint | None, marks: tuple[int, ...]) -> dict[str, np.ndarray]:
        one_hot = np.zeros(self.max_subgoals, np.int8)
        if hint is not None and hint.positions:
            one_hot[hint.positions[0]] = 1
        fields = {"hint_next": one_hot, "hint_present": np.array([hint is not None], np.int8)}
        if self._targets:
            targets = np.zeros(len(self._targets), np.int8)
            targets[list(marks)] = 1
            fields["hint_targets"] = targets
        if self._kinds:
            kind = np.zeros(len(self._kinds), np.int8)
            if hint is not None and hint.kind in self._kinds:
                kind[self._kinds.index(hint.kind)] = 1
            fields["hint_kind"] = kind
        return fields


def _vocabulary(env: gym.Env[Any, Any], name: str) -> tuple[str, ...]:
    try:
        return tuple(env.get_wrapper_attr(name))
    except AttributeError:
        return ()
