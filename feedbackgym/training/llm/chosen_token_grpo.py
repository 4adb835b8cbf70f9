"""TRL's GRPO with the output layer only where the model chose a token.

An episode is one sequence: the env's turns and the model's actions. TRL
scores every completion position through the output layer, and the
packaged model's is 262,144 words wide: over a 500-token episode of which
20 tokens are the model's choices, that layer costs more than the rest of
the model, for positions whose loss is masked out anyway (``tool_mask`` 0).
:class:`ChosenTokenGRPOTrainer` computes log-probabilities and entropies
only at the positions that carry loss (``logits_to_keep`` as an index
tensor, as the warm-up's loss does) and leaves the others 0, which the
masked loss never reads. Everything else is TRL's.

Example:
    >>> scored_positions(torch.tensor([[0, 1, 1, 0]]), completion_start=10)
    [[11, 12]]
"""

from __future__ import annotations

from typing import Any

import torch
from trl import GRPOTrainer

__all__ = ["ChosenTokenGRPOTrainer", "scored_positions"]


def scored_positions(mask: torch.Tensor, completion_start: int) -> list[list[int]]:
    """Each row's positions in the whole sequence that the loss reads.

    Args:
        mask: ``(batch, completion)``: 1 where a completion token carries loss.
        completion_start: Where the completion starts in the whole sequence.
    """
    return [
        [completion_start + int(j) for j in torch.nonzero(row, as_tuple=True)[0]] for row in mask
    ]


class ChosenTokenGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` that runs the output layer only at the loss's positions.

    Only the loss's own pass is narrowed; any other call (a reference model,
    old log-probabilities) is TRL's as is.
    """

    _scored: torch.Tensor | None = None

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
        mask = inputs["completion_mask"]
        if "tool_mask" in inputs:
            mask = mask * inputs["tool_mask"]
        self._scored = mask
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._scored = None

    def _get_per_token_logps_and_entropies(
        self,
        model: Any,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        logits_to_keep: int,
        batch_size: int | None = None,
        compute_entropy: bool = False,
        compute_aux_loss: bool = False,
        **extra: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        scored = self._scored
        if scored is None or compute_aux_loss or any(v is not None for v in extra.values()):
            return super()._get_per_token_logps_and_entropies(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size=batch_size,
                compute_entropy=compute_entropy,
                compute_aux_loss=compute_aux_loss,
                **extra,
            )
        start = input_ids.size(1) - logits_to_keep
        rows = input_ids.size(0)
        logps = [torch.zeros(logits_to_keep, device=input_ids.device) for _ in range(rows)]
        entropies = [torch.zeros(logits_to_keep, device=input_ids.device) for _ in range(rows)]
        for row, positions in enumerate(scored_positions(scored, start)):
            if not positions:
                continue
            present = torch.nonzero(attention_mask[row], as_tuple=True)[0]  # padding either side
            packed = {int(p): i for i, p in enumerate(present)}
            ids = input_ids[row, present][None]
            keep = torch.tensor([packed[p] - 1 for p in positions], device=input_ids.device)
            with self.accelerator.autocast():
                logits = model(input_ids=ids, logits_to_keep=keep, use_cache=False).logits[0]
            log_probs = torch.log_softmax(logits.float() / self.temperature, dim=-1)
            targets = input_ids[row, positions]
            index = torch.tensor([p - start for p in positions], device=input_ids.device)
            chosen = log_probs.gather(1, targets[:, None])[:, 0]
            logps[row] = logps[row].index_put((index,), chosen)
            if compute_entropy:
                entropy = -(log_probs.exp() * log_probs).sum(-1)
                entropies[row] = entropies[row].index_put((index,), entropy.detach())
        return (
            torch.stack(logps),
            torch.stack(entropies) if compute_entropy else None,
            None,
        )
