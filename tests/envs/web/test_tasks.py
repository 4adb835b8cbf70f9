"""The task families' instances, vocabularies and success checks, and the MiniWoB++
subgoal libraries (no browser needed)."""

import json
import pickle

import numpy as np
import pytest

from feedbackgym.core import SubgoalTracker
from feedbackgym.envs.web.base import WebState
from feedbackgym.envs.web.miniwob_tasks import MINIWOB_TASKS
from feedbackgym.envs.web.tasks import TASKS
from feedbackgym.envs.web.tasks.data import CARDS

FAMILIES = sorted(TASKS)


def _luhn(digits):
    total = 0
    for i, d in enumerate(int(c) for c in reversed(digits)):
        total += d if i % 2 == 0 else (d * 2 - 9 if d > 4 else d * 2)
    return total % 10 == 0


@pytest.mark.parametrize("name", FAMILIES)
def test_every_goal_value_is_in_the_vocabulary(name):
    task = TASKS[name]()
    vocabulary = set(task.type_values) | set(task.select_values)
    assert len(set(task.type_values)) == len(task.type_values)
    assert len(set(task.select_values)) == len(task.select_values)
    for seed in range(300):
        instance = task.generate(np.random.default_rng(seed))
        json.dumps(instance)  # plain data, as the page receives it
        assert task.goal_values(instance["goal"]) <= vocabulary, seed


@pytest.mark.parametrize("name", FAMILIES)
def test_instances_follow_the_seed(name):
    task = TASKS[name]()
    first = task.generate(np.random.default_rng(5))
    assert first == task.generate(np.random.default_rng(5))
    assert first != task.generate(np.random.default_rng(6))
    assert task.goal_text(first["goal"]) == task.goal_text(first["goal"])


@pytest.mark.parametrize("name", FAMILIES)
def test_subgoals_form_a_picklable_chain_over_the_app_state(name):
    task = TASKS[name]()
    goal = task.generate(np.random.default_rng(1))["goal"]
    subgoals = task.subgoals(goal)
    pickle.loads(pickle.dumps(subgoals))
    assert all(sg.description for sg in subgoals)
    assert [sg.requires for sg in subgoals[1:]] == [(sg.id,) for sg in subgoals[:-1]]
    tracker = SubgoalTracker(subgoals)
    assert not any(tracker.update(WebState(instance={"goal": goal}, app={})).values())


def test_test_cards_pass_the_checksum():
    assert all(_luhn(card.replace(" ", "")) for card in CARDS)


def test_checkout_judges_the_placed_order():
    task = TASKS["checkout"]()
    goal = task.generate(np.random.default_rng(2))["goal"]
    line = {k: goal[k] for k in ("colour", "size", "qty")} | {"product": goal["product"]}
    order = {
        "lines": [line],
        "coupon": goal["coupons"][-1],
        "shipping": goal["shipping"],
        "delivery": goal["delivery"],
        "payment": goal["payment"],
    }
    assert task.judge(goal, {"order": None}) == (False, "in_progress", False)
    assert task.judge(goal, {"order": order}) == (True, "order_placed", True)
    wrong = order | {"delivery": "pickup" if goal["delivery"] != "pickup" else "express"}
    assert task.judge(goal, {"order": wrong}) == (True, "wrong_order", False)


def test_form_judges_the_submitted_application():
    task = TASKS["form"]()
    goal = task.generate(np.random.default_rng(3))["goal"]
    assert task.judge(goal, {"submitted": None})[0] is False
    assert task.judge(goal, {"submitted": goal["expected"]}) == (True, "submitted", True)
    other = json.loads(json.dumps(goal["expected"]))
    other["account"]["username"] = goal["usernames"][0] + "x"
    assert task.judge(goal, {"submitted": other}) == (True, "wrong_details", False)


def test_order_admin_judges_refunds_status_and_notification():
    task = TASKS["order_admin"]()
    goal = task.generate(np.random.default_rng(4))["goal"]
    refund = {
        "lines": goal["refund"],
        "reason": goal["reason"],
        "restock": goal["restock"],
        "amount": goal["amount"],
    }
    note = {"template": goal["template"], "note": goal["message"]}
    record = {
        "status": goal["status"],
        "refunds": [refund],
        "notes": [goal["note"]],
        "notifications": [],
    }
    order = goal["order"]
    assert task.judge(goal, {"orders": {order: record}}) == (False, "in_progress", False)
    done = record | {"notifications": [note]}
    assert task.judge(goal, {"orders": {order: done}}) == (True, "resolved", True)
    early = record | {"status": "delivered", "notifications": [note]}
    assert task.judge(goal, {"orders": {order: early}}) == (True, "incomplete", False)
    wrong = record | {"refunds": [refund | {"restock": not goal["restock"]}]}
    assert task.judge(goal, {"orders": {order: wrong}}) == (True, "wrong_refund", False)
    assert task.judge(goal, {"orders": {"1": record}})[1] == "wrong_order"


# MiniWoB++ goal fields and starting pages (as miniwob_hooks.js reads them), with the
# subgoal library each gets: every variant a task's instances take.
MINIWOB_CASES = [
    ("click-button", {"target": "Ok"}, {}, ["click_button"]),
    ("click-checkboxes", {"button": "submit"}, {"checked": []}, ["submit"]),
    (
        "click-checkboxes",
        {"target 0": "ab", "target 1": "cd", "button": "submit"},
        {"checked": []},
        ["tick_1", "tick_2", "submit"],
    ),
    ("click-dialog", {}, {}, ["close_dialog"]),
    ("click-link", {"target": "sit"}, {}, ["click_link"]),
    ("click-tab-2", {"target": "sit"}, {"active": 0, "links": [["sit"], [], []]}, ["click_link"]),
    (
        "click-tab-2",
        {"target": "sit"},
        {"active": 0, "links": [["et"], [], ["sit"]]},
        ["open_tab", "click_link"],
    ),
    ("choose-list", {"target": "Togo"}, {"selected": "Togo"}, ["submit"]),
    ("choose-list", {"target": "Togo"}, {"selected": "Peru"}, ["choose", "submit"]),
    ("email-inbox", {"by": "Ann", "task": "delete"}, {"open": ""}, ["open_email", "trash_email"]),
    ("email-inbox", {"by": "Ann", "task": "star"}, {"open": ""}, ["open_email", "star_email"]),
    (
        "email-inbox",
        {"by": "Ann", "task": "reply", "message": "Hi."},
        {"open": ""},
        ["open_email", "start_reply", "write_reply", "send"],
    ),
    (
        "email-inbox",
        {"by": "Ann", "task": "forward", "to": "Bo"},
        {"open": ""},
        ["open_email", "start_forward", "address_forward", "send"],
    ),
    ("enter-text", {"target": "Ann"}, {"tt": ""}, ["type_text", "submit"]),
    (
        "login-user",
        {"username": "ann", "password": "x1"},
        {"username": "", "password": ""},
        ["type_username", "type_password", "log_in"],
    ),
    (
        "search-engine",
        {"query": "Ann", "rank": "2"},
        {"query": "", "results": []},
        ["type_query", "search", "click_result"],
    ),
    (
        "search-engine",
        {"query": "Ann", "rank": "8"},
        {"query": "", "results": []},
        ["type_query", "search", "open_page", "click_result"],
    ),
]


@pytest.mark.parametrize(("task", "fields", "page", "ids"), MINIWOB_CASES)
def test_miniwob_libraries_hold_what_is_left_to_do_in_prerequisite_order(task, fields, page, ids):
    subgoals = MINIWOB_TASKS[task].subgoals(fields, page)
    pickle.loads(pickle.dumps(subgoals))
    assert [sg.id for sg in subgoals] == ids
    assert all(sg.description for sg in subgoals)
    assert all(set(sg.requires) <= set(ids[:n]) for n, sg in enumerate(subgoals))
    tracker = SubgoalTracker(subgoals)
    start = WebState(instance={}, app={"page": page, "done": False})
    assert not any(tracker.update(start).values())
    won = WebState(instance={}, app={"page": page, "done": True, "reward": 1.0})
    assert tracker.update(won)[ids[-1]] == (len(ids) == 1)  # the end waits for the rest


def test_miniwob_tasks_cover_the_registered_pages():
    assert {case[0] for case in MINIWOB_CASES} == set(MINIWOB_TASKS)
