"""Helpers for the trajectory store tests: env stacks and episode loops."""

import random

import gymnasium as gym

import feedbackgym  # noqa: F401
from feedbackgym.wrappers import AddGuide, AddReview, FadeGuideToReview, ShapeWithSubgoals

SCHEDULE = {"switch_at": 0.4, "fade": 5, "total": 100}


def feedback_stack(env_id="feedbackgym/OpsIncidentHard-v0", config=None, **kwargs):
    """Shaping, a hint every 2 steps, reviews and the schedule: every info field there is."""
    env = ShapeWithSubgoals(gym.make(env_id, **kwargs))
    env = AddReview(AddGuide(env, every=2, dropout=0.0))
    if config is not None:
        return FadeGuideToReview(env, config=str(config))
    return FadeGuideToReview(env, schedule=SCHEDULE)


def play(env, seeds, policy="expert"):
    """Plays one episode per seed; returns the infos of each (reset info first)."""
    rng = random.Random(0)
    episodes = []
    for seed in seeds:
        _, info = env.reset(seed=seed)
        infos = [info]
        done = False
        while not done:
            action = env.unwrapped.expert_action() if policy == "expert" else rng.randrange(70)
            _, _, terminated, truncated, info = env.step(action)
            infos.append(info)
            done = terminated or truncated
        episodes.append(infos)
    return episodes
