"""A reply held to a few strings, decoded by walking their tokens: one model pass a real choice.

llama-cpp-python samples each token through its Python sampler over the
whole vocabulary (Gemma's 262,144 tokens), a logits processor or not, and
runs the model once for every token of the reply. An agent's reply is one
of a few action strings, whose tokens branch at few places ("inspect" ·
" metrics" · " lb"): :func:`choice_completion` runs the model only where
the choices branch, reads the next token's scores among the allowed ones
(greedy at temperature 0, sampled from their softmax otherwise), and takes
every token that is the only continuation without asking the model (fed
with the next pass, or never when the reply ends there). The model's cache
keeps the longest prefix it shares with the last prompt, as llama-cpp-python's
own ``generate`` does, so a chat's next turn evaluates only its new tokens.

The reply is the same string the grammar path
(:class:`~feedbackgym.language.choice_mask.ChoiceMask`) gives at temperature
0, in llama-cpp-python's completion format.

Example:
    >>> last = lambda spelled, allowed: allowed[-1]
    >>> walk_choices(ChoiceMask([[5, 6], [5, 7, 8]], end=0), last)
    [5, 7, 8]
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from feedbackgym.language.choice_mask import ChoiceMask

__all__ = ["choice_completion", "prompt_tokens", "walk_choices"]


def walk_choices(mask: ChoiceMask, pick: Callable[[list[int], list[int]], int]) -> list[int]:
    """Spells one of ``mask``'s choices, asking ``pick`` only where they branch.

    Args:
        mask: The choices' token trie.
        pick: Given the tokens spelled so far and those allowed next
            (``mask.end`` among them where a choice may end), returns one of
            the allowed.

    Returns:
        The choice's tokens.
    """
    spelled: list[int] = []
    while True:
        allowed = mask.allowed(spelled)
        if allowed == [mask.end]:
            return spelled
        # the only continuation is taken without asking
        token = allowed[0] if len(allowed) == 1 else pick(spelled, allowed)
        if token == mask.end:
            return spelled
        spelled.append(token)


def prompt_tokens(llama: Any, prompt: str | list[int]) -> list[int] | None:
    """``prompt``'s tokens as llama-cpp-python's completion makes them (no suffix).

    ``None`` for a model whose tokenizer appends an end token to prompts
    (a case left to llama-cpp-python's own path).
    """
    if isinstance(prompt, list):
        return list(prompt)
    model = llama._model
    if model.add_eos_token() or model.token_sep() != -1:
        return None
    first = model.token_cls() if model.token_cls() != -1 else llama.token_bos()
    bos = [first] if model.add_bos_token() and first != -1 else []
    return bos + llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)


def _keep_cached_prefix(llama: Any, prompt: Sequence[int]) -> list[int]:
    """Drops the model's cache after what it shares with ``prompt``; returns the tokens to feed.

    At least the prompt's last token is always fed, so that its scores are fresh.
    """
    cached = llama._input_ids  # the tokens in the model's cache, in order
    shared = 0
    for a, b in zip(cached, prompt[:-1], strict=False):
        if a != b:
            break
        shared += 1
    if shared and llama._ctx.kv_cache_seq_rm(-1, shared, -1):
        llama.n_tokens = shared
    else:
        llama.reset()
    return list(prompt[llama.n_tokens :])


class _ModelPick:
    """Picks a branch's token by the model's scores, feeding it what it has not seen first."""

    def __init__(self, llama: Any, pending: list[int], temperature: float, seed: int | None):
        self.llama = llama
        self.pending = pending  # the prompt's tokens not in the model's cache
        self.fed = 0  # how many of the reply's tokens the model has seen
        self.temperature = temperature
        self.rng = np.random.default_rng(seed)

    def __call__(self, spelled: list[int], allowed: list[int]) -> int:
        self.llama.eval([*self.pending, *spelled[self.fed :]])
        self.pending, self.fed = [], len(spelled)
        logits = self.llama._ctx.get_logits_ith(-1)
        scores = np.ctypeslib.as_array(logits, shape=(self.llama.n_vocab(),))
        chosen = scores[allowed].astype(np.float64)
        if self.temperature <= 0:
            return allowed[int(np.argmax(chosen))]
        weights = np.exp((chosen - chosen.max()) / self.temperature)
        return allowed[int(self.rng.choice(len(allowed), p=weights / weights.sum()))]


def choice_completion(
    llama: Any,
    prompt: Sequence[int],
    choices: dict[tuple[int, ...], str],
    *,
    temperature: float,
    seed: int | None,
    model: str,
) -> dict[str, Any]:
    """One of ``choices`` as the reply to ``prompt``, in llama-cpp-python's completion format.

    Args:
        llama: A ``llama_cpp.Llama``.
        prompt: The prompt's tokens.
        choices: Each choice's tokens, and its text.
        temperature: 0 for the highest-scoring token at each branch, else
            sampled from the allowed tokens' softmax at this temperature.
        seed: The sampler's seed (``None``: a fresh one).
        model: The reply's ``model`` field.
    """
    mask = ChoiceMask(list(choices), end=llama.token_eos())
    tokens = walk_choices(
        mask, _ModelPick(llama, _keep_cached_prefix(llama, prompt), temperature, seed)
    )
    text = choices.get(tuple(tokens), "")
    return {
        "id": f"cmpl-{uuid.uuid4()}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": len(prompt),
            "completion_tokens": len(tokens),
            "total_tokens": len(prompt) + len(tokens),
        },
    }
