"""OpsIncident-v2 at the ``phase`` level: hints and reviews say only what the symptoms showed."""

from __future__ import annotations

import re

import numpy as np
import pytest

from feedbackgym.envs.incident import IncidentEnv
from feedbackgym.envs.incident.v2 import IncidentEnvV2
from feedbackgym.wrappers import AddGuide, AddReview

ROOT_KINDS = ("find_root_cause", "mitigate", "verify_recovery")
"""Steps about the cause: a hint of these names only services whose own logs showed it."""


def _named(text: str, names: tuple[str, ...]) -> set[str]:
    return {n for n in names if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)}


def _stack(difficulty: str, version: type[IncidentEnv] = IncidentEnvV2) -> AddReview:
    guided = AddGuide(
        version(difficulty, obs_mode="both", split="test"),
        every=1,
        channels=("text", "info", "vector"),
    )
    return AddReview(guided, window=80, channels=("info", "text"), stall_steps=2)


def _act(policy: str, env: IncidentEnv, rng: np.random.Generator) -> int:
    if policy == "expert":
        return env.expert_action()
    live = np.flatnonzero(env.action_masks())
    if policy == "inspections":
        live = [a for a in live if env.action_meanings[a].startswith("inspect")]
    return int(rng.choice(live))


def _leaks(unwrapped: IncidentEnv, obs, info, review_text: str) -> set[str]:
    names, state = unwrapped.services, unwrapped.state
    shown = set(unwrapped.observed_targets)  # alerts, off readings, blaming lines
    causes = {state.name(s) for s in state.cause_seen}
    leaked = set()
    hint = info["feedback"]["guide"]
    if hint:
        allowed = causes if hint["kind"] in ROOT_KINDS else shown
        leaked |= (_named(hint["text"], names) | set(hint["targets"])) - allowed
    leaked |= {names[p] for p in np.flatnonzero(obs["hint_targets"][: len(names)])} - shown
    review = info["feedback"].get("review") or {}
    leaked |= (_named(str(review), names) | _named(review_text, names)) - shown
    return leaked


@pytest.mark.parametrize("difficulty", ["easy", "medium"])
def test_no_hint_mark_or_review_goes_beyond_the_symptoms_shown(difficulty):
    env = _stack(difficulty)
    unwrapped = env.unwrapped
    rng = np.random.default_rng(0)
    first_hints, hints, named = set(), 0, 0
    for policy in ("expert", "random", "inspections"):
        for seed in range(300):
            obs, info = env.reset(seed=seed)
            first_hints.add(re.sub(r" \(seen: [^)]*\)", "", info["feedback"]["guide"]["text"]))
            done = False
            while True:
                review = env.last_review.text if done and env.last_review is not None else ""
                leaked = _leaks(unwrapped, obs, info, review)
                assert not leaked, (policy, seed, leaked, info["feedback"])
                hint = info["feedback"]["guide"]
                hints += bool(hint)
                named += bool(hint and hint["targets"])
                if done:
                    break
                obs, _, terminated, truncated, info = env.step(_act(policy, unwrapped, rng))
                done = terminated or truncated
    # the first hint's words, less the alerts it names, are the same for every incident:
    # nothing in them depends on the hidden path (v1's "then" said trace or find_root_cause)
    assert len(first_hints) == 1, first_hints
    assert hints > 10_000 and named > 1_000  # the check ran on real hints that name services


def test_the_same_check_finds_v1s_hints_naming_the_end_of_the_trail():
    env = _stack("medium", IncidentEnv)
    unwrapped, rng, leaking = env.unwrapped, np.random.default_rng(0), 0
    for seed in range(20):
        obs, info = env.reset(seed=seed)
        done, leaked = False, set()
        while not done:
            leaked |= _leaks(unwrapped, obs, info, "")
            obs, _, terminated, truncated, info = env.step(_act("expert", unwrapped, rng))
            done = terminated or truncated
        leaking += bool(leaked)
    assert leaking >= 15


def test_a_cause_is_named_only_once_its_own_logs_show_it():
    env = _stack("easy")
    unwrapped = env.unwrapped
    _, info = env.reset(seed=11)
    root = unwrapped.state.name(unwrapped.state.faults[0].root)
    steps_before_logs = []
    while not unwrapped.state.cause_seen:
        steps_before_logs.append(root in info["feedback"]["guide"]["text"])
        _, _, _, _, info = env.step(unwrapped.expert_action())
    assert steps_before_logs and not any(steps_before_logs)
    while info["feedback"]["guide"]["kind"] not in ("mitigate", "verify_recovery"):
        _, _, _, _, info = env.step(unwrapped.expert_action())
    assert root in info["feedback"]["guide"]["targets"]
