import gymnasium as gym
import numpy as np
import pytest

import feedbackgym
from feedbackgym.config import FeedbackConfig, merge_config
from feedbackgym.envs.ops.actions import ACTION_MEANINGS
from feedbackgym.errors import ConfigError
from feedbackgym.protocol import (
    ENV_REWARD,
    EXPLORE_BONUS,
    IS_SUCCESS,
    SHAPING_REWARD,
    FeedbackState,
)
from feedbackgym.wrappers import AddExplorationBonus, ShapeWithSubgoals

ENV = "feedbackgym/OpsIncidentEasy-v0"
WAIT = ACTION_MEANINGS.index("wait")


def _bonus(env):
    return env.get_wrapper_attr("scale"), env.get_wrapper_attr("bits")


def test_the_bonus_of_a_code_falls_as_one_over_the_root_of_its_visits():
    env = AddExplorationBonus(gym.make(ENV), scale=0.2, bits=16)
    bonuses = []
    for _ in range(4):  # the same first step, four times: one code
        env.reset(seed=0)
        obs, reward, *_, info = env.step("wait")
        assert reward == pytest.approx(info[ENV_REWARD] + info[EXPLORE_BONUS])
        bonuses.append(info[EXPLORE_BONUS])
    visits = env.counts[env.code(obs)]
    assert visits == 4
    assert bonuses == pytest.approx([0.2 / np.sqrt(n) for n in range(1, 5)])
    env.reset(seed=0)
    *_, info = env.step("inspect logs app")  # a state not seen before pays the full bonus
    assert info[EXPLORE_BONUS] == pytest.approx(0.2)


def test_the_env_reward_success_and_shaping_are_left_as_they_are():
    def play(env):
        env.reset(seed=3)
        rows, done = [], False
        while not done:
            _, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
            rows.append((reward, info[ENV_REWARD], info[SHAPING_REWARD], info.get(IS_SUCCESS)))
            done = terminated or truncated
        return np.array(rows, dtype=float), info

    plain, _ = play(ShapeWithSubgoals(gym.make(ENV)))
    explored, info = play(AddExplorationBonus(ShapeWithSubgoals(gym.make(ENV)), scale=0.5))
    assert info["outcome"] == "resolved"
    np.testing.assert_array_equal(explored[:, 1:], plain[:, 1:])  # env reward, shaping, success
    bonus = explored[:, 0] - plain[:, 0]
    assert (bonus > 0).all() and bonus.max() <= 0.5


def test_off_the_wrapper_passes_the_reward_through_and_counts_nothing():
    env = AddExplorationBonus(gym.make(ENV), scale=0.0)
    env.reset(seed=0)
    _, reward, *_, info = env.step("wait")
    assert (reward, info[EXPLORE_BONUS], info[ENV_REWARD]) == (0.0, 0.0, 0.0)
    assert not env.counts


def test_each_arm_builds_its_bonus_and_a_pushed_config_changes_it():
    for arm, scale, shaping in [
        ("explore", 0.01, 0.0),
        ("explore+shaping", 0.01, 1.0),
        ("sparse", 0.0, 0.0),
        ("guide-then-review+shaping", 0.0, 1.0),
    ]:
        env = feedbackgym.make(ENV, arm)
        assert (_bonus(env), _shaping_scale(env)) == ((scale, 16), shaping), arm
    env = feedbackgym.make(ENV, "sparse")
    config = merge_config(FeedbackConfig(), {"explore": {"scale": 0.3, "bits": 8}})
    env.get_wrapper_attr("set_feedback_state")(FeedbackState("none", 0.0, 0.0, config=config))
    assert _bonus(env) == (0.3, 8)
    env.reset(seed=0)
    assert env.step("wait")[-1][EXPLORE_BONUS] == pytest.approx(0.3)


def test_a_base_config_sets_the_explore_arms_bonus_and_no_other_arm_has_one():
    base = merge_config(FeedbackConfig(), {"explore": {"scale": 0.05}})
    assert FeedbackConfig.for_arm("explore", base).explore.scale == 0.05
    assert FeedbackConfig.for_arm("explore").explore.scale == 0.01
    assert FeedbackConfig.for_arm("shaping", base).explore is None


def test_every_env_of_a_subprocess_vector_env_counts_its_own_visits():
    envs = gym.vector.AsyncVectorEnv([lambda: feedbackgym.make(ENV, "explore")] * 2)
    try:
        envs.reset(seed=[0, 0])
        _, rewards, *_, infos = envs.step(np.array([WAIT, WAIT]))  # the same step in both envs
        assert infos[EXPLORE_BONUS] == pytest.approx([0.01, 0.01])
        np.testing.assert_allclose(rewards, infos[ENV_REWARD] + infos[EXPLORE_BONUS])
        assert [sum(counts.values()) for counts in envs.get_attr("counts")] == [2, 2]
    finally:
        envs.close()


def test_bad_settings_are_refused_with_the_field_named():
    env = gym.make(ENV)
    with pytest.raises(ValueError, match="scale must be non-negative"):
        AddExplorationBonus(env, scale=-0.1)
    with pytest.raises(ValueError, match="bits must be at least 1"):
        AddExplorationBonus(env, bits=0)
    text_only = gym.make(ENV, obs_mode="text")
    AddExplorationBonus(text_only, scale=0.0)  # off: any observation will do
    with pytest.raises(ValueError, match="needs numeric observation keys"):
        AddExplorationBonus(text_only, scale=0.1)
    for section, field in [({"scale": 0.0}, "explore.scale"), ({"bits": 0}, "explore.bits")]:
        with pytest.raises(ConfigError, match=field):
            FeedbackConfig.from_mapping({"explore": section})
    with pytest.raises(ConfigError, match="explore.beta"):
        FeedbackConfig.from_mapping({"explore": {"beta": 0.1}})


def _chain(env):
    while isinstance(env, gym.Wrapper):
        yield env
        env = env.env


def _shaping_scale(env):
    return next(w for w in _chain(env) if isinstance(w, ShapeWithSubgoals)).scale
