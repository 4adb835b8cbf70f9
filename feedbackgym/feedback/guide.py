"""``SubgoalGuide``: compares the state's subgoal progress with the library and says what next."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from feedbackgym.core import Hint, Subgoal, next_subgoal_ids
from feedbackgym.feedback.generators import GuideRequest

__all__ = ["SubgoalGuide"]


class SubgoalGuide:
    """Names the next subgoals to reach ("first A, then B"). Never an action.

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
        self._last_choice: tuple[Any, ...] = ()

    def hint(self, request: GuideRequest) -> Hint:
        """Returns the hint for the request's progress at its step."""
        lookahead = int(request.options.get("lookahead", self.lookahead))
        key = (request.library, tuple(request.progress.items()), lookahead)
        if key != self._last_key:  # progress changes a few times an episode: reuse the choice
            choice = self._choose(request.library, request.progress, lookahead)
            self._last_key, self._last_choice = key, choice
        ids, texts, positions, targets, kind = self._last_choice
        return Hint(ids, texts, request.step, positions, targets, kind)

    def _choose(
        self, library: Sequence[Subgoal], progress: Mapping[str, bool], lookahead: int
    ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...], tuple[str, ...], str]:
        if lookahead < 1:
            raise ValueError(f"lookahead must be at least 1, got {lookahead}")
        ids = next_subgoal_ids(library, progress)[:lookahead]
        by_id = {sg.id: (i, sg) for i, sg in enumerate(library)}
        first = by_id[ids[0]][1] if ids else None
        return (
            tuple(ids),
            tuple(by_id[i][1].description for i in ids),
            tuple(by_id[i][0] for i in ids),
            first.targets if first is not None else (),
            first.kind if first is not None else "",
        )

    def __repr__(self) -> str:
        return f"SubgoalGuide(lookahead={self.lookahead})"
