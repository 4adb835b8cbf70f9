"""What a hint or a review may disclose: the subgoal library as a generator sees it at a level.

The wrappers pass every generator (built-in, LLM, served) the library through
:func:`disclose`, so no generator can name what the level hides:

* ``"phase"`` (the default): each subgoal reads as its ``phase`` words (the
  kind of step) and keeps only the ``targets`` the agent has observed (the
  env's ``observed_targets``: for OpsIncident, services with an alert, an
  inspected metric or log line, or a log line that blames them). An env
  may be stricter per kind of subgoal with ``observed_targets_by_kind``
  (OpsIncident-v2: a root-cause step names a service only once its own
  logs show the fault). A subgoal without ``phase`` words keeps its
  description (it reveals nothing hidden).
* ``"target"``: the library as the env wrote it (it names the hidden root).
* ``"action"``: as ``"target"``; the wrappers add the expert's next action.

Example:
    >>> from feedbackgym.core import Subgoal
    >>> lib = (Subgoal("fix", "Restart db.", bool, targets=("db",), phase="Fix the cause."),)
    >>> disclose(lib, "phase", observed=())[0].description
    'Fix the cause.'
    >>> disclose(lib, "phase", observed=("db",))[0].description
    'Fix the cause (seen: db).'
    >>> disclose(lib, "target", observed=())[0].description
    'Restart db.'
    >>> strict = ObservedTargets(("db",), (("", ()),))  # "" kind: nothing seen qualifies
    >>> disclose(lib, "phase", observed=strict)[0].description
    'Fix the cause.'
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from feedbackgym.core import HINT_LEVELS, Subgoal

__all__ = ["ObservedTargets", "check_level", "disclose", "observed_targets"]


@dataclass(frozen=True)
class ObservedTargets:
    """What the agent has observed, overall and for each kind of subgoal.

    Attributes:
        names: Every service (or entity) the agent has seen a symptom of.
        by_kind: ``(kind, names)`` pairs: a subgoal of that kind names only
            these; a kind not listed names any of ``names``.
    """

    names: tuple[str, ...]
    by_kind: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def for_kind(self, kind: str) -> tuple[str, ...]:
        """The names a subgoal of ``kind`` may name."""
        return dict(self.by_kind).get(kind, self.names)


def check_level(level: str) -> str:
    """Returns ``level`` if it is one of :data:`~feedbackgym.core.HINT_LEVELS`.

    Raises:
        ValueError: It is not, naming the valid levels.
    """
    if level not in HINT_LEVELS:
        raise ValueError(f"level must be one of {HINT_LEVELS}, got {level!r}")
    return level


def disclose(
    library: Sequence[Subgoal], level: str, observed: Collection[str] | ObservedTargets | None
) -> tuple[Subgoal, ...]:
    """The library as generators may see it at ``level``.

    Args:
        library: The episode's subgoal library.
        level: One of :data:`~feedbackgym.core.HINT_LEVELS`.
        observed: The targets the agent has observed (overall, or an
            :class:`ObservedTargets` by kind), or ``None`` when the env does
            not say (then every target counts as observed).
    """
    if check_level(level) != "phase":
        return tuple(library)
    return tuple(_phase(sg, observed) for sg in library)


def _phase(subgoal: Subgoal, observed: Collection[str] | ObservedTargets | None) -> Subgoal:
    if isinstance(observed, ObservedTargets):
        observed = observed.for_kind(subgoal.kind)
    seen = tuple(t for t in subgoal.targets if observed is None or t in observed)
    if not subgoal.phase:
        return subgoal if seen == subgoal.targets else replace(subgoal, targets=seen)
    words = subgoal.phase if not seen else f"{subgoal.phase.rstrip('.')} (seen: {', '.join(seen)})."
    return replace(subgoal, description=words, targets=seen)


def observed_targets(env: Any) -> tuple[str, ...] | ObservedTargets | None:
    """The env's ``observed_targets`` (through its wrappers), or ``None`` if it has none.

    With ``observed_targets_by_kind`` too (a mapping kind -> names), an
    :class:`ObservedTargets` holding both.
    """
    try:
        names = tuple(env.get_wrapper_attr("observed_targets"))
    except AttributeError:
        return None
    try:
        by_kind = env.get_wrapper_attr("observed_targets_by_kind")
    except AttributeError:
        return names
    return ObservedTargets(names, tuple((k, tuple(v)) for k, v in sorted(by_kind.items())))
