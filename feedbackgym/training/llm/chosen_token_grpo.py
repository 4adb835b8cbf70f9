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

Two fields a ``rollout_func`` may return besides TRL's reach the loss too
(:mod:`~.feedback_targets` writes them):

* ``token_weights``: per completion token, a factor on its GRPO advantage
  (the importance weights of replayed choices; 0 where a choice is distilled
  instead);
* ``teacher_options`` and ``teacher_logprobs``: at a choice, the tokens it
  could be and the teacher's log-probabilities of them. The loss adds
  ``distill_coef`` times the mean divergence, over those choices, between
  the student's and the teacher's distributions restricted to the options
  (TRL's SDPO ``compute_divergence``: ``distill_alpha`` 1 the reverse KL, 0
  the forward KL, between them the generalised Jensen-Shannon).

Example:
    >>> scored_positions(torch.tensor([[0, 1, 1, 0]]), completion_start=10)
    [[11, 12]]
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from trl import GRPOTrainer

with warnings.catch_warnings():  # the experimental package warns on import; one function is used
    warnings.simplefilter("ignore")
    from trl.experimental.sdpo.loss_utils import compute_divergence

__all__ = ["ChosenTokenGRPOTrainer", "option_divergence", "scored_positions"]

_ABSENT = -1e4
"""The log-probability a padded option gets (its probability is 0; no NaN in the divergence)."""


def scored_positions(mask: torch.Tensor, completion_start: int) -> list[list[int]]:
    """Each row's positions in the whole sequence that the loss reads.

    Args:
        mask: ``(batch, completion)``: 1 where a completion token carries loss.
        completion_start: Where the completion starts in the whole sequence.
    """
    return [
        [completion_start + int(j) for j in torch.nonzero(row, as_tuple=True)[0]] for row in mask
    ]


def option_divergence(
    student: torch.Tensor, teacher: torch.Tensor, valid: torch.Tensor, alpha: float
) -> torch.Tensor:
    """Per choice, the divergence of the student's from the teacher's distribution over its options.

    Args:
        student: ``(..., K)`` log-probabilities of each option.
        teacher: ``(..., K)`` the teacher's.
        valid: ``(..., K)`` which options exist (the rest is padding).
        alpha: TRL SDPO's ``distillation_alpha``.

    Example:
        >>> same = torch.log(torch.tensor([[0.2, 0.8, 0.5]]))
        >>> float(option_divergence(same, same, torch.tensor([[True, True, False]]), 1.0))
        0.0
    """
    student = student.masked_fill(~valid, _ABSENT)
    teacher = teacher.masked_fill(~valid, _ABSENT)
    student = student - torch.logsumexp(student, dim=-1, keepdim=True)
    teacher = teacher - torch.logsumexp(teacher, dim=-1, keepdim=True)
    return compute_divergence(student, teacher, alpha)


def _padded(rows: list[list[Any]], width: int, fill: Any, dtype: torch.dtype) -> torch.Tensor:
    """``rows`` right-padded with ``fill`` to ``width``."""
    return torch.tensor([list(row) + [fill] * (width - len(row)) for row in rows], dtype=dtype)


class ChosenTokenGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` that runs the output layer only at the loss's positions.

    Only the loss's own pass is narrowed; any other call (a reference model,
    old log-probabilities) is TRL's as is.

    Args:
        *args: ``GRPOTrainer``'s.
        distill_coef: The weight of the teachers' divergence in the loss.
        distill_alpha: Which divergence (see :func:`option_divergence`).
        **kwargs: ``GRPOTrainer``'s.
    """

    _scored: torch.Tensor | None = None
    _options: torch.Tensor | None = None
    _student: torch.Tensor | None = None

    def __init__(
        self, *args: Any, distill_coef: float = 1.0, distill_alpha: float = 1.0, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.distill_coef = distill_coef
        self.distill_alpha = distill_alpha
        self._extras: dict[str, Any] = {}
        rollout = self.rollout_func
        if rollout is not None:

            def keep_extras(prompts: list[Any], trainer: Any) -> dict[str, Any]:
                out = dict(rollout(prompts, trainer))
                self._extras = {
                    key: out.pop(key)
                    for key in ("token_weights", "teacher_options", "teacher_logprobs")
                    if key in out
                }
                return out

            self.rollout_func = keep_extras

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self._extras = {}
        output: dict[str, Any] = super()._generate_and_score_completions(inputs)
        extras, self._extras = self._extras, {}
        width = int(output["completion_ids"].shape[1])
        device = output["completion_ids"].device
        if "token_weights" in extras:
            weights = _padded(extras["token_weights"], width, 1.0, torch.float32).to(device)
            output["advantages"] = output["advantages"].reshape(-1, 1) * weights
        if "teacher_options" in extras:
            options = [[list(o) for o in row] for row in extras["teacher_options"]]
            size = max(1, max(len(o) for row in options for o in row))
            blank = [0] * size
            ids = [[o + [0] * (size - len(o)) for o in row] for row in options]
            valid = [[[1] * len(o) + [0] * (size - len(o)) for o in row] for row in options]
            logps = [
                [list(lp) + [_ABSENT] * (size - len(lp)) for lp in row]
                for row in extras["teacher_logprobs"]
            ]
            output["teacher_options"] = _padded(ids, width, blank, torch.long).to(device)
            output["teacher_valid"] = _padded(valid, width, [0] * size, torch.bool).to(device)
            output["teacher_logprobs"] = _padded(logps, width, [_ABSENT] * size, torch.float32).to(
                device
            )
        return output

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
        mask = inputs["completion_mask"]
        if "tool_mask" in inputs:
            mask = mask * inputs["tool_mask"]
        self._scored = mask
        self._options = inputs.get("teacher_options")
        try:
            loss = super()._compute_loss(model, inputs)
            student = self._student
        finally:
            self._scored = self._options = self._student = None
        if student is None:
            return loss
        valid = inputs["teacher_valid"]
        taught = valid.any(dim=-1)
        if not bool(taught.any()):
            return loss
        divergence = option_divergence(
            student, inputs["teacher_logprobs"], valid, self.distill_alpha
        )[taught].mean()
        mode = "train" if model.training else "eval"
        self._metrics[mode]["distill/divergence"].append(float(divergence.detach()))
        return loss + self.distill_coef * divergence

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
        options = self._options
        student = [] if options is None else [torch.zeros(options.shape[1:]) for _ in range(rows)]
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
            if options is not None:
                at = log_probs.gather(1, options[row, index])
                student[row] = student[row].to(at.device).index_put((index,), at)
        if options is not None:
            self._student = torch.stack(student)
        return (
            torch.stack(logps),
            torch.stack(entropies) if compute_entropy else None,
            None,
        )
