"""``serve-env`` sends nothing that names a task's hidden cause: OpsIncident-v2 over the wire."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

pytest.importorskip("openenv")
from websockets.sync.client import connect  # noqa: E402

from feedbackgym.envs.incident import FAULT_TYPES  # noqa: E402
from feedbackgym.envs.incident.catalog import FAULTS  # noqa: E402
from feedbackgym.protocol import REWARD_FIELDS, TASK_ID  # noqa: E402
from feedbackgym.serving.server_process import env_server  # noqa: E402
from tests.serving.client import send, ws_url  # noqa: E402

ENV = "feedbackgym/OpsIncidentMedium-v2"
WORDS = {*FAULT_TYPES, *(FAULTS[f].label for f in FAULT_TYPES)}


def _readable(info: dict) -> str:
    """The info keys that may not depend on the cause, as the client reads them."""
    return json.dumps({k: v for k, v in info.items() if k not in {*REWARD_FIELDS, TASK_ID}})


def test_thirty_test_episodes_over_the_wire_name_no_fault_and_no_root():
    local = gym.make(ENV, obs_mode="text", split="test")
    library, ids = None, {}
    with env_server(ENV, "--kwarg", "split=test", "--idle-timeout", "120") as url:
        with connect(ws_url(url)) as ws:
            for seed in range(30):
                _, local_info = local.reset(seed=seed)
                state = local.unwrapped.state
                forbidden = WORDS | {state.name(f.root) for f in state.faults}
                reply = send(ws, {"type": "reset", "data": {"seed": seed}})["data"]
                served_id = reply["observation"]["info"][TASK_ID]
                # keyed by the server's own secret: a client cannot test guesses against it
                assert served_id != local_info[TASK_ID]
                ids.setdefault(local_info[TASK_ID], served_id)
                assert ids[local_info[TASK_ID]] == served_id  # the same task, the same id
                done, steps = False, 0
                while True:
                    info = reply["observation"]["info"]
                    assert "incident" not in info and len(info[TASK_ID]) == 16
                    library = library or set(info["subgoals"])
                    assert set(info["subgoals"]) == library  # one library for every incident
                    readable = _readable({k: v for k, v in info.items() if k != "action"})
                    assert not {w for w in forbidden if w in readable}, (seed, readable)
                    if done:
                        break
                    action = local.unwrapped.action_meanings[local.unwrapped.expert_action()]
                    local.step(action)
                    reply = send(ws, {"type": "step", "data": {"action": action}})["data"]
                    done, steps = reply["done"], steps + 1
                assert info["is_success"] and steps > 5
    local.close()
