"""The prompt window and the choice mask, on their own (no server)."""

import numpy as np
import pytest

from feedbackgym.chat import choice_grammar, choices_of_grammar
from feedbackgym.language.choice_mask import ChoiceMask
from feedbackgym.language.prompt_window import ByteBound, PromptTooLong, PromptWindow


def _episode(window, steps, observation="x" * 40):
    chat = [{"role": "system", "content": "s" * 200}]
    prompts = []
    for step in range(steps):
        chat.append({"role": "user", "content": f"{step} {observation}"})
        prompts.append(window.fit(chat))
        chat.append({"role": "assistant", "content": "wait"})
    return chat, prompts


def test_prompts_stay_within_the_budget_however_long_the_episode():
    window = PromptWindow(1000, ByteBound(), refill=0.5)
    chat, prompts = _episode(window, 500)
    assert max(window.size(p) for p in prompts) <= 1000
    for step, prompt in enumerate(prompts):
        assert prompt[0] == chat[0] and prompt[-1] == chat[1 + 2 * step]  # system, current step
        roles = [m["role"] for m in prompt[1:]]
        assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"]
    # the prompt's beginning changes only when steps are dropped, and then not for a while
    starts = [p[1]["content"] for p in prompts]
    changes = sum(a != b for a, b in zip(starts, starts[1:], strict=False))
    assert changes == window.trims and 500 / changes > 5


def test_a_system_message_too_large_for_the_budget_is_a_clear_error():
    window = PromptWindow(100, ByteBound())
    with pytest.raises(PromptTooLong, match="do not fit the prompt budget of 100 tokens"):
        _episode(window, 1)


def test_choice_grammars_round_trip_and_other_grammars_are_left_alone():
    choices = ["wait", 'fill #q with "a\\b"', "tab\there", "line\nbreak"]
    assert choices_of_grammar(choice_grammar(choices)) == choices
    assert choices_of_grammar('root ::= "a" | [0-9]') is None
    assert choices_of_grammar('root ::= "a" "b"') is None


def test_the_choice_mask_spells_only_whole_choices():
    mask = ChoiceMask([[4, 5], [4, 5, 6], [7]], end=1)
    assert mask.allowed([]) == [4, 7]
    assert sorted(mask.allowed([4, 5])) == [1, 6]  # a choice, and a longer one goes on
    assert mask.allowed([4, 5, 6]) == [1] and mask.allowed([9]) == [1]
    scores = np.arange(10, dtype=np.float32)
    first = mask(np.array([0, 0, 0]), scores)  # the first call's tokens are the prompt
    assert np.isfinite(first).nonzero()[0].tolist() == [4, 7]
    assert np.isfinite(mask(np.array([0, 0, 0, 7]), scores)).nonzero()[0].tolist() == [1]
