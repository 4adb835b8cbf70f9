"""verifiers v1's ``OpenEnvTaskset(base_url=...)`` evaluates episodes of a served env.

The model is ``feedbackgym.language.stand_in_server``, a STAND-IN chat server (not a
language model): to verifiers' OpenEnv turn it answers the first listed action, so
this tests the plumbing (schema, reset, steps, rewards, the end), not a policy.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("openenv")
pytest.importorskip("verifiers")
from verifiers.v1.cli.eval.runner import run_eval  # noqa: E402
from verifiers.v1.configs.cli.eval import EvalConfig  # noqa: E402
from verifiers.v1.tasksets.openenv import OpenEnvConfig, OpenEnvEnvConfig  # noqa: E402

from feedbackgym.language.stand_in_server import stand_in_server  # noqa: E402
from feedbackgym.serving.server_process import env_server  # noqa: E402


def test_verifiers_evaluates_served_episodes(tmp_path, monkeypatch):
    monkeypatch.setenv("STAND_IN_KEY", "none")
    served = ("feedbackgym/OpsIncidentEasy-v1", "--kwarg", "max_episode_steps=3")
    with stand_in_server() as model, env_server(*served) as url:
        resets = [{"seed": seed} for seed in range(3)]
        config = EvalConfig(
            env=OpenEnvEnvConfig(
                taskset=OpenEnvConfig(id="openenv", base_url=url, resets=resets),
                player={"runtime": {"type": "subprocess"}},
            ),
            serve=None,
            rich=None,
            model="stand-in",
            client={"base_url": model, "api_key_var": "STAND_IN_KEY"},
            output_dir=tmp_path,
        )
        episodes = asyncio.run(run_eval(config))
    assert len(episodes) == 3 and all(episode.ok for episode in episodes)
    for episode in episodes:
        (trace,) = episode.traces
        assert trace.is_completed and not trace.errors
        assert len(trace.calls) == 3  # one model call a step, up to the server's time limit
        assert "openenv_reward" in trace.rewards
    assert [episode.task.data.reset for episode in episodes] == resets
