"""MiniWoB++ pages from the miniwob package, on feedbackgym's driver."""

import re

import gymnasium as gym
import pytest

import feedbackgym
from feedbackgym.envs.web.miniwob import MINIWOB_TASKS

pytestmark = [pytest.mark.web, pytest.mark.usefixtures("miniwob")]


def _elements(text):
    """``(id, role, label)`` of the elements listed in a text observation."""
    return re.findall(r'^  \[(\d+)\] (\w+) "(.*?)"', text, flags=re.M)


def _id(text, role, label):
    return next(i for i, r, lab in _elements(text) if r == role and lab == label)


def _solve_click_button(env, text):
    target = re.search(r'Click on the "(.*)" button', text).group(1)
    return [f"click {_id(text, 'button', target)}"]


def _solve_enter_text(env, text):
    box = next(i for i, role, _ in _elements(text) if role == "textbox")
    return [f"type {box} {{target}}", f"click {_id(text, 'button', 'Submit')}"]


def _solve_click_checkboxes(env, text):
    words = re.search(r"Select (.*) and click Submit", text).group(1)
    wanted = [] if words == "nothing" else re.split(", ?", words)
    clicks = [f"click {_id(text, 'checkbox', word)}" for word in wanted]
    return clicks + [f"click {_id(text, 'button', 'Submit')}"]


def _solve_choose_list(env, text):
    select = next(i for i, role, _ in _elements(text) if role == "select")
    return [f"select {select} {{target}}", f"click {_id(text, 'button', 'Submit')}"]


def _solve_login_user(env, text):
    boxes = [i for i, role, _ in _elements(text) if role == "textbox"]
    return [
        f"type {boxes[0]} {{username}}",
        f'type {boxes[1]} "{env.unwrapped.goal_fields["{password}"]}"',  # the value itself
        f"click {_id(text, 'button', 'Login')}",
    ]


SOLVERS = {
    "click-button": _solve_click_button,
    "enter-text": _solve_enter_text,
    "click-checkboxes": _solve_click_checkboxes,
    "choose-list": _solve_choose_list,
    "login-user": _solve_login_user,
}


@pytest.mark.parametrize("task", sorted(SOLVERS))
def test_scripted_solutions_earn_the_pages_own_reward(task):
    env = gym.make(f"feedbackgym/MiniWoB-{task}-v0", obs_mode="text")
    for seed in (0, 1):
        text, info = env.reset(seed=seed)
        assert info["subgoals"] and not any(info["subgoals"].values())
        for action in SOLVERS[task](env, text):
            text, reward, terminated, _, info = env.step(action)
            assert info["invalid_action"] == "", (action, text)
        assert terminated and reward == 1.0 and info["is_success"], (text, info)
        assert all(info["subgoals"].values()), info["subgoals"]
        assert info["outcome"] == "success"
    env.close()


def test_a_wrong_click_gets_the_pages_penalty():
    env = gym.make("feedbackgym/MiniWoB-click-button-v0", obs_mode="text")
    for seed in range(20):
        text, _ = env.reset(seed=seed)
        target = re.search(r'Click on the "(.*)" button', text).group(1)
        others = [i for i, role, label in _elements(text) if role == "button" and label != target]
        if others:
            break
    wrong = others[0]
    _, reward, terminated, _, info = env.step(f"click {wrong}")
    assert terminated and reward == -1.0 and info["outcome"] == "failure"
    env.close()


def test_registered_tasks():
    ids = {spec.id for spec in gym.registry.values() if spec.id.startswith("feedbackgym/MiniWoB-")}
    assert ids == {f"feedbackgym/MiniWoB-{task}-v0" for task in MINIWOB_TASKS}
    assert len(ids) >= 10
    env = gym.make("feedbackgym/MiniWoB-email-inbox-v0", obs_mode="text")
    text, _ = env.reset(seed=1)
    assert text.startswith("Goal: Find the email by")
    assert "type 0 {message}" in env.unwrapped.action_meanings
    env.close()


# Validation seeds played per task: email-inbox's first four ask for each of its actions
# (forward, delete, reply, star).
SEEDS_PLAYED = {"email-inbox": 4}


@pytest.mark.parametrize("task", sorted(MINIWOB_TASKS))
def test_the_expert_solves_validation_seeds_reaching_every_subgoal_in_order(task):
    env = gym.make(f"feedbackgym/MiniWoB-{task}-v0")
    for seed in env.unwrapped.validation_seeds[: SEEDS_PLAYED.get(task, 2)]:
        _, info = env.reset(seed=seed)
        library = env.unwrapped.subgoals
        ids = [sg.id for sg in library]
        assert ids and list(info["subgoals"]) == ids and not any(info["subgoals"].values())
        for n, subgoal in enumerate(library):  # prerequisites come first
            assert set(subgoal.requires) <= set(ids[:n]), ids
        reached, done = 0, False
        while not done:
            _, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
            assert info["invalid_action"] == "", info
            assert sum(info["subgoals"].values()) >= reached  # progress only grows
            reached, done = sum(info["subgoals"].values()), terminated or truncated
        assert terminated and reward == 1.0 and info["is_success"], (seed, info)
        assert all(info["subgoals"].values()), (seed, info["subgoals"])
        assert env.unwrapped.expert_action() == 0  # over: an autoresetting vector env ignores it
    env.close()


def test_the_feedback_stack_guides_and_shapes_a_miniwob_task():
    env = feedbackgym.make("feedbackgym/MiniWoB-login-user-v0", "guide-then-review+shaping")
    for seed in env.unwrapped.validation_seeds[:8]:  # the guide's dropout skips whole episodes
        _, info = env.reset(seed=seed)
        hint = info["feedback"]["guide"]
        if hint:
            break
    assert hint["subgoal_ids"][0] in {"type_username", "type_password"}, hint
    assert "username" in hint["text"] or "password" in hint["text"]
    assert info["feedback"]["guide_weight"] == 1.0
    _, reward, *_ = env.step(env.unwrapped.expert_action())
    assert reward > 0  # shaping pays for the subgoal the step reached
    env.close()
