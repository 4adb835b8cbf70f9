"""``SubgoalGuide``: compares the state's subgoal progress with the library and says what next."""

from __future__ import annotations

from collections.abc import Sequence

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

    def hint(self, library: Sequence[Subgoal], progress: dict[str, bool], step: int) -> Hint:
        """Returns the hint for a state with ``progress`` at ``step``.

        Args:
            library: The episode's subgoal library.
            progress: Which subgoals are done (``info["subgoals"]``).
            step: The episode step the hint is given at.
        """
        ids = next_subgoal_ids(library, progress)[: self.lookahead]
        by_id = {sg.id: (i, sg) for i, sg in enumerate(library)}
        return Hint(
            subgoal_ids=tuple(ids),
            texts=tuple(by_id[i][1].description for i in ids),
            step=step,
            positions=tuple(by_id[i][0] for i in ids),
            targets=by_id[ids[0]][1].targets if ids else (),
            kind=by_id[ids[0]][1].kind if ids else "",
        )

    def __repr__(self) -> str:
        return f"SubgoalGuide(lookahead={self.lookahead})"
