"""At the default ``phase`` level, no hint or review names or marks an unobserved service."""

from __future__ import annotations

import re

import numpy as np
import pytest

from feedbackgym.envs.incident import IncidentEnv
from feedbackgym.wrappers import AddGuide, AddReview


def _named(text: str, names: tuple[str, ...]) -> set[str]:
    return {n for n in names if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)}


def _stack(level: str | None = None) -> AddReview:
    kwargs = {} if level is None else {"level": level}
    guided = AddGuide(
        IncidentEnv("medium", obs_mode="both", split="test"),
        every=1,
        channels=("text", "info", "vector"),
        **kwargs,
    )
    return AddReview(guided, window=80, channels=("info", "text"), stall_steps=2, **kwargs)


def _check(names, observed, unwrapped, obs, info, shown_review):
    hint = info["feedback"]["guide"]
    leaked = set()
    if hint:
        leaked |= _named(hint["text"], names) | (set(hint["targets"]) - observed)
    marked = {unwrapped.services[p] for p in np.flatnonzero(obs["hint_targets"])}
    leaked |= marked - observed
    review = info["feedback"].get("review") or {}
    if review:
        leaked |= _named(str(review), names)
    if shown_review:
        leaked |= _named(shown_review, names)
    return leaked - observed


def test_no_hint_or_review_reveals_an_unobserved_service_over_1000_test_seeds():
    env = _stack()
    unwrapped = env.unwrapped
    hints = reviews = 0
    for seed in range(1000):
        obs, info = env.reset(seed=seed)
        names = unwrapped.services
        done = False
        while True:
            observed = set(unwrapped.observed_targets)
            # a review is about its own episode: checked when it lands, at that episode's end
            text_review = env.last_review.text if done and env.last_review is not None else ""
            leaked = _check(names, observed, unwrapped, obs, info, text_review)
            assert not leaked, (seed, leaked, info["feedback"])
            hints += bool(info["feedback"]["guide"])
            reviews += bool(info["feedback"].get("review"))
            if done:
                break
            obs, _, terminated, truncated, info = env.step(unwrapped.expert_action())
            done = terminated or truncated
    assert hints > 5000 and reviews == 1000  # the check ran on real feedback


def test_the_target_level_names_the_hidden_root_and_the_action_level_the_action():
    target = _stack("target")
    _, info = target.reset(seed=4)
    root = target.unwrapped.state.name(target.unwrapped.state.faults[0].root)
    phase = _stack()
    _, phase_info = phase.reset(seed=4)
    assert root not in phase_info["feedback"]["guide"]["text"]
    env = target
    while root not in info["feedback"]["guide"]["text"]:
        _, _, _, _, info = env.step(env.unwrapped.expert_action())
    action = _stack("action")
    _, info = action.reset(seed=4)
    expert = action.unwrapped.action_meanings[action.unwrapped.expert_action()]
    assert f"take the action '{expert}'" in info["feedback"]["guide"]["text"]


def test_an_unknown_level_is_refused():
    with pytest.raises(ValueError, match="phase"):
        _stack("everything")
