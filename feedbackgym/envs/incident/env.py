"""``IncidentEnv`` (OpsIncident-v1): procedural incidents, held-out compositions, a horizon knob."""

from __future__ import annotations

import copy
from typing import Any, SupportsFloat

import numpy as np
from gymnasium import spaces

from feedbackgym.core import Subgoal, SubgoalTracker
from feedbackgym.envs.base import TrackedEnv, validation_seed_blocks
from feedbackgym.envs.incident.actions import (
    ACTIONS,
    N_ACTIONS,
    meanings,
    normalise,
    parse_action,
)
from feedbackgym.envs.incident.catalog import LOG_SIGNALS, METRICS, N_SLOTS, ROLES, SLOT_ROLES
from feedbackgym.envs.incident.dynamics import RESULTS, WORSE, advance, apply_action
from feedbackgym.envs.incident.expert import expert_action
from feedbackgym.envs.incident.scenario import (
    DIFFICULTIES,
    INSPECTIONS,
    PRESETS,
    SPLITS,
    Difficulty,
    IncidentState,
    draw_incident,
)
from feedbackgym.envs.incident.subgoals import SUBGOAL_KINDS, build_subgoals
from feedbackgym.envs.incident.text import CHARSET, MAX_TEXT_LENGTH, render_text
from feedbackgym.errors import FeedbackGymError

__all__ = ["VALIDATION_SEEDS", "IncidentEnv", "resolve_difficulty"]

VALIDATION_SEEDS: dict[str, tuple[int, ...]] = validation_seed_blocks(DIFFICULTIES)
"""100 seeds per preset that validation plays, on the test split (any seed is valid in
either split: the split, not the seed, decides which compositions it draws); kept above
:data:`~feedbackgym.envs.base.TRAIN_SEED_LIMIT` like every suite's."""


def resolve_difficulty(difficulty: str, overrides: dict[str, Any]) -> Difficulty:
    """The preset ``difficulty`` with ``overrides`` of its knobs.

    Raises:
        ValueError: An unknown preset or knob, or an impossible combination.

    Example:
        >>> resolve_difficulty("easy", {"faults": 2, "max_services": 8}).faults
        2
    """
    if difficulty not in PRESETS:
        raise ValueError(f"difficulty must be one of {DIFFICULTIES}, got {difficulty!r}")
    unknown = sorted(set(overrides) - set(Difficulty.parameters()))
    if unknown:
        raise ValueError(
            f"unknown OpsIncident-v1 parameters {unknown}; valid: {', '.join(Difficulty.parameters())}"
        )
    return Difficulty(**{**PRESETS[difficulty].__dict__, **overrides})


class IncidentEnv(TrackedEnv[IncidentState]):
    """Diagnose and repair incidents in procedurally drawn production systems.

    ## Description

    Each seed draws a topology (an edge service, frontends, apis, workers,
    caches, a queue, databases and third parties, wired caller to callee,
    with names from a pool), places faults wherever the catalog allows (13
    types: memory leak after a release, bad config push, full disk, pool
    exhaustion, thread deadlock, expired certificate, runaway cron job, cache
    stampede, poisoned cache, stalled queue partition, degraded database,
    third-party outage, third-party rate limiting), and lets each fault's
    symptoms cascade up a call path: the service at the top of the path
    alerts, and every caller of a failing service logs errors that blame it.
    The root is ``min_hops`` to ``max_hops`` calls below the first alert.
    Healthy services may alert with misleading symptoms.

    The agent sees the service map, the alerts and what it inspects. It
    resolves an incident by triaging every alert, following each trail hop
    by hop, gathering the root's evidence, applying the right mitigation,
    verifying recovery and declaring.

    ## Splits

    ``split="train"`` (default) or ``"test"``: a (fault type, topology shape)
    pair is held out for the test split (a quarter of the pairs, by a stable
    digest), so every test incident holds a composition that no train incident
    holds. Every seed is valid in both splits. ``info["incident"]`` is the
    incident's key (the same for two seeds exactly when they pose the same
    problem up to names and numbers).

    ## Action Space

    ``Discrete(179)``: eleven kinds on each of 16 service slots
    (``inspect_metrics``, ``inspect_logs``, ``inspect_deploys``, ``restart``,
    ``rollback``, ``scale_up``, ``scale_down``, ``clear_disk``, ``flush``,
    ``failover``, ``open_breaker``), then ``wait``, ``escalate``,
    ``declare_resolved``. Slots are grouped by role (edge 0, frontends 1-2,
    apis 3-6, workers 7-8, caches 9-10, queue 11, databases 12-13, third
    parties 14-15); an action on an empty slot answers "no such service"
    (:meth:`action_masks` says which are live). ``action_meanings`` names
    each index for the episode's services; text such as ``"inspect logs web"``
    is parsed; anything else raises :class:`~feedbackgym.errors.InvalidAction`.

    ## Observation Space

    ``"vector"``: a ``Dict`` of ``present`` (MultiBinary 16), ``calls``
    (MultiBinary 16x16, caller row, callee column), ``alerts`` (MultiBinary
    16), ``budget`` and ``time`` (Box 1), ``metrics`` (Box 16x8, the last
    inspected values normalised), ``metrics_age`` (Box 16), ``logs``
    (MultiBinary 16x18 log signals seen), ``deploys`` (MultiBinary 16x2),
    ``log_pointers`` (MultiBinary 16x16: row s blames column t),
    ``inspected`` (MultiBinary 16x3), ``actions_taken`` (MultiBinary 179) and
    ``last_result`` (Discrete 5). ``"text"``: the console (the service map,
    status, alerts, the last answer, every finding). ``"both"``: the Dict
    plus ``text``. No wall-clock values.

    ## Rewards

    Sparse: +1 for a correct resolution, 0 otherwise.

    ## Episode End

    Terminated on a correct resolution, an exhausted SLO budget, a destructive
    action (restarting a database), a wrong declaration or an escalation;
    ``info["outcome"]`` says which. Truncated at the preset's step limit
    (:attr:`step_limit`; ``gym.make(..., max_episode_steps=N)`` may cut it shorter), however the preset is chosen.

    ## Arguments

    * ``difficulty``: ``"easy"``, ``"medium"`` (default), ``"hard"`` or ``"extreme"``.
    * ``split``: ``"train"`` or ``"test"``.
    * ``obs_mode``: ``"vector"``, ``"text"`` or ``"both"``.
    * any knob of :class:`~feedbackgym.envs.incident.scenario.Difficulty`
      (``min_services``, ``max_services``, ``faults``, ``min_hops``,
      ``max_hops``, ``misleading_alerts``, ``recovery_steps``, ``max_apis``,
      ``burn``, ``step_limit``) to change the preset.

    ## Version History

    * v1: Procedural topologies, held-out splits, four presets (v0 stays registered).

    Example:
        >>> env = IncidentEnv("easy", split="test")
        >>> _, info = env.reset(seed=0)
        >>> info["incident"].startswith("easy/"), env.step_limit
        (True, 30)
    """

    def __init__(
        self,
        difficulty: str = "medium",
        obs_mode: str = "vector",
        *,
        split: str = "train",
        render_mode: str | None = None,
        **knobs: Any,
    ) -> None:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        self.preset = resolve_difficulty(difficulty, knobs)
        self.difficulty = difficulty
        self.preset_name = difficulty if not knobs else "custom"
        self.split = split
        self.step_limit = self.preset.step_limit
        self._set_common_args(
            obs_mode=obs_mode, max_steps=self.step_limit, render_mode=render_mode
        )
        self.action_space: spaces.Space[Any] = spaces.Discrete(N_ACTIONS)
        n = N_SLOTS
        vector = spaces.Dict(
            {
                "present": spaces.MultiBinary(n),
                "calls": spaces.MultiBinary(n * n),
                "alerts": spaces.MultiBinary(n),
                "budget": spaces.Box(0.0, 1.0, (1,), np.float32),
                "time": spaces.Box(0.0, 1.0, (1,), np.float32),
                "metrics": spaces.Box(0.0, 1.0, (n * len(METRICS),), np.float32),
                "metrics_age": spaces.Box(0.0, 1.0, (n,), np.float32),
                "logs": spaces.MultiBinary(n * len(LOG_SIGNALS)),
                "deploys": spaces.MultiBinary(n * 2),
                "log_pointers": spaces.MultiBinary(n * n),
                "inspected": spaces.MultiBinary(n * len(INSPECTIONS)),
                "actions_taken": spaces.MultiBinary(N_ACTIONS),
                "last_result": spaces.Discrete(len(RESULTS)),
            }
        )
        text = spaces.Text(max_length=MAX_TEXT_LENGTH, min_length=1, charset=CHARSET)
        if obs_mode == "vector":
            self.observation_space: spaces.Space[Any] = vector
        elif obs_mode == "text":
            self.observation_space = text
        else:
            self.observation_space = spaces.Dict({**vector.spaces, "text": text})
        self._actions_taken = np.zeros(N_ACTIONS, np.int8)
        self._meanings: tuple[str, ...] = meanings({})
        self._by_meaning: dict[str, int] = {}
        self._static: dict[str, np.ndarray] = {}

    # --- Gymnasium API ---------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Draws a new incident of the env's split (seeded by ``seed``)."""
        super().reset(seed=seed)
        state = draw_incident(self.preset_name, self.preset, self.split, self.np_random)
        state.symptoms_seen |= set(state.initial_alerts)
        tracker = self._start_episode(state)
        self._actions_taken[:] = 0
        return self._observation(), self._info(tracker.update(state))

    def step(self, action: int | str) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Carries out ``action`` (an index, or text such as ``"inspect logs web"``)."""
        state, tracker = self._require_episode()
        if state.outcome != "in_progress":
            raise FeedbackGymError(f"the episode is over ({state.outcome}); call reset()")
        index = parse_action(action, self._by_meaning, self._names())
        self._actions_taken[index] = 1
        state.last_action = self._meanings[index]
        state.last_output = apply_action(state, index, self.np_random)
        if not state.declared and state.outcome == "in_progress":
            advance(state)
        state.symptoms_seen |= set(state.active_alerts())
        progress = tracker.update(state)
        if state.declared:
            state.outcome = "resolved" if progress["declare_resolved"] else "wrong_declaration"
        reward = 1.0 if state.outcome == "resolved" else 0.0
        terminated = state.outcome != "in_progress"
        truncated = not terminated and state.step >= self.step_limit
        return self._observation(), reward, terminated, truncated, self._info(progress)

    def render(self) -> str | None:
        """Returns the console text when ``render_mode="ansi"``."""
        if self.render_mode != "ansi" or self._state is None:
            return None
        return render_text(self._state, self.max_steps)

    def close(self) -> None:
        """Releases nothing: the simulator holds no outside resources. Idempotent."""
        self._state = None
        self._tracker = None

    # --- feedbackgym API -------------------------------------------------------------------

    @property
    def action_meanings(self) -> tuple[str, ...]:
        """Every action index in words, for this episode's services."""
        return self._meanings

    def parse_action(self, action: int | str) -> int:
        """Turns an index or text into a valid action index (see ``## Action Space``)."""
        return parse_action(action, self._by_meaning, self._names())

    def action_masks(self) -> np.ndarray:
        """Which actions act on a service this episode has (for masked policies)."""
        state, _ = self._require_episode()
        present = set(state.topology.slots)
        return np.array([slot is None or slot in present for _, slot in ACTIONS], bool)

    @property
    def services(self) -> tuple[str, ...]:
        """This episode's service names, in slot order."""
        return self._require_episode()[0].topology.names

    @property
    def observed_targets(self) -> tuple[str, ...]:
        """Services the agent has seen a symptom of: an alert on it, or a metric or
        log line it inspected (its own, or a caller's line that blames it)."""
        state, _ = self._require_episode()
        return tuple(state.name(s) for s in sorted(state.symptoms_seen))

    target_vocabulary: tuple[str, ...] = tuple(f"slot{i}:{r}" for i, r in enumerate(SLOT_ROLES))
    """The vector channel's target entities: the service slots (``hint_targets``
    marks the slots of the services a hint names; see :meth:`target_index`)."""
    subgoal_kinds: tuple[str, ...] = SUBGOAL_KINDS
    """The kinds of subgoal a library holds."""
    roles: tuple[str, ...] = ROLES
    """Service roles, front to back."""

    def target_index(self, name: str) -> int | None:
        """The position in :attr:`target_vocabulary` of the service called ``name``."""
        state = self._state
        if state is None or name not in state.topology.names:
            return None
        return state.topology.slots[state.topology.names.index(name)]

    @property
    def validation_seeds(self) -> tuple[int, ...]:
        """The seeds validation plays (:data:`VALIDATION_SEEDS`), on the env's split:
        validation makes its env with ``split="test"``."""
        return VALIDATION_SEEDS[self.difficulty]

    @property
    def subgoals(self) -> list[Subgoal]:
        """This episode's subgoal library, in prerequisite order."""
        return list(self._require_episode()[1].subgoals)

    @property
    def state(self) -> IncidentState:
        """The hidden state (for oracles, reviews and tests; never shown to the agent)."""
        return self._require_episode()[0]

    def expert_action(self) -> int:
        """The oracle's next action: it knows the faults."""
        return expert_action(self._require_episode()[0])

    def get_state(self) -> dict[str, Any]:
        """A snapshot of the episode that :meth:`set_state` restores."""
        state, tracker = self._require_episode()
        return copy.deepcopy(
            {
                "state": state,
                "done": tracker.done,
                "actions_taken": self._actions_taken,
                "rng": self.np_random.bit_generator.state,
            }
        )

    def set_state(self, snapshot: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """Restores a snapshot from :meth:`get_state`; returns its observation and info."""
        snapshot = copy.deepcopy(snapshot)
        tracker = self._start_episode(snapshot["state"])
        tracker.restore(snapshot["done"])
        self._actions_taken[:] = snapshot["actions_taken"]
        self.np_random.bit_generator.state = snapshot["rng"]
        return self._observation(), self._info(dict(tracker.done))

    # --- helpers ---------------------------------------------------------------------------

    def _names(self) -> dict[int, str]:
        state = self._state
        if state is None:
            return {}
        return dict(zip(state.topology.slots, state.topology.names, strict=True))

    def _start_episode(self, state: IncidentState) -> SubgoalTracker:
        self._state = state
        self._tracker = SubgoalTracker(build_subgoals(state))
        self._meanings = meanings(self._names())
        self._by_meaning = {
            normalise(m): i
            for i, m in enumerate(self._meanings)
            if ACTIONS[i][1] is None or ACTIONS[i][1] in state.topology.slots
        }
        present = np.zeros(N_SLOTS, np.int8)
        present[list(state.topology.slots)] = 1
        calls = np.zeros((N_SLOTS, N_SLOTS), np.int8)
        for a, b in state.topology.calls:
            calls[a, b] = 1
        self._static = {"present": present, "calls": calls.reshape(-1)}
        return self._tracker

    def _observation(self) -> Any:
        state = self._state
        assert state is not None
        if self.obs_mode == "text":
            return render_text(state, self.max_steps)
        alerts = np.zeros(N_SLOTS, np.int8)
        alerts[state.active_alerts()] = 1
        obs: dict[str, Any] = {
            "present": self._static["present"].copy(),
            "calls": self._static["calls"].copy(),
            "alerts": alerts,
            "budget": np.array([state.budget], np.float32),
            "time": np.array([min(1.0, state.step / self.max_steps)], np.float32),
            "metrics": state.metrics_seen.reshape(-1).copy(),
            "metrics_age": np.clip(
                (state.step - np.asarray(state.seen_at, np.float32)) / self.max_steps, 0.0, 1.0
            ).astype(np.float32),
            "logs": state.logs_seen.reshape(-1).copy(),
            "deploys": state.deploys_seen.reshape(-1).copy(),
            "log_pointers": state.log_pointers.reshape(-1).copy(),
            "inspected": state.inspected.reshape(-1).copy(),
            "actions_taken": self._actions_taken.copy(),
            "last_result": state.last_result,
        }
        if self.obs_mode == "both":
            obs["text"] = render_text(state, self.max_steps)
        return obs

    def _info(self, progress: dict[str, bool]) -> dict[str, Any]:
        state = self._state
        assert state is not None
        return {
            "subgoals": progress,
            "outcome": state.outcome,
            "is_success": state.outcome == "resolved",
            "harmful": state.last_result == WORSE
            or state.outcome not in ("in_progress", "resolved", "slo_exhausted"),
            "action": state.last_action,
            "slo_budget": state.budget,
            "incident": state.incident,
        }
