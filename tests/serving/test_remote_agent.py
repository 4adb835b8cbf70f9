"""``feedbackgym agent --env-url``: our agent plays a served env on loopback.

The model is ``feedbackgym.language.stand_in_server``, a STAND-IN chat server
(not a language model) that answers each agent prompt with the env's expert
action, replayed from the episode the system message names: here the served
env's id, seed and keyword arguments, so a remote episode is solved only if
the server plays exactly the env the prompt names.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("openenv")
from feedbackgym.chat import ChatClient  # noqa: E402
from feedbackgym.language.stand_in_server import stand_in_server  # noqa: E402
from feedbackgym.serving.remote_agent import run_remote_agent  # noqa: E402
from feedbackgym.serving.server_process import env_server  # noqa: E402

ENV = "feedbackgym/OpsIncidentEasy-v1"


@pytest.fixture(scope="module")
def servers():
    with stand_in_server() as model, env_server(ENV, "--arm", "guide+shaping") as env:
        yield model, env


def test_the_agent_plays_the_served_env_with_its_hints(servers):
    model, env = servers
    client = ChatClient(model, "stand-in", constrain="none")
    results = list(run_remote_agent(env, client, episodes=2, seed=5, attempts=2))
    assert [(r.seed, r.attempt) for r in results] == [(5, 1), (5, 2), (6, 1), (6, 2)]
    assert all(r.success and r.outcome == "resolved" for r in results)
    assert all(r.invalid_replies == 0 and r.fallbacks == 0 for r in results)
    system = results[0].messages[0]["content"]
    assert '"env_id": "feedbackgym/OpsIncidentEasy-v1"' in system and '"seed": 5' in system


def test_the_agent_command_takes_env_url_instead_of_env(servers):
    model, env = servers
    command = [sys.executable, "-m", "feedbackgym", "agent", "--env-url", env]
    command += ["--base-url", model, "--model", "stand-in", "--episodes", "2", "--seed", "3"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == f"2 episodes, 100.0% success; played on {env}"
    assert lines[1].startswith("seed 3: arm ") and " success (resolved) " in lines[1]


def test_no_server_at_the_url_is_one_line():
    command = [sys.executable, "-m", "feedbackgym", "agent", "--env-url", "http://127.0.0.1:9"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith("feedbackgym agent: error: no feedbackgym serve-env server")
