"""A logits processor that lets a generation spell one of a few strings, token by token.

llama.cpp's grammar sampler checks every token of the vocabulary against the
grammar at every step; with Gemma's 262,144 tokens that made one action reply
take 3-8 s on 2 cores. The replies the agent asks for are one of the env's
actions, a plain alternation of strings (:func:`~feedbackgym.chat.choice_grammar`),
so the model server (:mod:`~feedbackgym.language.llama_process`) applies such a
grammar as a :class:`ChoiceMask` instead: a trie of each choice's tokens, and
at each step every token that does not continue a choice set to ``-inf``. The
replies it allows are the same strings (each spelled by its own tokenization),
at the cost of one array fill a token.

Example:
    >>> import numpy as np
    >>> mask = ChoiceMask([[5, 6], [5, 7, 8]], end=0)
    >>> scores = np.zeros(10, dtype=np.float32)
    >>> prompt = np.array([1, 2, 3])
    >>> np.flatnonzero(mask(prompt, scores) > -np.inf).tolist()  # the first token
    [5]
    >>> np.flatnonzero(mask(np.array([1, 2, 3, 5]), scores) > -np.inf).tolist()
    [6, 7]
    >>> np.flatnonzero(mask(np.array([1, 2, 3, 5, 6]), scores) > -np.inf).tolist()  # a choice
    [0]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from feedbackgym.chat.token_trie import TokenTrie

__all__ = ["ChoiceMask"]


class ChoiceMask:
    """Masks a model's next-token scores to those that continue one of ``choices``.

    Called with every token so far and the next token's scores (llama-cpp-python's
    ``LogitsProcessor``); the first call's tokens are taken to be the prompt.
    Once a whole choice is spelled, ``end`` (the end-of-generation token) is
    allowed, and only it when no longer choice goes on from there.

    Args:
        choices: Each choice's token ids.
        end: The token that ends the generation.

    Raises:
        ValueError: There are no choices, or one has no tokens.
    """

    def __init__(self, choices: Sequence[Sequence[int]], end: int) -> None:
        self.end = end
        self.trie = TokenTrie(choices)
        self._prompt_length: int | None = None

    def allowed(self, generated: Sequence[int]) -> list[int]:
        """The tokens that may follow ``generated`` (only ``end`` once off every choice)."""
        node = self.trie.node(generated)
        if node is None:
            return [self.end]
        return [*node.next, *([self.end] if node.choice is not None else [])]

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """``scores`` with every token that continues no choice at ``-inf``."""
        if self._prompt_length is None:
            self._prompt_length = len(input_ids)
        allowed = self.allowed(input_ids[self._prompt_length :].tolist())
        masked = np.full_like(scores, -np.inf)
        masked[allowed] = scores[allowed]
        return masked
