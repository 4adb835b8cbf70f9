"""``SubgoalGuide``: compares the state's subgoal progress with the library and says what next."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from feedbackgym.core import Hint, Subgoal, next_subgoal_ids

__all__ = ["SubgoalGuide"]


class SubgoalGuide:
    """Names the next subgoals to reach ("first A, then B"). Never an action.

    Args:
        lookahead: How many subgoals a hint names.

    Example:
        >>> lib = [Subgoal("key", "pick up the key", bool),
        ...        Subgoal("door", "open the door", bool, ("key",))]
        >>> SubgoalGuide(lookahead=2).hint(lib, {"key": False, "door": False}, step=0).text
        'Hint: first pick up the key, then open the door'
    """

    def __init__(self, lookahead: int = 2) -> None:
        if lookahead < 1:
            raise ValueError(f"lookahead must be at least 1, got {lookahead}")
        self.lookahead = lookahead
        self._last_key: tuple[tuple[Subgoal, ...], tuple[tuple[str, bool], ...]] | None = None
        self._last_choice: tuple[Any, ...] = ()

    def hint(self, library: Sequence[Subgoal], progress: dict[str, bool], step: int) -> Hint:
        """Returns the hint for a state with ``progress`` at ``step``.

        Args:
            library: The episode's subgoal library.
            progress: Which subgoals are done (``info["subgoals"]``).
            step: The episode step the hint is given at.
        """
        key = (tuple(library), tuple(progress.items()))
        if key != self._last_key:  # progress changes a few times an episode: reuse the choice
            self._last_key, self._last_choice = key, self._choose(library, progress)
        ids, texts, positions, targets, kind = self._last_choice
        return Hint(ids, texts, step, positions, targets, kind)

    def _choose(
        self, library: Sequence[Subgoal], progress: dict[str, bool]
    ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...], tuple[str, ...], str]:
        ids = next_subgoal_ids(library, progress)[: self.lookahead]
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
