"""Rollouts on the model server: which choices are the model's, which runs play there, and errors.

The whole path (the packaged model's server playing a GRPO round's episodes and its
validation, a version published for each) runs in ``tests/serving/test_env_server_docs.py``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
from feedbackgym.errors import ConfigError  # noqa: E402
from feedbackgym.training.llm.llm_settings import LLMRunConfig  # noqa: E402
from feedbackgym.training.llm.served_rollouts import (  # noqa: E402
    branching,
    served_model_file,
)

# three actions, each ending with the stop (9): "wait", "restart db", "restart lb"
ACTIONS = [[5, 9], [6, 7, 9], [6, 8, 9]]


def test_a_token_is_the_models_choice_only_where_the_actions_branch():
    assert branching(ACTIONS, [5, 9]) == [1, 0]
    assert branching(ACTIONS, [6, 8, 9]) == [1, 1, 0]
    assert branching([[5, 9]], [5, 9]) == [0, 0]  # one action: nothing to choose


def test_tokens_that_are_no_action_are_refused():
    with pytest.raises(ValueError, match="leave the actions' trie"):
        branching(ACTIONS, [6, 5, 9])
    with pytest.raises(ValueError, match="end inside the actions' trie"):
        branching(ACTIONS, [6, 7])


def _config(tmp_path, **settings):
    return LLMRunConfig(
        env_id="feedbackgym/OpsIncidentEasy-v1",
        arm="sparse",
        seed=0,
        total_rounds=1,
        out_dir=str(tmp_path),
        **settings,
    )


def test_auto_plays_a_gguf_model_on_the_server_and_a_model_folder_in_torch(tmp_path):
    assert _config(tmp_path).served_rollouts  # the packaged model
    assert _config(tmp_path, model="models/other.gguf").served_rollouts
    assert not _config(tmp_path, model="models/tiny-gemma").served_rollouts
    assert not _config(tmp_path, rollouts="torch").served_rollouts


def test_bad_rollouts_settings_are_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="rollouts must be one of auto, server, torch"):
        _config(tmp_path, rollouts="vllm")
    with pytest.raises(ValueError, match="the model server plays GGUF models.*tiny-gemma"):
        _config(tmp_path, model="models/tiny-gemma", rollouts="server")
    with pytest.raises(ConfigError, match="need a GGUF model"):
        served_model_file("models/tiny-gemma")


def test_a_run_may_change_where_its_episodes_are_played_on_resume():
    assert "rollouts" in LLMRunConfig.resumable_changes
