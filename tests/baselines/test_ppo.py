import math

import pytest

from feedbackgym.baselines.ppo import PPOConfig, tokenize, train
from feedbackgym.schedules import ARMS


def _config(arm, **kwargs):
    return PPOConfig(
        env_id="feedbackgym/OpsIncidentEasy-v0",
        arm=arm,
        total_timesteps=256,
        num_envs=2,
        num_steps=64,
        hidden=16,
        device="cpu",
        **kwargs,
    )


@pytest.mark.parametrize("arm", ARMS)
def test_each_arm_trains_and_follows_the_schedule(arm):
    rounds = []
    agent, history = train(_config(arm), on_round=lambda r, m: rounds.append(r))
    assert rounds == [0, 1] and len(history) == 2
    assert all(math.isfinite(h["loss"]) for h in history)
    assert all(h["steps_per_s"] > 0 and h["rss_mb"] > 0 and h["cpu_percent"] > 0 for h in history)
    if arm == "guide-then-review":
        assert history[0]["guide_weight"] == 1.0
    if arm == "review-then-guide":
        assert history[0]["review_weight"] == 1.0


def test_text_observation_and_async_workers():
    config = _config("guide", use_text=True, async_envs=True, env_kwargs={"obs_mode": "both"})
    agent, history = train(config)
    assert agent.use_text and len(history) == 2


def test_behaviour_cloning_option_and_tokenizer():
    agent, _ = train(_config("sparse", bc_episodes=5))
    assert agent is not None
    tokens = tokenize(["ab", "é" * 3], 4)
    assert tokens.shape == (2, 4) and tokens[0, 2] == 0 and (tokens[1, :3] > 0).all()
