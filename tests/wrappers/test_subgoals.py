"""A third-party env (MiniGrid) made guidable with user subgoals, trained briefly with SB3."""

import gymnasium as gym
import numpy as np
import pytest

from feedbackgym.core import Subgoal
from feedbackgym.wrappers import (
    AddGuide,
    AddReview,
    FadeGuideToReview,
    ShapeWithSubgoals,
    SubgoalContext,
    WithSubgoals,
)

minigrid = pytest.importorskip("minigrid")
from minigrid.wrappers import FlatObsWrapper  # noqa: E402


def has_key(ctx: SubgoalContext) -> bool:
    carrying = ctx.env.carrying
    return carrying is not None and carrying.type == "key"


def door_open(ctx: SubgoalContext) -> bool:
    grid = ctx.env.grid
    return any(c is not None and c.type == "door" and c.is_open for c in grid.grid)


def at_goal(ctx: SubgoalContext) -> bool:
    cell = ctx.env.grid.get(*ctx.env.agent_pos)
    return cell is not None and cell.type == "goal"


SUBGOALS = [
    Subgoal("key", "pick up the key", has_key),
    Subgoal("door", "open the door", door_open, ("key",)),
    Subgoal("goal", "reach the green goal", at_goal, ("door",)),
]


def make_env():
    env = FlatObsWrapper(gym.make("MiniGrid-DoorKey-5x5-v0", max_steps=60))
    env = WithSubgoals(env, SUBGOALS, success=at_goal)
    env = ShapeWithSubgoals(env, gamma=0.99)
    env = AddGuide(env, every=2, channels=("vector", "info"))
    env = AddReview(env, window=20, channels=("vector", "info", "credit"))
    return FadeGuideToReview(env, schedule={"switch_at": 0.5, "fade": 1, "total": 4})


def test_user_subgoals_drive_progress():
    env = WithSubgoals(gym.make("MiniGrid-DoorKey-5x5-v0"), SUBGOALS)
    _, info = env.reset(seed=0)
    assert info["subgoals"] == {"key": False, "door": False, "goal": False}
    env.unwrapped.carrying = env.unwrapped.grid.get(1, 2)  # hand the agent the key
    info = env.step(6)[-1]  # "done" action: no movement
    assert info["subgoals"]["key"] and not info["subgoals"]["door"]
    assert [sg.id for sg in env.get_wrapper_attr("subgoals")] == ["key", "door", "goal"]
    with pytest.raises(AttributeError, match="no expert"):
        env.expert_action()
    with pytest.raises(ValueError, match="at least one"):
        WithSubgoals(gym.make("MiniGrid-DoorKey-5x5-v0"), [])


def test_minigrid_trains_with_sb3_through_guide_and_review():
    sb3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv

    class PushRound(BaseCallback):
        def __init__(self):
            super().__init__()
            self.rounds = 0
            self.phases = []

        def _on_rollout_start(self):
            states = self.training_env.env_method("set_progress", self.rounds)
            self.phases.append(states[0].phase)
            self.rounds += 1

        def _on_step(self):
            return True

    envs = DummyVecEnv([make_env, make_env])
    model = sb3.PPO(
        "MultiInputPolicy",
        envs,
        n_steps=64,
        batch_size=64,
        n_epochs=1,
        policy_kwargs={"net_arch": [8]},
        seed=0,
    )
    callback = PushRound()
    model.learn(total_timesteps=512, callback=callback)
    assert callback.phases[0] == "guide" and callback.phases[-1] == "review"
    stats = envs.env_method("feedback_stats")
    assert sum(s["guide"]["hints_given"] for s in stats) > 0
    assert sum(s["review"]["reviews_given"] for s in stats) > 0
    obs = envs.reset()
    action, _ = model.predict(obs)
    assert np.asarray(action).shape == (2,)
