"""The public factory for your own TRL script: TRL's environment protocol, the feedback."""

import pytest

from feedbackgym.config import FeedbackConfig, merge_config
from feedbackgym.training.llm.trl_env import FeedbackEnvironments

ENV = "feedbackgym/OpsIncidentEasy-v0"
NO_DROPOUT = merge_config(
    FeedbackConfig(),
    {"guide": {"dropout": 0.0}, "schedule": {"switch_at": 0.5, "fade": 0, "adaptive": None}},
)


def _expert_episode(environments, seed):
    """Plays one episode through the tools as TRL would (the expert choosing): its texts."""
    episode = environments()
    texts = [episode.reset(prompt=[], seed=seed)]
    env = episode._env.unwrapped
    while "The episode is over." not in texts[-1]:
        texts.append(episode.act(env.action_meanings[env.expert_action()]))
    return episode, texts


def test_the_instances_meet_trls_environment_protocol():
    transformers = pytest.importorskip("transformers")
    environments = FeedbackEnvironments(ENV, rounds=4)
    episode = environments()
    public = sorted(name for name in dir(type(episode)) if not name.startswith("_"))
    assert public == ["act", "get_reward", "reset"]  # TRL: reset, get_reward, the rest are tools
    schema = transformers.utils.get_json_schema(episode.act)  # how TRL describes a tool
    assert schema["function"]["name"] == "act"
    assert schema["function"]["parameters"]["required"] == ["action"]
    rows = environments.rows(range(3))
    assert rows[1] == {"prompt": [{"role": "user", "content": ""}], "seed": 1}


def test_hints_before_the_switch_reviews_of_earlier_attempts_after_it_reward_from_the_env():
    environments = FeedbackEnvironments(ENV, arm="guide-then-review", feedback=NO_DROPOUT, rounds=2)
    episode, texts = _expert_episode(environments, seed=3)
    assert "Hint:" in texts[0] and any("Hint:" in text for text in texts[1:])
    assert episode.get_reward() == 1.0  # the expert resolves it: the env's sparse reward
    state = environments.next_round()  # round 1 of 2: past the switch
    assert state.phase == "review" and environments.episodes == []
    _, texts = _expert_episode(environments, seed=3)  # reviewed now
    assert not any("Hint:" in text for text in texts)
    first = environments().reset(seed=3)
    assert "Reviews of your earlier attempts" in first and "Hint:" not in first
    assert "Reviews of your earlier attempts" not in environments().reset(seed=4)
    environments.close()


def test_an_invalid_action_changes_nothing_and_an_ended_episode_takes_no_more():
    environments = FeedbackEnvironments(ENV, rounds=2, env_kwargs={"max_episode_steps": 2})
    episode = environments()
    episode.reset(seed=0)
    assert "is not an action" in episode.act("restart the internet")
    assert episode._env.unwrapped.state.step == 0
    episode.act("wait")
    assert episode.act("wait").endswith("The episode is over.")
    assert episode.act("wait") == "The episode is over."
    assert environments.episodes == [(0, 0.0, False)]


def test_the_callback_starts_a_round_at_each_step():
    pytest.importorskip("transformers")
    environments = FeedbackEnvironments(ENV, arm="guide-then-review", feedback=NO_DROPOUT, rounds=2)
    callback = environments.callback()
    assert environments.controller.state.phase == "guide"
    callback.on_step_end(None, None, None)
    assert environments.controller.round == 1 and environments.controller.state.phase == "review"
