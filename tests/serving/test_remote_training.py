"""TRL over a served env: one GRPO round of ``train-llm --env-url`` on a tiny model, the factory.

The model is built in the test (``tests/training/llm/tiny_lm.py``): a Gemma 3 of
random weights with a word vocabulary of OpsIncident-v1's texts.
"""

from __future__ import annotations

import csv
import json

import gymnasium as gym
import pytest

pytest.importorskip("openenv")
pytest.importorskip("trl")
from feedbackgym.cli import main  # noqa: E402
from feedbackgym.experts import held_out_seeds  # noqa: E402
from feedbackgym.serving.server_process import env_server  # noqa: E402
from feedbackgym.training.llm.trl_remote import RemoteFeedbackEnvironments  # noqa: E402
from tests.training.llm.tiny_lm import save_tiny_model  # noqa: E402

ENV = "feedbackgym/OpsIncidentEasy-v1"


@pytest.fixture(scope="module")
def server():
    options = ("--kwarg", "max_episode_steps=6", "--max-sessions", "8")
    with env_server(ENV, *options) as url:
        yield url


def test_one_grpo_round_of_train_llm_on_the_served_env(server, tmp_path):
    validation = held_out_seeds(gym.make(ENV))[0]  # what the served env validates on
    model = save_tiny_model(tmp_path / "tiny", env_id=ENV, seeds=(0, validation))
    out = tmp_path / "run"
    args = ["train-llm", "--env-url", server, "--rounds", "1", "--model", str(model)]
    args += ["--out", str(out), "--groups", "1", "--group-size", "2", "--seed-pool", "1"]
    args += ["--eval-every", "1", "--eval-episodes", "1", "--max-tokens", "4096"]
    args += ["--device", "cpu", "--cpu-threads", "1", "--dropout", "0"]
    assert main(args) == 0
    chats = [json.loads(line) for line in (out / "chats.jsonl").read_text().splitlines()]
    assert len(chats) == 2 and {chat["phase"] for chat in chats} == {"guide"}
    system = chats[0]["messages"][0]["content"]
    assert '"env_id": "feedbackgym/OpsIncidentEasy-v1"' in system
    assert all(len(chat["messages"]) <= 2 + 2 * 6 for chat in chats)  # the server's time limit
    (row,) = csv.DictReader((out / "curve.csv").open())
    assert row["phase"] == "fade"  # the run's controller at its end, sent with each reset
    config = json.loads((out / "config.json").read_text())
    assert config["env_url"] == server and config["env_id"] == ENV


def test_the_trl_factory_plays_a_session_its_controller_drives(server):
    environments = RemoteFeedbackEnvironments(server, rounds=2)
    assert environments.env_id == ENV and environments.controller.state.phase == "guide"
    episode = environments()
    first = episode.reset(seed=3)
    assert "feedbackgym/OpsIncidentEasy-v1" in first
    assert "is not an action" in episode.act("reboot everything")
    text = episode.act("wait")
    assert "Step 1 of 50" in text and "> wait" in text
    sent = environments.next_round()  # round 1 of 2: past the switch, sent with the next reset
    episode.reset(seed=3)
    state = episode._env.state()
    assert (state.driven_by, state.phase, state.round) == ("trainer", sent.phase, 1)
    assert sent.phase == "fade"
    environments.close()
