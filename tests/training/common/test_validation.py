"""Validation: the envs played in lockstep give each seed the episode one env alone gives it."""

import numpy as np
import pytest

import feedbackgym
from feedbackgym.protocol import FeedbackState
from feedbackgym.training.common.trainer_view import TrainerView
from feedbackgym.training.common.validation import evaluate_policy, one_at_a_time

SEEDS = [10_000_000 + k for k in range(5)]
STATE = FeedbackState(phase="none", guide_weight=0.0, review_weight=0.0)


def _policy(obs):
    """A deterministic policy that reads its observation (a fixed projection's argmax)."""
    weights = np.random.default_rng(0).normal(size=(obs.shape[0], 70))
    return int(np.argmax(obs @ weights))


@pytest.mark.parametrize("copies", [2, 3, 8])
def test_envs_in_lockstep_give_each_seed_the_episode_one_env_gives_it(copies):
    def envs(count):
        return [
            TrainerView(feedbackgym.make("feedbackgym/OpsIncidentEasy-v0")) for _ in range(count)
        ]

    alone = evaluate_policy(envs(1), one_at_a_time(_policy), SEEDS, STATE)
    calls = []

    def batched(observations):
        calls.append(len(observations))
        return [_policy(obs) for obs in observations]

    together = evaluate_policy(envs(copies), batched, SEEDS, STATE)
    assert together == alone
    assert max(calls) == min(copies, len(SEEDS))  # one call a step for every env in play
    assert sum(calls) == round(alone.mean_length * len(SEEDS))


def test_a_stack_with_hints_is_validated_shown_and_masked_on_every_copy():
    from feedbackgym.config import FeedbackConfig
    from feedbackgym.training.common.arms import arm_config

    config = arm_config("guide", FeedbackConfig(), 10)
    envs = [feedbackgym.make("feedbackgym/OpsIncidentEasy-v0", config) for _ in range(2)]
    hinted = []

    def policy(observations):
        hinted.extend(bool(obs["hint_present"][0]) for obs in observations)
        return [0 for _ in observations]

    guided = FeedbackState(phase="guide", guide_weight=1.0, review_weight=0.0)
    evaluation = evaluate_policy(envs, policy, SEEDS[:3], guided)
    assert 0 <= evaluation.success_unguided <= 1
    played = len(hinted) // 2  # shown, then masked: the same episodes (a fixed policy)
    assert any(hinted[:played]) and not any(hinted[played:])
