"""The LLM trainer's loss pass: the output layer only at the model's choices, as TRL computes it."""

import contextlib
import types

import pytest

pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from feedbackgym.training.llm.chosen_token_grpo import (  # noqa: E402
    ChosenTokenGRPOTrainer,
    scored_positions,
)
from tests.training.llm.tiny_lm import save_tiny_model  # noqa: E402


def _pass(model, scored, temperature=1.5):
    trainer = object.__new__(ChosenTokenGRPOTrainer)
    trainer.temperature = temperature
    trainer.accelerator = types.SimpleNamespace(autocast=contextlib.nullcontext)
    trainer._scored = scored
    return trainer


def test_scored_positions_are_the_mask_ones_offset_by_the_prompt():
    mask = torch.tensor([[0, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])
    assert scored_positions(mask, completion_start=3) == [[4, 5], [3], []]


def test_log_probs_and_entropies_at_the_choices_equal_the_full_output_layers(tmp_path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(save_tiny_model(tmp_path, init_range=0.5))
    # a left-padded prompt of 4 and a right-padded completion of 6, as TRL lays them out
    input_ids = torch.tensor(
        [[0, 2, 7, 8, 9, 10, 11, 12, 13, 14], [2, 7, 8, 9, 15, 16, 17, 0, 0, 0]]
    )
    attention = (input_ids != 0).long()
    scored = torch.tensor([[0, 1, 0, 1, 1, 0], [1, 0, 1, 0, 0, 0]])
    temperature = 1.5

    logps, entropies, aux = _pass(model, scored, temperature)._get_per_token_logps_and_entropies(
        model, input_ids, attention, logits_to_keep=6, compute_entropy=True
    )

    assert aux is None and logps.shape == entropies.shape == (2, 6)
    for row in range(2):
        present = attention[row].bool()
        ids = input_ids[row, present]
        full = torch.log_softmax(model(input_ids=ids[None]).logits[0] / temperature, dim=-1)
        offset = int((~present[:4]).sum())  # the row's left padding
        for j in range(6):
            if not scored[row, j]:
                assert logps[row, j] == 0 and entropies[row, j] == 0
                continue
            at = 4 + j - offset  # the token's place in the unpadded sequence
            want = full[at - 1, ids[at]]
            assert torch.allclose(logps[row, j], want, atol=1e-5)
            entropy = -(full[at - 1].exp() * full[at - 1]).sum()
            assert torch.allclose(entropies[row, j], entropy, atol=1e-4)


def test_the_log_probs_carry_gradients_to_the_model(tmp_path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(save_tiny_model(tmp_path))
    input_ids = torch.tensor([[2, 7, 8, 9, 10]])
    scored = torch.tensor([[0, 1]])
    logps, _, _ = _pass(model, scored)._get_per_token_logps_and_entropies(
        model, input_ids, torch.ones_like(input_ids), logits_to_keep=2
    )
    logps.sum().backward()
    assert model.model.embed_tokens.weight.grad.abs().sum() > 0
