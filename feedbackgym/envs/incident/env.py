"""``IncidentEnv`` (OpsIncident-v1): procedural incidents, held-out compositions, a horizon knob."""

from __future__ import annotations

from typing import Any, SupportsFloat

import numpy as np
from gymnasium import spaces

from feedbackgym.core import Subgoal, SubgoalTracker
from feedbackgym.entity_view import EntityView
from feedbackgym.envs.base import SimulatorEnv, text_space, validation_seed_blocks
from feedbackgym.envs.incident.actions import (
    action_table,
    kind_words,
    meanings,
    normalise,
    parse_action,
    position_name,
)
from feedbackgym.envs.incident.catalog import (
    GLOBAL_KINDS,
    LOG_SIGNALS,
    METRICS,
    N_SLOTS,
    ROLES,
    SERVICE_KINDS,
    SLOT_ROLES,
)
from feedbackgym.envs.incident.dynamics import NO_EFFECT, RESULTS, advance, apply_action
from feedbackgym.envs.incident.expert import expert_action
from feedbackgym.envs.incident.rows import ObservationRows
from feedbackgym.envs.incident.scenario import (
    DIFFICULTIES,
    INSPECTIONS,
    PRESETS,
    SPLITS,
    Difficulty,
    IncidentState,
    draw_incident,
    widened,
)
from feedbackgym.envs.incident.subgoals import SUBGOAL_KINDS, build_subgoals
from feedbackgym.envs.incident.text import MAX_TEXT_LENGTH, render_text
from feedbackgym.envs.ops.env import incident_info, settle_step
from feedbackgym.errors import FeedbackGymError
from feedbackgym.protocol import INCIDENT

__all__ = ["VALIDATION_SEEDS", "IncidentEnv", "resolve_difficulty"]

_KIND_WORDS = {kind: kind_words(kind) for kind in (*SERVICE_KINDS, *GLOBAL_KINDS)}
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
            f"unknown OpsIncident-v1 parameters {unknown}; "
            f"valid: {', '.join(Difficulty.parameters())}"
        )
    return Difficulty(**{**PRESETS[difficulty].__dict__, **overrides})


class IncidentEnv(SimulatorEnv[IncidentState]):
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

    ``Discrete(11 * max_services + 3)`` (91 on easy, 113 on medium, 146 on
    hard, 179 on extreme): eleven kinds (``inspect_metrics``,
    ``inspect_logs``, ``inspect_deploys``, ``restart``, ``rollback``,
    ``scale_up``, ``scale_down``, ``clear_disk``, ``flush``, ``failover``,
    ``open_breaker``) on each service position, then ``wait``, ``escalate``,
    ``declare_resolved``. Positions hold the episode's services in role order
    (edge, frontends, apis, workers, caches, queue, databases, third
    parties); an action on an empty position answers "no such service"
    (:meth:`action_masks` says which are live). ``action_meanings`` names
    each index for the episode's services; text such as ``"inspect logs web"``
    is parsed; anything else raises :class:`~feedbackgym.errors.InvalidAction`.

    ## Observation Space

    ``"vector"``: a ``Dict`` over ``n = max_services`` positions of
    ``present`` (MultiBinary n), ``roles`` (MultiBinary n x 8), ``calls``
    (MultiBinary n x n, caller row, callee column), ``alerts`` (MultiBinary
    n), ``budget`` and ``time`` (Box 1), ``metrics`` (Box n x 8, the last
    inspected values normalised), ``metrics_age`` (Box n), ``logs``
    (MultiBinary n x 18 log signals seen), ``deploys`` (MultiBinary n x 2),
    ``log_pointers`` (MultiBinary n x n: row s blames column t),
    ``inspected`` (MultiBinary n x 3), ``actions_taken`` (MultiBinary, one per
    action) and ``last_result`` (Discrete 5). ``"text"``: the console (the
    service map, status, alerts, the last answer, every finding). ``"both"``:
    the Dict plus ``text``. No wall-clock values.

    ## Rewards

    Sparse: +1 for a correct resolution, 0 otherwise.

    ## Episode End

    Terminated on a correct resolution, an exhausted SLO budget, a destructive
    action (restarting a database), a wrong declaration or an escalation;
    ``info["outcome"]`` says which. Truncated at the preset's step limit
    (:attr:`step_limit`), however the preset is chosen;
    ``gym.make(..., max_episode_steps=N)`` may cut it shorter.

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
        (True, 50)
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
        self._own_preset = (self.preset, self.preset_name)
        """The preset the env was made with (a curriculum width of 1 plays it)."""
        self.split = split
        self.step_limit = self.preset.step_limit
        self._set_common_args(obs_mode=obs_mode, max_steps=self.step_limit, render_mode=render_mode)
        n = self.positions = self.preset.max_services
        self._table = action_table(n)
        self.action_space: spaces.Space[Any] = spaces.Discrete(len(self._table))
        vector = spaces.Dict(
            {
                "present": spaces.MultiBinary(n),
                "roles": spaces.MultiBinary(n * len(ROLES)),
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
                "actions_taken": spaces.MultiBinary(len(self._table)),
                "last_result": spaces.Discrete(len(RESULTS)),
            }
        )
        self._set_observation_space(vector, text_space(MAX_TEXT_LENGTH))
        self._rows = ObservationRows(vector)
        """The vector observation's fields, written in place as the episode goes."""
        self._bind_rows()
        self._meanings: tuple[str, ...] | None = None
        self._by_meaning: dict[str, int] | None = None
        self._table_positions = np.array([-1 if p is None else p for _, p in self._table])
        """Each action's service position (-1: a global action), for the mask."""
        self._seen_at = np.zeros(n, np.float32)
        self._position_of = np.zeros(N_SLOTS, np.int64)
        self._slots = np.zeros(0, np.int64)
        self._slot_list: tuple[int, ...] = ()
        """The episode's slots by position (``_slots`` as Python ints, for the step)."""
        self._position_names: tuple[str, ...] = ()
        self._mask = np.zeros(len(self._table), bool)
        """Which actions act on a service this episode has (:meth:`action_masks`)."""
        self.target_vocabulary = tuple(f"service{p}" for p in range(n))
        """The vector channel's target entities: the service positions (``hint_targets``
        marks the positions of the services a hint names; see :meth:`target_index`)."""
        self.max_subgoals = 32
        """The longest subgoal library a preset builds (the guide's vector size)."""

    def _bind_rows(self) -> None:
        """Names the views of :attr:`_rows` that the episode writes into."""
        n, rows = self.positions, self._rows.field
        self._actions_taken = rows("actions_taken")
        self._alerting = rows("alerts")
        self._findings = {
            "metrics": rows("metrics").reshape(n, len(METRICS)),
            "logs": rows("logs").reshape(n, len(LOG_SIGNALS)),
            "deploys": rows("deploys").reshape(n, 2),
            "log_pointers": rows("log_pointers").reshape(n, n),
            "inspected": rows("inspected").reshape(n, len(INSPECTIONS)),
        }
        """Per-position rows of what the agent has found, updated by each inspection."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickles the env, its row views bound to its own buffers again."""
        self.__dict__.update(state)
        self._bind_rows()

    # --- Gymnasium API ---------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Draws a new incident of the env's split (seeded by ``seed``)."""
        super().reset(seed=seed)
        state = self._draw_incident()
        state.symptoms_seen |= set(state.initial_alerts)
        state.alerts_seen |= set(state.initial_alerts)
        tracker = self._start_episode(state)
        return self._observation(), self._info(tracker.update(state))

    def step(self, action: int | str) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Carries out ``action`` (an index, or text such as ``"inspect logs web"``)."""
        state, tracker = self._require_episode()
        if state.outcome != "in_progress":
            raise FeedbackGymError(f"the episode is over ({state.outcome}); call reset()")
        index = self.parse_action(action)
        self._actions_taken[index] = 1
        kind, position = self._table[index]
        state.last_action = (
            _KIND_WORDS[kind]
            if position is None
            else f"{_KIND_WORDS[kind]} {self._position_names[position]}"
        )
        if position is not None and position >= len(self._slot_list):
            state.last_result, state.last_output = NO_EFFECT, f"no service at position {position}"
        else:
            slot = None if position is None else self._slot_list[position]
            state.last_output = apply_action(state, kind, slot, self.np_random)
            if position is not None and kind.startswith("inspect_"):
                self._copy_findings(position)
        if not state.declared and state.outcome == "in_progress":
            advance(state)
        alerts = state.active_alerts()
        state.symptoms_seen.update(alerts)
        state.alerts_seen.update(alerts)
        self._mark_alerts(alerts)
        progress, reward, terminated = settle_step(state, tracker)
        truncated = not terminated and state.step >= self.step_limit
        return self._observation(), reward, terminated, truncated, self._info(progress)

    def _console(self) -> str:
        assert self._state is not None
        return render_text(self._state, self.max_steps)

    # --- feedbackgym API -------------------------------------------------------------------

    @property
    def action_meanings(self) -> tuple[str, ...]:
        """Every action index in words, for this episode's services."""
        if self._meanings is None:
            names = self._state.topology.names if self._state is not None else ()
            self._meanings = meanings(self._table, names)
        return self._meanings

    def parse_action(self, action: int | str) -> int:
        """Turns an index or text into a valid action index (see ``## Action Space``)."""
        if type(action) is int and 0 <= action < len(self._table):  # the common case, at once
            return action
        names = self._state.topology.names if self._state is not None else ()
        if self._by_meaning is None:  # built at the first text action of an episode
            live = len(self._slots)
            self._by_meaning = {
                normalise(m): i
                for i, m in enumerate(self.action_meanings)
                if self._table[i][1] is None or self._table[i][1] < live  # type: ignore[operator]
            }
        return parse_action(action, self._by_meaning, len(self._table), names)

    def action_masks(self) -> np.ndarray:
        """Which actions act on a service this episode has (for masked policies)."""
        self._require_episode()
        return self._mask.copy()

    def task_key(self) -> str:
        """The episode's incident key (fault types and roles included): the evaluator's side only.

        Read it through :func:`feedbackgym.protocol.task_key`; never show it to the agent.
        """
        return self._require_episode()[0].incident

    @property
    def services(self) -> tuple[str, ...]:
        """This episode's service names, in slot order."""
        return self._require_episode()[0].topology.names

    @property
    def observed_targets(self) -> tuple[str, ...]:
        """Services the agent has seen a symptom of.

        An alert on it, or a metric or log line it inspected (its own, or a
        caller's line that blames it): the ``phase`` hint level names no other.
        """
        state, _ = self._require_episode()
        return tuple(state.name(s) for s in sorted(state.symptoms_seen))

    subgoal_kinds: tuple[str, ...] = SUBGOAL_KINDS
    """The kinds of subgoal a library holds."""
    roles: tuple[str, ...] = ROLES
    """Service roles, front to back."""

    def target_index(self, name: str) -> int | None:
        """The position in :attr:`target_vocabulary` of the service called ``name``."""
        state = self._state
        if state is None or name not in state.topology.names:
            return None
        return state.topology.names.index(name)

    @property
    def entity_view(self) -> EntityView:
        """The observation as services: per-service rows, the call and blame graphs, globals.

        Every per-service key is an entity key; ``calls`` and ``log_pointers``
        are relations; ``budget``, ``time``, ``last_result`` and the three
        global columns of ``actions_taken`` are global. Action ``p * 11 + v``
        is verb ``v`` on position ``p`` (:mod:`~.actions`).
        """
        n = self.positions
        return EntityView(
            count=n,
            present="present",
            entities={
                "present": 1,
                "roles": len(ROLES),
                "alerts": 1,
                "metrics": len(METRICS),
                "metrics_age": 1,
                "logs": len(LOG_SIGNALS),
                "deploys": 2,
                "inspected": len(INSPECTIONS),
                "actions_taken": len(SERVICE_KINDS),
            },
            relations=("calls", "log_pointers"),
            entity_actions=len(SERVICE_KINDS),
            global_actions=len(GLOBAL_KINDS),
        )

    @property
    def validation_seeds(self) -> tuple[int, ...]:
        """The seeds validation plays (:data:`VALIDATION_SEEDS`), on the env's split.

        Validation makes its env with ``split="test"``.
        """
        return VALIDATION_SEEDS[self.difficulty]

    def expert_action(self) -> int:
        """The oracle's next action index: it knows the faults."""
        kind, slot = expert_action(self._require_episode()[0])
        position = None if slot is None else int(np.flatnonzero(self._slots == slot)[0])
        return self._table.index((kind, position))

    # --- helpers ---------------------------------------------------------------------------

    def _start_episode(self, state: IncidentState) -> SubgoalTracker:
        self._state = state
        self._tracker = SubgoalTracker(self._subgoal_library(state))
        topology, n = state.topology, self.positions
        self._slots = np.array(topology.slots, np.int64)
        self._slot_list = topology.slots
        self._position_of[self._slots] = np.arange(len(self._slots))
        self._meanings = self._by_meaning = None
        self._position_names = tuple(position_name(topology.names, p) for p in range(n))
        live = len(topology.slots)
        self._mask = self._table_positions < live
        self._rows.clear()
        self._rows.field("present")[:live] = 1
        roles = self._rows.field("roles").reshape(n, len(ROLES))
        roles[np.arange(live), [ROLES.index(SLOT_ROLES[s]) for s in topology.slots]] = 1
        calls = self._rows.field("calls").reshape(n, n)
        for a, b in topology.calls:
            calls[self._position_of[a], self._position_of[b]] = 1
        self._seen_at.fill(-np.inf)
        if state.evidence:  # a restored snapshot: copy what was found before it
            for p in range(live):
                self._copy_findings(p)
        self._mark_alerts(state.active_alerts())
        return self._tracker

    def _mark_alerts(self, alerts: list[int]) -> None:
        """Sets the ``alerts`` row to the slots alerting now."""
        self._alerting.fill(0)
        for slot in alerts:
            self._alerting[self._position_of[slot]] = 1

    def _copy_findings(self, position: int) -> None:
        """Copies what the agent has found about the service at ``position`` into the rows."""
        state, slot, rows = self._state, self._slot_list[position], self._findings
        assert state is not None
        rows["metrics"][position] = state.metrics_seen[slot]
        rows["logs"][position] = state.logs_seen[slot]
        rows["deploys"][position] = state.deploys_seen[slot]
        rows["log_pointers"][position, : len(self._slots)] = state.log_pointers[slot, self._slots]
        rows["inspected"][position] = state.inspected[slot]
        self._seen_at[position] = state.seen_at[slot]

    # --- the task curriculum ---------------------------------------------------------------

    def set_curriculum(self, width: float | None) -> None:
        """Plays incidents of a curriculum ``width`` from the next reset on.

        ``width`` in ``[0, 1]`` interpolates the knobs from the easy preset to
        the env's own (:func:`~feedbackgym.envs.incident.scenario.widened`); 1
        or ``None`` plays the env's own preset again. The positions, the action
        space and the step limit stay the preset's; a widened incident is keyed
        as a ``custom`` one. Tasks keep to the env's split.

        Raises:
            ValueError: ``width`` is outside ``[0, 1]``.

        Example:
            >>> env = IncidentEnv("hard")
            >>> env.set_curriculum(0.0)
            >>> _ = env.reset(seed=0)
            >>> env.preset.faults, len(env._slot_list) <= 8, env.step_limit
            (1, True, 100)
        """
        preset, name = self._own_preset
        if width is None or width == 1.0:
            self.preset, self.preset_name = preset, name
            return
        self.preset, self.preset_name = widened(preset, width), "custom"

    # --- what each version changes ---------------------------------------------------------

    def _draw_incident(self) -> IncidentState:
        """Draws the next episode's incident from the env's generator (v1's stream and split)."""
        return draw_incident(self.preset_name, self.preset, self.split, self.np_random)

    def _subgoal_library(self, state: IncidentState) -> list[Subgoal]:
        """The episode's subgoal library (v1's: a ``trace_k`` where a path has hops)."""
        return build_subgoals(state)

    def _observation(self) -> Any:
        state = self._state
        assert state is not None
        if self.obs_mode == "text":
            return render_text(state, self.max_steps)
        field = self._rows.field
        field("budget")[0] = state.budget
        field("time")[0] = min(1.0, state.step / self.max_steps)
        np.minimum((state.step - self._seen_at) / self.max_steps, 1.0, out=field("metrics_age"))
        obs: dict[str, Any] = self._rows.observation()
        obs["last_result"] = state.last_result
        if self.obs_mode == "both":
            obs["text"] = render_text(state, self.max_steps)
        return obs

    def _info(self, progress: dict[str, bool]) -> dict[str, Any]:
        state = self._state
        assert state is not None
        return {**incident_info(state, progress), INCIDENT: state.incident}
