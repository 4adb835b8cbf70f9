"""``IncidentEnvV2`` (OpsIncident-v2): v1's incidents on disjoint systems, with nothing to read off.

v2 is v1 (:class:`~feedbackgym.envs.incident.env.IncidentEnv`: the same
simulator, actions, observation and presets) with four changes:

* its split rule (:mod:`~feedbackgym.envs.incident.disjoint`): each split draws
  its service maps from a stream of its own and keeps to its own maps and
  solutions, so no test incident runs on a train system or is solved by a
  train incident's actions, up to names;
* its ``info``: an opaque :data:`~feedbackgym.protocol.TASK_ID` instead of
  v1's ``incident`` key, which named the fault; the key is read on the
  evaluator's side through :func:`feedbackgym.protocol.task_key`;
* its subgoal library: the same ids for every incident of a preset (no
  ``trace_k`` that exists only when the trail has hops);
* its ``phase`` hints: words that never call a service the end of the trail,
  and services named only once they showed a symptom of the kind the step is
  about (:attr:`IncidentEnvV2.observed_targets_by_kind`).

Example:
    >>> env = IncidentEnvV2("easy", split="test")
    >>> _, info = env.reset(seed=0)
    >>> sorted(info["subgoals"])
    ['declare_resolved', 'find_root_cause_1', 'mitigate_1', 'triage', 'verify_recovery']
    >>> "incident" in info, env.task_key().startswith("easy/")
    (False, True)
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any

from feedbackgym.core import Subgoal
from feedbackgym.envs.incident.disjoint import draw_split_incident
from feedbackgym.envs.incident.env import IncidentEnv
from feedbackgym.envs.incident.scenario import IncidentState
from feedbackgym.envs.incident.subgoals import build_subgoals
from feedbackgym.envs.ops.env import incident_info
from feedbackgym.protocol import TASK_ID, TASK_ID_KEY_VARIABLE

__all__ = ["IncidentEnvV2", "opaque_task_id"]

_DEFAULT_TASK_ID_KEY = b"feedbackgym/OpsIncident-v2 task id"


def opaque_task_id(key: str) -> str:
    """A task key's opaque id: 16 hex digits of an HMAC of it.

    Equal for two tasks exactly when their keys are equal (up to a 64-bit
    collision). Keyed by ``$FEEDBACKGYM_TASK_ID_KEY`` when set (``serve-env``
    sets a random one per server), so that no client can test guesses of the
    key against the id; with the public default, ids are the same in every
    process, which datasets compared across machines need.

    Example:
        >>> key = "easy/disk_full@database/0"
        >>> opaque_task_id(key) == opaque_task_id(key), key in opaque_task_id(key)
        (True, False)
    """
    secret = os.environ.get(TASK_ID_KEY_VARIABLE, "").encode() or _DEFAULT_TASK_ID_KEY
    return hmac.new(secret, key.encode(), hashlib.sha256).hexdigest()[:16]


class IncidentEnvV2(IncidentEnv):
    """OpsIncident-v2: v1's incidents, a test split of new systems and new solutions.

    Everything in :class:`~feedbackgym.envs.incident.env.IncidentEnv`'s
    description holds (actions, observations, rewards, episode end, arguments),
    except what follows.

    ## Splits

    ``split="train"`` (default) or ``"test"``. On top of v1's held-out
    (fault type, topology shape) pairs, a split draws its topologies from a
    stream of its own and keeps only its own service maps (names, roles and
    call edges) and its own solutions (the incident with each fault replaced
    by what fixes it): no test map equals a train map, and no test incident
    is solved by a train incident's actions up to names
    (:mod:`~feedbackgym.envs.incident.disjoint`). Every seed is valid in both.

    ## Info

    ``info["task_id"]`` is an opaque id, equal for two seeds exactly when they
    pose the same problem; :meth:`task_key` (through
    :func:`feedbackgym.protocol.task_key`) gives the key itself, on the
    evaluator's side. ``info["subgoals"]`` has the same ids for every
    incident of a preset; its progress flags, like the reward, may depend on
    the hidden cause (:data:`~feedbackgym.protocol.REWARD_FIELDS`).

    ## Hints

    At the ``phase`` level, triage names the services that alerted, and the
    root-cause, mitigation and recovery steps name only services whose own
    logs showed a root-cause signal (:attr:`observed_targets_by_kind`).
    :attr:`observed_targets` counts an alert, an off reading or a blaming log
    line, not a healthy reading.

    ## Version History

    * v2: Disjoint systems and solutions in the test split, an opaque task
      id, one subgoal library per preset, hints from the symptoms shown.
    * v1: Procedural topologies, held-out splits, four presets (v0 stays registered).
    """

    _keyed = ""
    """The task key whose opaque id :attr:`_task_id` holds (computed once an episode)."""
    _task_id = ""

    @property
    def observed_targets(self) -> tuple[str, ...]:
        """Services that showed a symptom: an alert, an off reading, or a log line blaming them."""
        state, _ = self._require_episode()
        shown = state.alerts_seen | state.unhealthy_seen | state.blamed_seen
        return tuple(state.name(s) for s in sorted(shown))

    @property
    def observed_targets_by_kind(self) -> dict[str, tuple[str, ...]]:
        """What a ``phase`` hint of each kind may name.

        Triage names services that alerted; the root-cause, mitigation and
        recovery steps name services whose own logs showed a root-cause signal.
        """
        state, _ = self._require_episode()
        alerted = tuple(state.name(s) for s in sorted(state.alerts_seen))
        causes = tuple(state.name(s) for s in sorted(state.cause_seen))
        return {
            "triage": alerted,
            "find_root_cause": causes,
            "mitigate": causes,
            "verify_recovery": causes,
        }

    def _draw_incident(self) -> IncidentState:
        return draw_split_incident(self.preset_name, self.preset, self.split, self.np_random)

    def _subgoal_library(self, state: IncidentState) -> list[Subgoal]:
        return build_subgoals(state, trace_step=False)

    def _info(self, progress: dict[str, bool]) -> dict[str, Any]:
        state = self._state
        assert state is not None
        if state.incident != self._keyed:
            self._keyed, self._task_id = state.incident, opaque_task_id(state.incident)
        return {**incident_info(state, progress), TASK_ID: self._task_id}
