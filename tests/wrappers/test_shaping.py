import gymnasium as gym
import numpy as np
import pytest

import feedbackgym  # noqa: F401
from feedbackgym.wrappers import ShapeWithSubgoals


def _episode(env, seed, policy):
    _, info = env.reset(seed=seed)
    phi0 = env.potential(info["subgoals"])
    terms, env_rewards, rewards = [], [], []
    done = False
    while not done:
        _, reward, terminated, truncated, info = env.step(policy(env))
        terms.append(info["shaping_reward"])
        env_rewards.append(info["env_reward"])
        rewards.append(reward)
        done = terminated or truncated
    return phi0, np.array(terms), np.array(env_rewards), np.array(rewards), terminated, info


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_shaping_telescopes_to_minus_the_initial_potential(gamma):
    env = ShapeWithSubgoals(
        gym.make("feedbackgym/OpsIncidentHard-v0"), gamma=gamma, scale=2.0, terminal="zero"
    )
    phi0, terms, env_rewards, rewards, terminated, _ = _episode(
        env, 3, lambda e: e.unwrapped.expert_action()
    )
    assert terminated
    discounts = gamma ** np.arange(len(terms))
    assert float(discounts @ terms) == pytest.approx(-phi0, abs=1e-9)
    assert rewards == pytest.approx(env_rewards + terms)
    assert terms[:-1].max() > 0  # progress pays along the way


def test_truncated_episode_keeps_the_last_potential():
    env = ShapeWithSubgoals(
        gym.make("feedbackgym/OpsIncidentEasy-v0", max_episode_steps=5), gamma=1.0
    )
    phi0, terms, *_, terminated, info = _episode(env, 0, lambda e: e.unwrapped.expert_action())
    assert not terminated
    assert terms.sum() == pytest.approx(env.potential(info["subgoals"]) - phi0)


def test_keep_terminal_keeps_progress_of_a_failed_episode():
    env = ShapeWithSubgoals(gym.make("feedbackgym/OpsIncidentEasy-v0"), gamma=1.0, terminal="keep")
    actions = iter([0, 1, "escalate"])  # two inspections, then give up
    phi0, terms, *_, terminated, info = _episode(env, 0, lambda e: next(actions))
    assert terminated and terms.sum() == pytest.approx(env.potential(info["subgoals"]) - phi0)
    with pytest.raises(ValueError, match="terminal"):
        ShapeWithSubgoals(gym.make("feedbackgym/OpsIncidentEasy-v0"), terminal="sometimes")


def test_zero_on_harm_takes_progress_back_only_when_the_episode_ends_on_purpose():
    def shaped():
        return ShapeWithSubgoals(
            gym.make("feedbackgym/OpsIncidentEasy-v0"), gamma=1.0, terminal="zero_on_harm"
        )

    def expert_then(action):
        steps = iter(range(3))  # three expert steps (progress), then ``action`` until the end
        return lambda e: e.unwrapped.expert_action() if next(steps, None) is not None else action

    env = shaped()
    phi0, terms, *_, terminated, info = _episode(env, 0, expert_then("escalate"))
    assert terminated and info["harmful"] and info["outcome"] == "escalated"
    assert terms[:-1].sum() > 0 and terms.sum() == pytest.approx(-phi0)

    env = shaped()
    phi0, terms, *_, terminated, info = _episode(env, 0, expert_then("wait"))
    assert terminated and not info["harmful"] and info["outcome"] == "slo_exhausted"
    phi_last = env.potential(info["subgoals"])
    assert phi_last > phi0 and terms.sum() == pytest.approx(phi_last - phi0)


def test_bad_arguments_and_runtime_change():
    env = ShapeWithSubgoals(gym.make("feedbackgym/OpsIncidentEasy-v0"))
    env.set_shaping(gamma=0.5, scale=3.0)
    assert (env.gamma, env.scale) == (0.5, 3.0)
    with pytest.raises(ValueError, match="gamma"):
        env.set_shaping(gamma=0.0, scale=1.0)
    with pytest.raises(ValueError, match="scale"):
        ShapeWithSubgoals(env, scale=-1)


def test_the_reward_is_clipped_to_the_range_and_says_so():
    env = ShapeWithSubgoals(gym.make("feedbackgym/OpsIncidentEasy-v0"), clip=(-0.25, 0.25))
    _, _, env_rewards, rewards, terminated, info = _episode(
        env, 0, lambda e: e.unwrapped.expert_action()
    )
    assert terminated and info["is_success"]
    assert env_rewards[-1] == 1.0 and rewards[-1] == 0.25  # the env's own reward kept in info
    assert info["reward_clipped"] and rewards.max() <= 0.25
    default = ShapeWithSubgoals(gym.make("feedbackgym/OpsIncidentEasy-v0"))
    _, terms, env_rewards, rewards, _, info = _episode(
        default, 0, lambda e: e.unwrapped.expert_action()
    )
    assert rewards == pytest.approx(env_rewards + terms) and "reward_clipped" not in info
    default.set_clip(None)
    assert default.clip is None
    for bad in ((1.0, 1.0), (2.0, -2.0)):
        with pytest.raises(ValueError, match="low < high"):
            ShapeWithSubgoals(gym.make("feedbackgym/OpsIncidentEasy-v0"), clip=bad)


def test_the_config_s_clip_range_is_checked_and_a_followed_file_edits_it(tmp_path):
    from feedbackgym.config import ConfigError, FeedbackConfig
    from feedbackgym.control import FeedbackController

    with pytest.raises(ConfigError, match="shaping.clip"):
        FeedbackConfig.from_mapping({"shaping": {"clip": [1, -1]}})
    path = tmp_path / "feedback.yaml"
    path.write_text("schedule: {arm: guide-then-review+shaping}\n")
    env = feedbackgym.make("feedbackgym/OpsIncidentEasy-v0", path)
    controller = FeedbackController(path, envs=env)
    controller.update(0)
    assert env.get_wrapper_attr("clip") == (-10.0, 10.0)
    path.write_text("schedule: {arm: guide-then-review+shaping}\nshaping: {clip: [-0.5, 0.5]}\n")
    controller.update(1)
    assert env.get_wrapper_attr("clip") == (-0.5, 0.5)
    env.close()
