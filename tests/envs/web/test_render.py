"""``render_mode="rgb_array"`` on the web envs: real Chromium screenshots as arrays."""

import gymnasium as gym
import numpy as np
import pytest

import feedbackgym  # noqa: F401  (registers the ids)
from feedbackgym.envs.web.browser import close_browser
from feedbackgym.envs.web.env import WebEnv
from feedbackgym.envs.web.pages import VIEWPORT

pytestmark = [pytest.mark.web, pytest.mark.usefixtures("browser")]

SHAPE = (VIEWPORT["height"], VIEWPORT["width"], 3)


def _web_ids():
    return [
        spec.id
        for spec in gym.registry.values()
        if isinstance(spec.entry_point, str)
        and spec.entry_point.startswith("feedbackgym.envs.web.")
    ]


def test_every_web_id_declares_rgb_array():
    ids = _web_ids()
    assert len(ids) >= 13  # three families and the MiniWoB++ pages
    for env_id in ids:
        env = gym.make(env_id, render_mode="rgb_array")  # no browser until reset
        assert "rgb_array" in env.metadata["render_modes"] and env.render_mode == "rgb_array"
        env.close()


def test_a_screenshot_is_an_rgb_array_that_follows_the_actions():
    # A fresh browser: after the other web test files, the first reset on the browser they
    # left lingering has timed out (a known, not yet understood hang; see docs/envs/web.md).
    close_browser()
    env = gym.make("feedbackgym/WebForm-v0", render_mode="rgb_array")
    assert env.unwrapped.render() is None  # no episode yet
    env.reset(seed=0)
    first = env.render()
    assert isinstance(first, np.ndarray) and first.shape == SHAPE and first.dtype == np.uint8
    assert first.std() > 10  # a page, not a blank frame
    for _ in range(3):  # the expert fills in the form: the page changes on screen
        env.step(env.unwrapped.expert_action())
    after = env.render()
    assert after.shape == SHAPE and after.dtype == np.uint8
    assert np.count_nonzero((first != after).any(axis=2)) > 100
    env.close()


def test_a_miniwob_page_renders(miniwob):
    env = gym.make("feedbackgym/MiniWoB-click-button-v0", render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == SHAPE and frame.dtype == np.uint8 and frame.std() > 10
    env.close()


def test_ansi_still_renders_the_text_and_a_bad_mode_is_refused():
    env = gym.make("feedbackgym/WebCheckout-v0", render_mode="ansi")
    env.reset(seed=0)
    assert "Search products" in env.render()
    env.close()
    with pytest.raises(ValueError, match="'ansi' or 'rgb_array'"):
        WebEnv("checkout", render_mode="video")
