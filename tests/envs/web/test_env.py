"""The web task families in real headless Chromium: experts, actions, observations."""

import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import feedbackgym  # noqa: F401  (registers the ids)
from feedbackgym.core import Subgoal
from feedbackgym.envs.web import base
from feedbackgym.errors import FeedbackGymError, InvalidAction
from feedbackgym.rollout import run_episodes, summarize

pytestmark = [pytest.mark.web, pytest.mark.usefixtures("browser")]

FAMILIES = ("feedbackgym/WebCheckout-v0", "feedbackgym/WebForm-v0", "feedbackgym/WebOrderAdmin-v0")


@pytest.mark.parametrize("env_id", FAMILIES)
def test_expert_succeeds_in_15_to_40_steps(env_id):
    env = gym.make(env_id)
    results = list(run_episodes(env, "expert", 5, seed=100))
    env.close()
    summary = summarize(results)
    assert summary["success_rate"] >= 0.98, [r.outcome for r in results]
    assert 15 <= min(r.length for r in results) and max(r.length for r in results) <= 40
    assert all(r.subgoals_done and len(r.subgoals_done) == r.subgoals_total for r in results)


@pytest.mark.parametrize("mode", base.OBS_MODES)
def test_each_obs_mode_stays_in_its_space(mode):
    env = gym.make("feedbackgym/WebOrderAdmin-v0", obs_mode=mode)
    obs, _ = env.reset(seed=2)
    assert obs in env.observation_space
    for _ in range(8):  # sign in, search, open the order: scrolled, long pages
        obs, *_ = env.step(env.unwrapped.expert_action())
        assert obs in env.observation_space
    env.close()


def test_text_actions_and_flagged_no_ops():
    env = gym.make("feedbackgym/WebCheckout-v0", obs_mode="both")
    obs, info = env.reset(seed=0)
    assert '[1] textbox "Search products" value=""' in obs["text"]
    obs, _, _, _, info = env.step('type 1 "Trail Runner"')
    assert info["invalid_action"] == "" and obs["last_result"] == 1
    assert 'value="Trail Runner"' in obs["text"]
    for action, reason in [
        ("click 31", "no element 31 in view"),
        ('select 1 "blue"', "element 1 is a textbox, not a select"),
        ('type 0 "Berlin"', "element 0 is a link"),
        ("back", "no earlier page"),
        ("scroll up", "cannot scroll up"),
    ]:
        after, _, _, _, info = env.step(action)
        assert reason in info["invalid_action"] and after["last_result"] == 2
        assert f"(invalid: {info['invalid_action']})" in after["text"]
        assert after["elements"].tolist() == obs["elements"].tolist()
    for bad in ("fly away", 10**6, 'type 1 "Atlantis"'):
        with pytest.raises(InvalidAction, match="valid"):
            env.step(bad)
    env.close()


def test_back_follows_the_apps_history():
    env = gym.make("feedbackgym/WebCheckout-v0", obs_mode="text")
    env.reset(seed=0)
    env.step('type 1 "Day Pack"')
    _, _, _, _, info = env.step("click 2")
    assert info["path"] == "/search?q=Day%20Pack"
    _, _, _, _, info = env.step("back")
    assert info["path"] == "/" and info["invalid_action"] == ""
    env.close()


def test_scrolling_reveals_the_rest_of_a_long_page():
    env = gym.make("feedbackgym/WebOrderAdmin-v0", obs_mode="both")
    env.reset(seed=2)
    info = {"path": ""}
    while not info["path"].startswith("/orders/"):
        obs, _, _, _, info = env.step(env.unwrapped.expert_action())
    assert obs["more"].tolist() == [0, 1] and "(more below: scroll down)" in obs["text"]
    down, _, _, _, info = env.step("scroll down")
    assert info["invalid_action"] == "" and down["more"][0] == 1
    assert "Send notification" in down["text"] and "Send notification" not in obs["text"]
    up, *_ = env.step("scroll up")
    assert _elements(up["text"]) == _elements(obs["text"])
    env.close()


def _elements(text):
    return [line for line in text.splitlines() if line.startswith("  [")]


def test_subgoals_info_and_expert_contract():
    env = gym.make("feedbackgym/WebForm-v0")
    _, info = env.reset(seed=4)
    subgoals = env.unwrapped.subgoals
    assert all(isinstance(sg, Subgoal) for sg in subgoals)
    assert list(info["subgoals"]) == [sg.id for sg in subgoals]
    assert info["outcome"] == "in_progress" and info["is_success"] is False
    done_counts = []
    terminated = False
    while not terminated:
        _, reward, terminated, _, info = env.step(env.unwrapped.expert_action())
        done_counts.append(sum(info["subgoals"].values()))
    assert done_counts == sorted(done_counts) and done_counts[-1] == len(subgoals)
    assert reward == 1.0 and info["outcome"] == "submitted"
    with pytest.raises(FeedbackGymError, match="episode is over"):
        env.step(0)
    assert env.unwrapped.expert_action() == 0
    env.close()


def test_same_seed_same_pages_and_ids():
    texts = []
    for _ in range(2):
        env = gym.make("feedbackgym/WebCheckout-v0", obs_mode="text")
        obs, _ = env.reset(seed=11)
        trace = [obs]
        for _ in range(8):
            obs, *_ = env.step(env.unwrapped.expert_action())
            trace.append(obs)
        texts.append(trace)
        env.close()
    assert texts[0] == texts[1]


def test_the_docs_example_runs(capsys):
    docs = (Path(__file__).resolve().parents[3] / "docs" / "envs" / "web.md").read_text()
    examples = re.findall(r"```python\n(.*?)```", docs, flags=re.S)
    assert len(examples) == 2  # playing an episode, rendering a frame
    for example in examples:
        exec(compile(example, "docs/envs/web.md", "exec"), {})  # in-process: the browser is up
    assert "order_placed 1.0" in capsys.readouterr().out


def test_benchmark_script_runs():
    root = Path(__file__).resolve().parents[3]
    command = [sys.executable, "benchmarks/web_step.py", "--episodes", "1", "--vector-steps", "0"]
    command += ["--miniwob-steps", "1", "--floor", "3"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=root)
    assert run.returncode == 0, run.stderr
    assert "| WebCheckout-v0 | 100% |" in run.stdout and "mouse.click + innerText" in run.stdout
    assert "MiniWoB-enter-text (prefetch off)" in run.stdout
