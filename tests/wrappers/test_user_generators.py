"""User-defined guides and reviewers (no base class of ours) through AddGuide and AddReview."""

import time

import gymnasium as gym
import pytest
from gymnasium import spaces

import feedbackgym
from feedbackgym.config import FeedbackConfig, merge_config
from feedbackgym.core import Subgoal
from feedbackgym.errors import ConfigError, GeneratorError
from feedbackgym.feedback import Guide, Reviewer, SubgoalGuide, TrajectoryReviewer
from feedbackgym.wrappers import AddGuide, AddReview, SubgoalContext, WithSubgoals
from tests.feedback.user_generators import (
    BrokenGuide,
    ChecklistGuide,
    Critic,
    RubricReviewer,
    SlowAsyncGuide,
    SlowReviewer,
)


class Corridor(gym.Env):
    """A third-party text env: walk right along five cells."""

    def __init__(self):
        self.observation_space = spaces.Text(64, charset="abcdefghijklmnopqrstuvwxyz0123456789 .")
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = 0
        return self._obs(), {}

    def step(self, action):
        self.position = max(0, self.position + (1 if action == 1 else -1))
        done = self.position >= 4
        return self._obs(), float(done), done, False, {"outcome": "arrived" if done else ""}

    def _obs(self):
        return f"you are at cell {self.position}."


def _at(cell):
    def reached(ctx: SubgoalContext) -> bool:
        return ctx.env.unwrapped.position >= cell

    return reached


SUBGOALS = [
    Subgoal("middle", "Reach the middle.", _at(2)),
    Subgoal("end", "Reach the end.", _at(4), ("middle",)),
]


def corridor():
    return WithSubgoals(Corridor(), SUBGOALS, success=_at(4))


def test_user_objects_meet_the_protocols_and_the_built_ins_too():
    assert not issubclass(ChecklistGuide, (SubgoalGuide,))
    assert isinstance(ChecklistGuide(), Guide) and isinstance(RubricReviewer(), Reviewer)
    assert isinstance(SubgoalGuide(), Guide) and isinstance(TrajectoryReviewer(), Reviewer)
    assert not isinstance(RubricReviewer(), Guide)


@pytest.mark.parametrize(
    "make", [lambda: gym.make("feedbackgym/OpsIncidentEasy-v0", obs_mode="both"), corridor]
)
def test_user_guide_and_reviewer_through_the_wrappers(make):
    guide = ChecklistGuide()
    env = AddReview(
        AddGuide(make(), every=1, channels=("text", "info"), guide=guide, dropout=0.0),
        channels=("text", "info"),
        reviewer=RubricReviewer(),
    )
    obs, info = env.reset(seed=0)
    first = env.get_wrapper_attr("subgoals")[0]
    assert info["feedback"]["guide"]["subgoal_ids"] == [first.id]
    assert info["feedback"]["guide"]["text"].endswith("(text)")  # the guide read the text obs
    text = obs if isinstance(obs, str) else obs["text"]
    assert text.endswith(info["feedback"]["guide"]["text"])
    done, steps = False, 0
    while not done:
        action = env.unwrapped.expert_action() if hasattr(env.unwrapped, "expert_action") else 1
        obs, _, terminated, truncated, info = env.step(action)
        done, steps = terminated or truncated, steps + 1
    review = info["feedback"]["review"]
    assert review["summary"].startswith("rubric: ") and "episode 0" in review["summary"]
    assert info["feedback"]["review_episode"] == 0 and review["success"]
    assert guide.calls == steps  # a hint every step but the last
    obs, info = env.reset()
    assert "rubric: " in (obs if isinstance(obs, str) else obs["text"])  # next episode's obs
    stats = env.feedback_stats()
    assert stats["misses"] == 0 and stats["reviews_given"] == 1
    env.close()


def test_generators_named_as_module_class_and_in_a_config_file(tmp_path):
    env = AddGuide(corridor(), guide="tests.feedback.user_generators:Critic", dropout=0.0)
    assert type(env.generator) is Critic
    path = tmp_path / "feedback.yaml"
    path.write_text(
        "guide: {generator: 'tests.feedback.user_generators:ChecklistGuide', dropout: 0.0}\n"
        "review: {generator: 'tests.feedback.user_generators:RubricReviewer'}\n"
    )
    env = feedbackgym.make("feedbackgym/OpsIncidentEasy-v0", feedback=str(path))
    env.set_feedback_state(feedbackgym.FeedbackState("both", 1.0, 1.0))
    _, info = env.reset(seed=0)
    assert info["feedback"]["guide"]["texts"][0].endswith("(no text)")
    info = env.step("escalate")[-1]
    assert info["feedback"]["review"]["summary"].startswith("rubric: ")
    assert "task feedbackgym/OpsIncidentEasy" in info["feedback"]["review"]["summary"]
    env.close()


def test_bad_generators_raise_errors_that_name_them():
    with pytest.raises(GeneratorError, match="RubricReviewer is not a guide: it needs a hint"):
        AddGuide(corridor(), guide=RubricReviewer())
    with pytest.raises(GeneratorError, match="has no 'Nope'"):
        AddReview(corridor(), reviewer="tests.feedback.user_generators:Nope")
    with pytest.raises(GeneratorError, match="'module:Class'"):
        AddReview(corridor(), reviewer="no_colon")
    with pytest.raises(ValueError, match="either a guide generator"):
        AddGuide(corridor(), guide=ChecklistGuide(), source="tcp://127.0.0.1:5999")
    with pytest.raises(ConfigError, match="guide.generator"):
        merge_config(FeedbackConfig(), {"guide": {"generator": "no_colon"}})
    with pytest.raises(ConfigError, match="exclude each other"):
        merge_config(
            FeedbackConfig(), {"review": {"generator": "a:B", "source": "tcp://127.0.0.1:1"}}
        )


def test_a_slow_async_guide_is_skipped_and_counted_without_blocking_the_step():
    env = AddGuide(corridor(), every=1, guide=SlowAsyncGuide(), dropout=0.0, deadline_ms=20)
    start = time.perf_counter()
    _, info = env.reset(seed=0)
    for _ in range(3):
        info = env.step(0)[-1]
    elapsed = time.perf_counter() - start
    assert info["feedback"]["guide"] == {}
    stats = env.feedback_stats()
    assert stats["hints_late"] == 4 and stats["hints_given"] == 0 and stats["misses"] == 4
    assert elapsed < 0.3 * 4  # deadlines of 20 ms, not four answers of 300 ms
    env.close()


def test_a_failing_guide_is_counted_never_raised():
    env = AddGuide(corridor(), every=1, guide=BrokenGuide(), dropout=0.0)
    env.reset(seed=0)
    env.step(1)
    assert env.feedback_stats()["misses"] == 2
    env.close()


def test_a_slow_review_lands_in_a_later_episode_and_says_which():
    env = AddReview(
        corridor(), channels=("text", "info", "credit"), reviewer=SlowReviewer(), deadline_ms=10
    )
    env.reset(seed=0)
    for _ in range(4):
        info = env.step(1)[-1]
    assert info["feedback"]["review"] == {} and info["feedback"]["credit"] == {}
    assert env.feedback_stats()["reviews_late"] == 1
    time.sleep(SlowReviewer.delay + 0.2)
    obs, info = env.reset()  # landed between episodes: the observation carries it
    assert "rubric: 2/2 reached" in obs
    info = env.step(0)[-1]  # and the first step's info, naming episode 0
    assert info["feedback"]["review"]["summary"].startswith("rubric: 2/2")
    assert info["feedback"]["review_episode"] == 0 and info["feedback"]["credit"] == {}
    info = env.step(1)[-1]
    assert info["feedback"]["review"] == {} and info["feedback"]["review_episode"] == -1
    assert env.feedback_stats()["reviews_given"] == 1
    env.close()
