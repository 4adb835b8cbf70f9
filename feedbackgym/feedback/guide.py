"""``SubgoalGuide``: compares the state's subgoal progress with the library and says what next."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from feedbackgym.core import Hint, Subgoal, as_clause, next_subgoal_ids
from feedbackgym.feedback.generators import GuideRequest

__all__ = ["SubgoalGuide", "hint_for"]


def hint_for(library: Sequence[Subgoal], ids: Sequence[str], step: int) -> Hint:
    """The hint naming subgoals ``ids`` of ``library`` (first one first) at ``step``.

    Descriptions, library positions and the first subgoal's targets and kind
    come from the library, so every guide's hints fill the vector channel alike.

    Raises:
        KeyError: An id is not in the library.

    Example:
        >>> lib = (Subgoal("key", "pick up the key", bool, targets=("key",)),
        ...        Subgoal("door", "open the door", bool, ("key",)))
        >>> hint = hint_for(lib, ["door"], step=4)
        >>> hint.text, hint.positions
        ('Hint: first open the door', (1,))
    """
    by_id = {sg.id: (i, sg) for i, sg in enumerate(library)}
    chosen = [by_id[i] for i in ids]
    first = chosen[0][1] if chosen else None
    return Hint(
        tuple(ids),
        tuple(sg.description for _, sg in chosen),
        step,
        tuple(i for i, _ in chosen),
        first.targets if first is not None else (),
        first.kind if first is not None else "",
    )


class SubgoalGuide:
    """Names the next subgoals to reach ("first A, then B").

    It reads the library it is given (the wrappers disclose it at the hint
    level: :mod:`feedbackgym.feedback.levels`). Only at the ``action`` level,
    an ablation, does it name an action: the request's
    ``options["expert_action"]`` comes first in the hint.

    A :class:`~feedbackgym.feedback.generators.Guide`; it answers in
    microseconds, so the wrappers call it in the step (``inline``).

    Args:
        lookahead: How many subgoals a hint names, unless the request's
            ``options["lookahead"]`` says otherwise.

    Example:
        >>> lib = (Subgoal("key", "pick up the key", bool),
        ...        Subgoal("door", "open the door", bool, ("key",)))
        >>> SubgoalGuide().hint(GuideRequest(lib, {"key": False, "door": False}, step=0)).text
        'Hint: first pick up the key, then open the door'
    """

    inline = True
    """Called in the step: it answers in microseconds."""

    def __init__(self, lookahead: int = 2) -> None:
        if lookahead < 1:
            raise ValueError(f"lookahead must be at least 1, got {lookahead}")
        self.lookahead = lookahead
        self._last_key: tuple[Any, ...] | None = None
        self._last_hint = Hint((), (), 0)

    def hint(self, request: GuideRequest) -> Hint:
        """Returns the hint for the request's progress at its step."""
        lookahead = int(request.options.get("lookahead", self.lookahead))
        if lookahead < 1:
            raise ValueError(f"lookahead must be at least 1, got {lookahead}")
        key = (request.library, tuple(request.progress.items()), lookahead)
        if key != self._last_key:  # progress changes a few times an episode: reuse the choice
            ids = next_subgoal_ids(request.library, request.progress)[:lookahead]
            self._last_key, self._last_hint = key, hint_for(request.library, ids, request.step)
        h = self._last_hint
        texts = h.texts
        expert = request.options.get("expert_action")
        if request.options.get("level") == "action" and expert is not None and texts:
            texts = (f"take the action '{expert}' to {as_clause(texts[0])}", *texts[1:])
        return Hint(h.subgoal_ids, texts, request.step, h.positions, h.targets, h.kind)

    def __repr__(self) -> str:
        return f"SubgoalGuide(lookahead={self.lookahead})"
