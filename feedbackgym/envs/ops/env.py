"""``OpsIncidentEnv``: diagnose and repair an incident in a simulated production system."""

from __future__ import annotations

from typing import Any, SupportsFloat

import numpy as np
from gymnasium import spaces

from feedbackgym.core import SubgoalTracker
from feedbackgym.envs.base import OBS_MODES, SimulatorEnv, text_space, validation_seed_blocks
from feedbackgym.envs.ops.actions import ACTION_MEANINGS, N_ACTIONS, parse_action
from feedbackgym.envs.ops.catalog import LOG_SIGNALS, METRICS, SERVICES
from feedbackgym.envs.ops.dynamics import RESULTS, WORSE, advance, apply_action
from feedbackgym.envs.ops.expert import expert_action
from feedbackgym.envs.ops.state import DIFFICULTIES, INSPECTIONS, IncidentState, draw_scenario
from feedbackgym.envs.ops.subgoals import SUBGOAL_KINDS, build_subgoals
from feedbackgym.envs.ops.text import MAX_TEXT_LENGTH, render_text
from feedbackgym.errors import FeedbackGymError

__all__ = ["OBS_MODES", "VALIDATION_SEEDS", "OpsIncidentEnv", "incident_info", "settle_step"]

VALIDATION_SEEDS: dict[str, tuple[int, ...]] = validation_seed_blocks(DIFFICULTIES)
"""100 held-out seeds per difficulty: ``10_000_000..10_000_099`` for easy,
``10_001_000..`` for medium, ``10_002_000..`` for hard."""

_N = len(SERVICES)


class OpsIncidentEnv(SimulatorEnv[IncidentState]):
    """Diagnose and repair an incident in a simulated production system.

    ## Description

    A small production system (load balancer, web tier, app tier, database
    primary and replica, cache, queue worker, a third-party dependency) is in
    trouble. Faults are drawn from eleven types (memory leak after a deploy, bad
    config push, full disk, DB connection-pool exhaustion, cache stampede,
    third-party outage, expired certificate, runaway cron job, replica lag,
    degraded DB primary, poisoned cache). ``easy`` has one fault; ``medium`` one
    fault plus two healthy services that alert with misleading symptoms;
    ``hard`` two faults (sometimes an interacting pair: the lagging replica must
    be repaired before failing over the degraded primary) plus a red herring.

    The agent sees only what it inspects. Resolution needs the right mitigation,
    then verified recovery, then a declaration.

    ## Action Space

    ``Discrete(70)``: eight kinds on each of the eight services
    (``inspect_metrics``, ``inspect_logs``, ``inspect_deploys``, ``restart``,
    ``rollback``, ``scale_up``, ``scale_down``, ``clear_disk``), then
    ``flush_cache``, ``failover_db``, ``toggle_circuit_breaker``, ``wait``,
    ``escalate``, ``declare_resolved``. ``action_meanings`` gives each index in
    words; :meth:`parse_action` (and :meth:`step`) accept that text. An index
    out of range or text that names no action raises
    :class:`~feedbackgym.errors.InvalidAction` listing the valid choices.

    ## Observation Space

    ``obs_mode="vector"``: a ``Dict`` that SB3's ``MultiInputPolicy`` accepts —
    ``alerts`` (MultiBinary 8), ``budget`` and ``time`` (Box 1), ``metrics``
    (Box 64: 8 services x 8 metrics, row-major, the last inspected values
    normalised to [0, 1], zero if never), ``metrics_age`` (Box 8, steps since
    that inspection / max_steps, 1 if never), ``logs`` (MultiBinary 8x15
    flattened, log signals seen), ``deploys`` (MultiBinary 8x2 flattened, recent
    code deploy / config push seen), ``log_pointers`` (MultiBinary 8x8 flattened:
    row s, column t is set when s's logs point at t, e.g. "upstream app returned
    503"), ``inspected`` (MultiBinary 8x3 flattened),
    ``actions_taken`` (MultiBinary 70), ``breaker_open`` (Discrete 2) and
    ``last_result`` (Discrete 5: none, info, ok, no_effect, worse).
    ``obs_mode="text"``: a ``Text`` space with an explicit charset: the console
    (status, alerts, the last answer, every finding). ``"both"``: the vector
    ``Dict`` plus a ``text`` key. No wall-clock values.

    ## Rewards

    Sparse: +1 for a correct resolution, 0 otherwise.

    ## Feedback

    ``subgoals`` is the episode's library (``triage_<service>`` for each alert →
    ``find_root_cause`` → ``mitigate`` → ``verify_recovery`` →
    ``declare_resolved``, suffixed per fault on hard), each with its ``kind``
    and ``targets`` (services); ``info["subgoals"]`` says which are done.
    :meth:`expert_action` is the oracle that knows the fault.

    ## Episode End

    Terminated on a correct resolution, when the SLO error budget is exhausted
    (unmitigated faults burn it faster and faster), on a destructive action
    (restarting the DB primary, failing over onto a lagging replica), on a wrong
    declaration, or on escalation; ``info["outcome"]`` says which. Truncated at
    ``max_episode_steps`` (80) by the registered ``TimeLimit``.

    ## Arguments

    * ``difficulty``: ``"easy"``, ``"medium"`` or ``"hard"``.
    * ``obs_mode``: ``"vector"``, ``"text"`` or ``"both"``.
    * ``max_steps``: the step count that ``time`` is normalised by.

    Validation seeds: :data:`feedbackgym.envs.ops.VALIDATION_SEEDS`.

    ## Version History

    * v0: Initial version.
    """

    def __init__(
        self,
        difficulty: str = "medium",
        obs_mode: str = "vector",
        *,
        max_steps: int = 80,
        render_mode: str | None = None,
    ) -> None:
        if difficulty not in DIFFICULTIES:
            raise ValueError(f"difficulty must be one of {DIFFICULTIES}, got {difficulty!r}")
        self._set_common_args(obs_mode=obs_mode, max_steps=max_steps, render_mode=render_mode)
        self.difficulty = difficulty
        self.action_space: spaces.Space[Any] = spaces.Discrete(N_ACTIONS)
        vector = spaces.Dict(
            {
                "alerts": spaces.MultiBinary(_N),
                "budget": spaces.Box(0.0, 1.0, (1,), np.float32),
                "time": spaces.Box(0.0, 1.0, (1,), np.float32),
                "metrics": spaces.Box(0.0, 1.0, (_N * len(METRICS),), np.float32),
                "metrics_age": spaces.Box(0.0, 1.0, (_N,), np.float32),
                "logs": spaces.MultiBinary(_N * len(LOG_SIGNALS)),
                "deploys": spaces.MultiBinary(_N * 2),
                "log_pointers": spaces.MultiBinary(_N * _N),
                "inspected": spaces.MultiBinary(_N * len(INSPECTIONS)),
                "actions_taken": spaces.MultiBinary(N_ACTIONS),
                "breaker_open": spaces.Discrete(2),
                "last_result": spaces.Discrete(len(RESULTS)),
            }
        )
        self._set_observation_space(vector, text_space(MAX_TEXT_LENGTH))
        self._actions_taken = np.zeros(N_ACTIONS, np.int8)
        self._seen_views: dict[str, np.ndarray] = {}

    # --- Gymnasium API ---------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Draws a new incident from the env's generator (seeded by ``seed``)."""
        super().reset(seed=seed)
        state, tracker = self._start_episode(draw_scenario(self.difficulty, self.np_random))
        self._actions_taken[:] = 0
        return self._observation(), self._info(tracker.update(state))

    def step(self, action: int | str) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Carries out ``action`` (an index, or text such as ``"inspect logs app"``)."""
        state, tracker = self._require_episode()
        if state.outcome != "in_progress":
            raise FeedbackGymError(f"the episode is over ({state.outcome}); call reset()")
        index = parse_action(action)
        self._actions_taken[index] = 1
        apply_action(state, index, self.np_random)
        if not state.declared and state.outcome == "in_progress":
            advance(state)
        progress, reward, terminated = settle_step(state, tracker)
        return self._observation(), reward, terminated, False, self._info(progress)

    def _console(self) -> str:
        assert self._state is not None
        return render_text(self._state, self.max_steps)

    # --- feedbackgym API -------------------------------------------------------------------

    @property
    def action_meanings(self) -> tuple[str, ...]:
        """The readable meaning of every action index."""
        return ACTION_MEANINGS

    @staticmethod
    def parse_action(action: int | str) -> int:
        """Turns an index or text into a valid action index (see ``## Action Space``)."""
        return parse_action(action)

    @property
    def observed_targets(self) -> tuple[str, ...]:
        """Services the agent has seen a symptom of (the ``phase`` level names no other).

        Alerting, inspected (metrics or logs), or blamed by a log line it inspected.
        """
        state = self._require_episode()[0]
        alerting = set(state.initial_alerts) | set(state.active_alerts())
        rows = {
            int(row)
            for row in (
                *np.flatnonzero(state.inspected[:, :2].any(axis=1)),  # inspected
                *np.flatnonzero(state.log_pointers.any(axis=0)),  # blamed by a log line
            )
        }
        return tuple(s for row, s in enumerate(SERVICES) if s in alerting or row in rows)

    target_vocabulary: tuple[str, ...] = SERVICES
    """The entities subgoal ``targets`` name: the services."""
    subgoal_kinds: tuple[str, ...] = SUBGOAL_KINDS
    """The kinds of subgoal a library holds."""

    @property
    def validation_seeds(self) -> tuple[int, ...]:
        """This difficulty's held-out seeds (:data:`feedbackgym.envs.ops.VALIDATION_SEEDS`)."""
        return VALIDATION_SEEDS[self.difficulty]

    def expert_action(self) -> int:
        """The oracle's next action: it knows the fault."""
        return expert_action(self._require_episode()[0])

    # --- helpers ---------------------------------------------------------------------------

    def _start_episode(self, state: IncidentState) -> tuple[IncidentState, SubgoalTracker]:
        self._state = state
        self._tracker = SubgoalTracker(build_subgoals(state))
        # Flat views of what the agent has seen: the observation copies them
        # (cheaper than flattening the 2-D arrays every step).
        self._seen_views = {
            "metrics": state.metrics_seen.reshape(-1),
            "logs": state.logs_seen.reshape(-1),
            "deploys": state.deploys_seen.reshape(-1),
            "log_pointers": state.log_pointers.reshape(-1),
            "inspected": state.inspected.reshape(-1),
        }
        return state, self._tracker

    def _observation(self) -> Any:
        state = self._state
        assert state is not None
        if self.obs_mode == "text":
            return render_text(state, self.max_steps)
        alerts = state.active_alerts()
        seen = self._seen_views
        obs: dict[str, Any] = {
            "alerts": np.array([s in alerts for s in SERVICES], np.int8),
            "budget": np.array([state.budget], np.float32),
            "time": np.array([min(1.0, state.step / self.max_steps)], np.float32),
            "metrics": seen["metrics"].copy(),
            "metrics_age": np.array(
                [min(1.0, (state.step - at) / self.max_steps) for at in state.seen_at], np.float32
            ),
            "logs": seen["logs"].copy(),
            "deploys": seen["deploys"].copy(),
            "log_pointers": seen["log_pointers"].copy(),
            "inspected": seen["inspected"].copy(),
            "actions_taken": self._actions_taken.copy(),
            "breaker_open": int(state.breaker_open),
            "last_result": state.last_result,
        }
        if self.obs_mode == "both":
            obs["text"] = render_text(state, self.max_steps, alerts=alerts)
        return obs

    def _info(self, progress: dict[str, bool]) -> dict[str, Any]:
        assert self._state is not None
        return incident_info(self._state, progress)


def settle_step(state: Any, tracker: SubgoalTracker) -> tuple[dict[str, bool], float, bool]:
    """Ends an incident's step (v0's or v1's), once the world has moved: progress, reward, end.

    A declaration resolves the incident when ``declare_resolved`` is done and
    is a wrong one otherwise. The reward is 1 for a resolution, else 0; any
    outcome but ``"in_progress"`` terminates the episode.

    Args:
        state: The incident's state, after the action and the world's advance.
        tracker: The episode's subgoal tracker.

    Returns:
        The subgoals' progress, the reward and whether the episode terminated.

    Example:
        >>> env = OpsIncidentEnv("easy")
        >>> _ = env.reset(seed=0)
        >>> env.state.declared = True  # before any subgoal is done
        >>> settle_step(env.state, SubgoalTracker(env.subgoals))[1:], env.state.outcome
        ((0.0, True), 'wrong_declaration')
    """
    progress = tracker.update(state)
    if state.declared:
        state.outcome = "resolved" if progress["declare_resolved"] else "wrong_declaration"
    reward = 1.0 if state.outcome == "resolved" else 0.0
    return progress, reward, state.outcome != "in_progress"


def incident_info(state: Any, progress: dict[str, bool]) -> dict[str, Any]:
    """A step's info for an incident ``state`` (v0's or v1's): progress, outcome, harm, budget.

    An action is harmful when it made things worse or ended the episode badly
    (anything but a resolution or a spent budget).
    """
    return {
        "subgoals": progress,
        "outcome": state.outcome,
        "is_success": state.outcome == "resolved",
        "harmful": state.last_result == WORSE
        or state.outcome not in ("in_progress", "resolved", "slo_exhausted"),
        "action": state.last_action,
        "slo_budget": state.budget,
    }
