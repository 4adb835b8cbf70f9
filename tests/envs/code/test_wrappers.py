"""The feedback wrappers and the recorder work on CodeFix unchanged."""

import gymnasium as gym
import pytest

import feedbackgym  # noqa: F401  (registers the ids)
from feedbackgym.wrappers import (
    AddGuide,
    AddReview,
    FadeGuideToReview,
    Reexplore,
    ShapeWithSubgoals,
)
from tests.envs.code.conftest import require_backend


@pytest.mark.parametrize("obs_mode", ["vector", "text"])
def test_guide_review_shaping_and_recording(tmp_path, obs_mode):
    require_backend("local")
    pytest.importorskip("h5py")
    from feedbackgym.wrappers import RecordTrajectories

    env = gym.make("feedbackgym/CodeFix-v0", sandbox="local", obs_mode=obs_mode)
    env = FadeGuideToReview(AddReview(AddGuide(ShapeWithSubgoals(env))))
    env = RecordTrajectories(env, tmp_path / "store", round=0)
    _, info = env.reset(seed=0)
    assert "feedback" in info
    done, shaped = False, 0.0
    while not done:
        _, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
        shaped += float(reward)
        done = terminated or truncated
    assert info["env_reward"] == 1.0 and "shaping_reward" in info and shaped > 0
    assert len(env.store) == 1
    env.close()


def test_reexplore_replays_an_episode_exactly():
    require_backend("local")
    env = Reexplore(gym.make("feedbackgym/CodeFix-v0", sandbox="local", obs_mode="text"))
    env.reset(seed=5)
    actions = ["run all tests", 1, 20, "revert"]
    for action in actions:
        obs, *_ = env.step(action)
    restored, info = env.reset(options={"restore": {"seed": 5, "actions": actions}})
    assert restored == obs and info["restored_from"] == {"seed": 5, "step": 4, "kind": "explicit"}
    env.close()
