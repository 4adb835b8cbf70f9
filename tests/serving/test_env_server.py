"""``feedbackgym serve-env`` on loopback: the routes, an episode, the errors, the limits."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

pytest.importorskip("openenv")
from websockets.exceptions import ConnectionClosed  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from feedbackgym.serving.connections import SESSION_CLOSED  # noqa: E402
from feedbackgym.serving.server_process import env_server  # noqa: E402
from tests.serving.client import get, send, wait_for, ws_url  # noqa: E402

ENV = "feedbackgym/OpsIncident-v1"


@pytest.fixture(scope="module")
def server():
    with env_server(ENV, "--max-sessions", "3", "--idle-timeout", "120") as url:
        yield url


def test_health_schema_metadata_and_settings(server):
    assert get(server, "/health") == {"status": "healthy"}
    schema = get(server, "/schema")
    assert schema["action"]["required"] == ["action"]
    fields = set(schema["observation"]["properties"])
    assert {"text", "actions", "hint", "review", "info", "reward", "done"} <= fields
    assert {"phase", "guide_weight", "reviews", "step_count"} <= set(schema["state"]["properties"])
    metadata = get(server, "/metadata")
    assert metadata["name"] == ENV and "guide-then-review+shaping" in metadata["description"]
    settings = get(server, "/settings")
    assert settings["arm"] == "guide-then-review+shaping" and settings["level"] == "phase"
    assert settings["spec_kwargs"]["obs_mode"] == "text"


def test_a_session_plays_the_episode_the_env_plays_in_process(server):
    local = gym.make(ENV, obs_mode="text")
    text, _ = local.reset(seed=7)
    with connect(ws_url(server)) as ws:
        reply = send(ws, {"type": "reset", "data": {"seed": 7}})
        assert reply["type"] == "observation"
        observation = reply["data"]["observation"]
        assert observation["text"] == text and "wait" in observation["actions"]
        done = False
        while not done:
            action = local.unwrapped.action_meanings[local.unwrapped.expert_action()]
            text, reward, terminated, truncated, info = local.step(action)
            reply = send(ws, {"type": "step", "data": {"action": action}})["data"]
            observation = reply["observation"]
            assert observation["text"] == text
            assert observation["info"]["env_reward"] == pytest.approx(reward)
            done = reply["done"]
            assert done == (terminated or truncated)
        assert observation["info"]["outcome"] == "resolved" and observation["info"]["is_success"]
        assert "incident" in info and "incident" not in observation["info"]  # it names the fault
        state = send(ws, {"type": "state"})["data"]
        assert (state["episodes"], state["phase"], state["driven_by"]) == (1, "guide", "server")
    local.close()
    assert wait_for(lambda: get(server, "/sessions")["open"] == 0, 10)


def test_a_bad_action_is_a_validation_error_naming_the_choices_and_the_session_lives(server):
    with connect(ws_url(server)) as ws:
        choices = send(ws, {"type": "reset", "data": {"seed": 1}})["data"]["observation"]["actions"]
        error = send(ws, {"type": "step", "data": {"action": "reboot everything"}})
        assert error["type"] == "error" and error["data"]["code"] == "VALIDATION_ERROR"
        message = error["data"]["errors"][0]["msg"]
        assert "'reboot everything' is not an action" in message
        assert all(choice in message for choice in choices)
        wrong_field = send(ws, {"type": "step", "data": {"act": "wait"}})
        assert wrong_field["data"]["code"] == "VALIDATION_ERROR"
        assert send(ws, {"type": "step", "data": {"action": "wait"}})["type"] == "observation"


def test_step_before_reset_and_unknown_reset_arguments_are_named(server):
    with connect(ws_url(server)) as ws:
        error = send(ws, {"type": "step", "data": {"action": "wait"}})
        assert error["data"]["code"] == "EXECUTION_ERROR"
        assert "send reset first" in error["data"]["message"]
        error = send(ws, {"type": "reset", "data": {"seed": 1, "difficulty": "hard"}})
        assert "unknown reset arguments ['difficulty']" in error["data"]["message"]


def test_a_trainer_drives_the_feedback_through_reset(server):
    trainer = {"phase": "review", "guide_weight": 0.0, "review_weight": 1.0, "round": 60}
    local = gym.make(ENV, obs_mode="text")
    local.reset(seed=3)
    with connect(ws_url(server)) as ws:
        bad = send(ws, {"type": "reset", "data": {"feedback_state": {"phase": "review"}}})
        assert bad["data"]["code"] == "VALIDATION_ERROR"
        reply = send(ws, {"type": "reset", "data": {"seed": 3, "feedback_state": trainer}})
        assert reply["data"]["observation"]["hint"] == ""
        done = False
        while not done:
            action = local.unwrapped.action_meanings[local.unwrapped.expert_action()]
            local.step(action)
            reply = send(ws, {"type": "step", "data": {"action": action}})["data"]
            assert reply["observation"]["hint"] == ""
            done = reply["done"]
        assert reply["observation"]["review"]  # the review arrives on the last step
        state = send(ws, {"type": "state"})["data"]
        assert state["driven_by"] == "trainer" and state["phase"] == "review"
        assert state["round"] == 60
        assert state["reviews"][0]["text"] == reply["observation"]["review"]
        again = send(ws, {"type": "reset", "data": {"seed": 4}})["data"]["observation"]
        assert again["review"] == reply["observation"]["review"]  # the last episode's, on reset
    local.close()


def test_capacity_and_the_idle_timeout():
    with env_server(ENV, "--max-sessions", "2", "--idle-timeout", "1") as url:
        first, second = connect(ws_url(url)), connect(ws_url(url))
        try:
            for ws in (first, second):
                assert send(ws, {"type": "reset", "data": {"seed": 0}})["type"] == "observation"
            assert get(url, "/sessions")["open"] == 2
            with connect(ws_url(url)) as third:
                refused = json.loads(third.recv(timeout=30))
            assert refused["data"]["code"] == "CAPACITY_REACHED"
            assert refused["data"]["max_sessions"] == 2
            # both silent: the reaper (every 5 s at least) closes their envs and sockets
            assert wait_for(lambda: get(url, "/sessions")["open"] == 0, 20)
            for ws in (first, second):
                with pytest.raises(ConnectionClosed) as closed:
                    ws.recv(timeout=30)
                assert closed.value.rcvd.code == SESSION_CLOSED
                assert "idle past --idle-timeout" in closed.value.rcvd.reason
            with connect(ws_url(url)) as fresh:  # the slots are free again
                assert send(fresh, {"type": "reset", "data": {"seed": 0}})["type"] == "observation"
        finally:
            first.close()
            second.close()
