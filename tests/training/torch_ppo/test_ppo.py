import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from feedbackgym.training.common.trainer_view import Credit, FlatLayout, TrainerView
from feedbackgym.training.torch_ppo.ppo import Learner, PPOConfig, Rollout, train
from feedbackgym.training.workers.env_groups import EnvWorkers
from tests.training.arm_samples import TRAINED_ARMS
from tests.training.torch_ppo.discount import discounted as _discounted


def _config(arm, **kwargs):
    defaults = {"total_steps": 256, "n_envs": 2, "n_steps": 64, "net_arch": [16, 16]}
    return PPOConfig(
        env_id="feedbackgym/OpsIncidentEasy-v0", arm=arm, device="cpu", **(defaults | kwargs)
    )


@pytest.mark.parametrize("arm", TRAINED_ARMS)
def test_each_arm_trains_and_follows_the_schedule(arm):
    rounds = []
    agent, history = train(_config(arm), on_round=lambda r, m: rounds.append(r))
    assert rounds == [0, 1] and len(history) == 2
    assert all(math.isfinite(h["loss"]) for h in history)
    assert all(h["steps_per_s"] > 0 and h["rss_mb"] > 0 and h["cpu_percent"] > 0 for h in history)
    if arm.startswith("guide-then-review"):
        assert history[0]["guide_weight"] == 1.0
    if arm.startswith("review-then-guide"):
        assert history[0]["review_weight"] == 1.0


def test_text_observation_and_async_workers():
    config = _config("review", use_text=True, env_workers=2, env_kwargs={"obs_mode": "both"})
    agent, history = train(config)
    assert agent.text_length == 512 and len(history) == 2
    assert any(h["episodes"] for h in history)


def test_behaviour_cloning_option():
    agent, _ = train(_config("sparse", bc_episodes=5))
    assert agent is not None


def test_the_layout_flattens_every_kind_of_key_and_the_text_last():
    space = spaces.Dict(
        {
            "d": spaces.Discrete(3),
            "b": spaces.Box(0, 1, (2, 2)),
            "m": spaces.MultiBinary(2),
            "text": spaces.Text(10),
        }
    )
    layout = FlatLayout(space, text_length=4)
    row = layout.flatten({"d": 1, "b": np.eye(2), "m": [1, 0], "text": "abcdé"})
    assert layout.size == 3 + 4 + 2 + 4
    assert row[:9].tolist() == [1, 0, 0, 1, 0, 1, 0, 1, 0]  # Dict keys in order: b, d, m
    assert row[9:].tolist() == [ord(c) for c in "bcd?"]  # the last 4 characters, 7-bit
    with pytest.raises(ValueError, match="obs_mode"):
        FlatLayout(spaces.Dict({"d": spaces.Discrete(2)}), text_length=4)
    with pytest.raises(TypeError, match="cannot flatten"):
        FlatLayout(spaces.Dict({"g": spaces.Graph(spaces.Box(0, 1), None)}))


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


class _LastTick(_Ticks):
    """The episode ends on its second step, which is also its time limit."""

    def step(self, action):
        obs, reward, _, truncated, info = super().step(action)
        return obs, reward, truncated, truncated, info


def test_an_episode_that_ends_at_its_time_limit_is_not_bootstrapped():
    config = _config("sparse", n_envs=1, n_steps=4)
    envs = EnvWorkers([lambda: TrainerView(_LastTick())])
    learner = Learner(config, envs, _discounted(0.9), torch.device("cpu"))
    learner.reset(0)
    learner.collect()
    assert learner.buffer.rewards[:, 0].tolist() == [1.0] * 4


def test_a_seeded_reset_starts_the_episode_count_and_drops_old_credits():
    import feedbackgym

    env = TrainerView(feedbackgym.make("feedbackgym/OpsIncidentEasy-v0", "review"))
    env.reset(seed=0)
    done = False
    while not done:
        *_, terminated, truncated, _ = env.step(0)
        done = terminated or truncated
    env.reset()
    env.reset(seed=1)
    assert env.take_credits() == [] and env._episode == 0


def _ticks_learner(**kwargs):
    config = _config("sparse", n_envs=1, n_steps=4, **kwargs)
    envs = EnvWorkers([lambda: TrainerView(_Ticks())])
    learner = Learner(config, envs, _discounted(0.9), torch.device("cpu"))
    learner.reset(0)
    return learner


def test_a_truncated_step_bootstraps_from_its_final_observation_only():
    learner = _ticks_learner()
    trend = learner.collect()
    with torch.no_grad():
        final_value = float(learner.agent.value(torch.tensor([[2.0]])))
    # Steps 1 and 3 end episodes: their reward is the reward plus the discounted value of
    # the final observation, with nothing of the next episode (its reset observation).
    rewards = learner.buffer.rewards[:, 0]
    for step in (1, 3):
        assert float(rewards[step]) == pytest.approx(1.0 + 0.9 * final_value, abs=1e-5)
    assert float(rewards[0]) == 1.0
    assert trend == {"episodes": 2.0, "mean_return": 2.0, "success": 0.0}
    assert learner.buffer.episode[:, 0].tolist() == [0, 0, 1, 1]
    assert math.isfinite(learner.update()["loss"])
    cut_off = _ticks_learner(time_limit_terminal=True)  # no bootstrap: the cut-off is an end
    cut_off.collect()
    assert cut_off.buffer.rewards[:, 0].tolist() == [1.0] * 4


def test_review_credit_lands_on_its_episode_s_steps_of_this_round():
    rollout = Rollout(n_steps=6, n_envs=1, obs_size=1)
    rollout.episode[:, 0] = [3, 3, 4, 4, 4, 4]  # episode 3 began in an earlier round
    rollout.episode_step[:, 0] = [5, 6, 0, 1, 2, 3]
    rollout.add_credit(0, Credit(episode=4, start=1, values=(0.5, 0.0, -1.0)))
    rollout.add_credit(0, Credit(episode=3, start=4, values=(2.0, 1.0, 1.0)))
    assert rollout.rewards[:, 0].tolist() == [1.0, 1.0, 0.0, 0.5, 0.0, -1.0]
    assert (rollout.credit_applied, rollout.credit_dropped) == (4, 1)


def test_the_discount_and_the_config_file_reach_the_stack(tmp_path):
    path = tmp_path / "feedback.toml"
    path.write_text("[shaping]\ngamma = 0.9\n[guide]\nevery = 3\n")
    config = _config("guide", feedback_file=str(path), feedback_overrides={"guide": {"every": 2}})
    controller = config.controller()
    assert controller.config.shaping.gamma == 0.9  # the shaping discounts as the learner does
    assert controller.config.guide.every == 2  # the overrides go on top of the file


def test_the_fused_policy_scores_and_samples_as_the_agent_does():
    from feedbackgym.training.torch_ppo.ppo import Agent, FusedPolicy

    torch.manual_seed(0)
    agent = Agent(obs_size=6, n_actions=4, hidden=8)
    with torch.no_grad():
        agent.actor[-1].weight.mul_(100.0)  # a spread-out policy, not a near-uniform one
    obs = torch.randn(5, 6).repeat(4000, 1)
    action, logprob, value = FusedPolicy(agent)(obs)
    with torch.no_grad():
        _, expected_logprob, _, expected_value = agent.act(obs, action)
        probs = torch.softmax(agent.actor(obs[:5]), dim=-1)
    assert torch.allclose(logprob, expected_logprob, atol=1e-5)
    assert torch.allclose(value, expected_value, atol=1e-5)
    counts = torch.stack([torch.bincount(action[k::5], minlength=4) for k in range(5)])
    assert torch.allclose(counts / 4000.0, probs, atol=0.03)  # drawn from the policy


def test_training_leaves_its_set_up_out_of_the_collector_s_passes_and_puts_it_back():
    import gc

    from feedbackgym.training.torch_ppo.ppo import start_learner, train_rounds

    learner, controller = start_learner(_config("sparse", total_steps=512), torch.device("cpu"))
    rounds = train_rounds(learner, controller, 0)
    try:
        assert gc.get_freeze_count() == 0
        next(rounds)
        assert gc.get_freeze_count() > 10_000  # torch, the envs, the agent: frozen
        next(rounds)
        rounds.close()  # a consumer that stops early puts them back too
        assert gc.get_freeze_count() == 0
        gc.freeze()  # the caller's own freeze: left as it is
        assert [done.index for done in train_rounds(learner, controller, 2)] == [2, 3]
        assert gc.get_freeze_count() > 10_000
    finally:
        rounds.close()
        gc.unfreeze()
        learner.envs.close()
