import gymnasium as gym
import pytest

import feedbackgym  # noqa: F401
from feedbackgym.errors import FeedbackGymError
from feedbackgym.wrappers import AddReview, Reexplore


def test_restore_from_a_flagged_point_resumes_that_state():
    env = Reexplore(AddReview(gym.make("feedbackgym/OpsIncidentHard-v0"), window=30))
    env.reset(seed=11)
    for _ in range(6):
        env.step(env.unwrapped.expert_action())
    snapshot = env.unwrapped.get_state()["state"]
    env.step("scale down web")
    info = env.step("escalate")[-1]
    point = info["feedback"]["review"]["reexplore"][0]
    assert point["step"] == 6 and point["reason"] == "harmful"
    obs, info = env.reset(options={"restore": point})
    assert info["restored_from"] == {"seed": 11, "step": 6}
    restored = env.unwrapped.state
    assert restored.step == snapshot.step and restored.evidence == snapshot.evidence
    assert restored.budget == pytest.approx(snapshot.budget)
    # the expert finishes from there: the restored episode is live
    done = False
    while not done:
        _, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
        done = terminated or truncated
    assert reward == 1.0


def test_explicit_points_and_auto_restore():
    env = Reexplore(AddReview(gym.make("feedbackgym/OpsIncidentEasy-v0")), restore_prob=1.0)
    _, info = env.reset(options={"restore": {"seed": 4, "actions": [0, 1]}})
    assert info["restored_from"] == {"seed": 4, "step": 2}
    env.step("escalate")
    _, info = env.reset()
    assert info["restored_from"]["seed"] == 4 and env.restores == 2


def test_restore_errors():
    env = Reexplore(gym.make("feedbackgym/OpsIncidentEasy-v0"))
    with pytest.raises(FeedbackGymError, match="no finished episode"):
        env.reset(options={"restore": {"step": 1}})
    env.reset(seed=0)
    env.step("escalate")
    with pytest.raises(FeedbackGymError, match="outside"):
        env.reset(options={"restore": {"step": 9}})
    with pytest.raises(FeedbackGymError, match="needs 'step'"):
        env.reset(options={"restore": {"where": 1}})
    with pytest.raises(ValueError, match="AddReview"):
        Reexplore(gym.make("feedbackgym/OpsIncidentEasy-v0"), restore_prob=0.5)
