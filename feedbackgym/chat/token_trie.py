"""One prefix tree of token sequences, for every reply held to a set of choices.

The model server masks the next token's scores to those that continue a choice
(:class:`~feedbackgym.language.choice_mask.ChoiceMask`) and walks the choices'
tokens where they branch (:mod:`~feedbackgym.language.choice_decode`); the LLM
trainer samples an action's tokens the same way
(:func:`~feedbackgym.training.llm.action_choice.choose_action`). All three walk
a :class:`TokenTrie`.

Example:
    >>> trie = TokenTrie([[5, 6, 9], [5, 7, 9], [8, 9]], prefix_free=True)
    >>> sorted(trie.root.next), sorted(trie.node([5]).next), trie.node([8, 9]).choice
    ([5, 8], [6, 7], 2)
    >>> trie.depth(), trie.node([4]) is None
    (3, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from feedbackgym.errors import ConfigError

__all__ = ["TokenTrie", "TrieNode"]


@dataclass
class TrieNode:
    """A point in the tree: the tokens that go on from it, and the choice that ends at it.

    Attributes:
        next: The node after each token that continues some choice.
        choice: The index of the (first) choice whose tokens end here, or ``None``.
    """

    next: dict[int, TrieNode] = field(default_factory=dict)
    choice: int | None = None


class TokenTrie:
    """The choices' token sequences as a prefix tree.

    Args:
        sequences: ``sequences[i]`` is choice ``i``'s token ids.
        prefix_free: Require that no choice's tokens equal or begin another's (a
            reply then ends exactly where a choice does, as when each ends with
            the turn's stop).

    Raises:
        ValueError: There are no choices, or one has no tokens.
        ConfigError: ``prefix_free`` and two choices' tokens equal or begin one another.
    """

    def __init__(self, sequences: Sequence[Sequence[int]], *, prefix_free: bool = False) -> None:
        if not sequences or not all(sequences):
            raise ValueError("a token trie needs at least one choice, each of some tokens")
        self.root = TrieNode()
        for index, tokens in enumerate(sequences):
            node = self.root
            for token in tokens:
                if prefix_free and node.choice is not None:
                    raise ConfigError(f"choice {node.choice}'s tokens begin choice {index}'s")
                node = node.next.setdefault(int(token), TrieNode())
            if prefix_free and (node.next or node.choice is not None):
                raise ConfigError(f"choice {index}'s tokens are another choice's, or begin one")
            if node.choice is None:
                node.choice = index

    def node(self, tokens: Sequence[int]) -> TrieNode | None:
        """The node ``tokens`` lead to from the root, or ``None`` once they leave every choice."""
        node: TrieNode | None = self.root
        for token in tokens:
            if node is None:
                return None
            node = node.next.get(int(token))
        return node

    def depth(self) -> int:
        """The most tokens a choice has."""

        def below(node: TrieNode) -> int:
            return 1 + max((below(child) for child in node.next.values()), default=-1)

        return below(self.root)
