"""The agent's feedback arms and attempts, against the stand-in chat server on loopback.

The stand-in (``feedbackgym.language.stand_in_server``) is not a language model: it answers
the expert's action, so every episode here succeeds in a few steps and the tests are about
what the prompts carry, what is recorded and what is exported.
"""

import json
import subprocess
import sys

import pytest

import feedbackgym  # noqa: F401
from feedbackgym.core import Review
from feedbackgym.errors import ConfigError
from feedbackgym.language.agent_arms import AGENT_ARMS, LabelAttempt, agent_arm, attempt_label
from feedbackgym.language.agent_loop import run_agent
from feedbackgym.language.chat_export import export_chat

pytest.importorskip("openai")
pytest.importorskip("h5py")
from feedbackgym.chat import ChatClient  # noqa: E402
from feedbackgym.datasets import TrajectoryStore  # noqa: E402
from feedbackgym.language.stand_in_server import stand_in_server  # noqa: E402

ENV = "feedbackgym/OpsIncidentEasy-v0"
MEMORY_HEADER = "Reviews of your earlier attempts"


@pytest.fixture(scope="module")
def url():
    with stand_in_server() as base_url:
        yield base_url


class EpisodeReviewer:
    """Reviews each episode with its number in the summary, so a review says whose it is."""

    def __init__(self):
        self.asked = 0

    def review(self, request):
        self.asked += 1
        last = request.records[-1].step
        return Review(
            window=(request.records[0].step, last),
            reusable=(),
            reexplore=(),
            summary=f"episode-{request.episode}.",
            score=1.0 if request.success else 0.0,
            success=request.success,
        )


def _hinted(result):
    return [m for m in result.messages[1::2] if "\n\nHint: " in m["content"]]


def _play(url, arm, reviewer=None, **kwargs):
    client = ChatClient(url, "stand-in", timeout_s=10)
    return list(
        run_agent(ENV, client, episodes=2, attempts=3, arm=arm, reviewer=reviewer, **kwargs)
    )


@pytest.mark.parametrize("arm", list(AGENT_ARMS))
def test_hints_are_in_the_prompt_only_on_the_attempts_the_arm_gives_them(url, arm):
    results = _play(url, arm, reviewer=EpisodeReviewer(), memory=3)
    assert [(r.seed, r.attempt) for r in results] == [(s, a) for s in (0, 1) for a in (1, 2, 3)]
    for r in results:
        assert r.arm == arm and r.success
        hinted = agent_arm(arm).hints_on(r.attempt)
        assert bool(_hinted(r)) == hinted and (r.hints > 0) == hinted, (arm, r.attempt)


@pytest.mark.parametrize("arm", ["review", "guide-then-review"])
def test_review_arms_carry_the_same_seeds_earlier_attempts_and_never_another_seeds(url, arm):
    reviewer = EpisodeReviewer()
    results = _play(url, arm, reviewer=reviewer, memory=2)
    for number, r in enumerate(results):
        system = r.messages[0]["content"]
        earlier = [n for n in range(number) if results[n].seed == r.seed][-2:]  # bounded by 2
        shown = [n for n in range(len(results)) if f"episode-{n}." in system]
        assert shown == earlier, (r.seed, r.attempt, system)
        assert (MEMORY_HEADER in system) == bool(earlier)
    assert reviewer.asked == len(results)


@pytest.mark.parametrize("arm", ["sparse", "guide"])
def test_arms_without_reviews_never_ask_the_reviewer(url, arm):
    reviewer = EpisodeReviewer()
    results = _play(url, arm, reviewer=reviewer)
    assert reviewer.asked == 0 and all(r.review is None for r in results)
    assert not any(MEMORY_HEADER in r.messages[0]["content"] for r in results)


def test_the_default_arm_carries_reviews_whatever_their_seed(url):
    results = _play(url, "guide+review", reviewer=EpisodeReviewer(), memory=1)
    assert "episode-2." in results[3].messages[0]["content"]  # seed 1 sees seed 0's last
    assert all(_hinted(r) for r in results)


def test_the_arm_and_attempt_are_recorded_and_exported(url, tmp_path):
    store, chats = tmp_path / "store", tmp_path / "chats.jsonl"
    client = ChatClient(url, "stand-in", timeout_s=10)
    results = list(
        run_agent(ENV, client, episodes=2, seed=3, attempts=2, arm="guide-then-review", store=store)
    )
    labels = [attempt_label(m.env_spec) for m in TrajectoryStore(store).episodes()]
    assert labels == [("guide-then-review", 1), ("guide-then-review", 2)] * 2
    assert export_chat(store, chats, memory=3) == 4
    records = [json.loads(line) for line in chats.read_text().splitlines()]
    assert [(r["seed"], r["arm"], r["attempt"]) for r in records] == [
        (3, "guide-then-review", 1),
        (3, "guide-then-review", 2),
        (4, "guide-then-review", 1),
        (4, "guide-then-review", 2),
    ]
    assert [r["messages"] for r in records] == [r.messages for r in results]  # rebuilt as sent
    second = records[1]["messages"]
    assert records[0]["review"]["summary"] in second[0]["content"]  # attempt 1's review
    assert MEMORY_HEADER not in records[2]["messages"][0]["content"]  # not seed 3's at seed 4
    assert not any("Hint: " in m["content"] for m in second[1::2])


def test_the_command_prints_each_episodes_arm_and_attempt(url, tmp_path):
    run = subprocess.run(
        [
            sys.executable, "-m", "feedbackgym", "agent", "--env", ENV, "--base-url", url,
            "--model", "stand-in", "--episodes", "1", "--attempts", "2", "--arm", "review",
            "--out", str(tmp_path), "--kwarg", "max_episode_steps=12",
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stdout.splitlines() if line.startswith("seed ")]
    assert [line.split(": success")[0] for line in lines] == [
        "seed 0: arm review attempt 1/2",
        "seed 0: arm review attempt 2/2",
    ]
    assert "hints 0" in lines[0] and run.stdout.splitlines()[-1].startswith(
        "2 episodes, 100.0% success (by attempt: 1: 100%, 2: 100%)"
    )


def test_unknown_arms_and_attempts_are_config_errors(url):
    client = ChatClient(url, "stand-in")
    with pytest.raises(ConfigError, match="no agent arm 'hints'"):
        next(run_agent(ENV, client, episodes=1, arm="hints"))
    with pytest.raises(ConfigError, match="attempts must be at least 1"):
        next(run_agent(ENV, client, episodes=1, attempts=0))


def test_an_unlabelled_spec_has_no_arm():
    import gymnasium as gym

    env = gym.make(ENV)
    assert attempt_label(env.spec.to_json()) == (None, None)
    assert attempt_label(LabelAttempt(env, "sparse", 3).spec.to_json()) == ("sparse", 3)
