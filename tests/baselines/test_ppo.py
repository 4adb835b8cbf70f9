import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from feedbackgym.baselines.ppo import Agent, PPOConfig, _rollout, to_tensors, tokenize, train
from feedbackgym.schedules import ARMS


def _config(arm, **kwargs):
    defaults = {"total_timesteps": 256, "num_envs": 2, "num_steps": 64, "hidden": 16}
    return PPOConfig(
        env_id="feedbackgym/OpsIncidentEasy-v0", arm=arm, device="cpu", **(defaults | kwargs)
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


class _Ticks(gym.Env):
    """Reward 1 a step; the episode is cut off (truncated) after two steps."""

    observation_space = gym.spaces.Dict({"x": gym.spaces.Box(0, 10, (1,), np.float32)})
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return {"x": np.zeros(1, np.float32)}, {}

    def step(self, action):
        self.t += 1
        return {"x": np.full(1, self.t, np.float32)}, 1.0, False, self.t == 2, {}


def test_a_truncated_step_bootstraps_from_its_final_observation_only():
    config = _config("sparse", num_envs=1, num_steps=4)
    envs = gym.vector.SyncVectorEnv([_Ticks], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    agent = Agent(envs.single_observation_space, 2, config)
    obs, _ = envs.reset(seed=0)
    batch, finished, successes, _ = _rollout(
        agent, envs, obs, config, 0.9, torch.device("cpu"), np.zeros(1)
    )
    final = to_tensors({"x": np.full((1, 1), 2.0, np.float32)}, agent, torch.device("cpu"))
    with torch.no_grad():
        final_value = float(agent.value(final))
    # Steps 1 and 3 end episodes: their return is the reward plus the discounted value of
    # the final observation, with nothing of the next episode (its reset observation).
    for step in (1, 3):
        assert float(batch["returns"][step]) == pytest.approx(1.0 + 0.9 * final_value, abs=1e-5)
    assert finished == [2.0, 2.0] and successes == [False, False]


def test_the_discount_and_the_config_file_reach_the_stack(tmp_path):
    path = tmp_path / "feedback.toml"
    path.write_text("[shaping]\ngamma = 0.9\n[guide]\nevery = 3\n")
    config = _config("guide", feedback_file=str(path), feedback_overrides={"guide": {"every": 2}})
    controller = config.controller()
    assert controller.config.shaping.gamma == 0.9  # the shaping discounts as the learner does
    assert controller.config.guide.every == 2  # the overrides go on top of the file
