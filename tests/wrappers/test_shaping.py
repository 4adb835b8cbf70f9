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
