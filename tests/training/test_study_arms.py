"""Every arm of the OpsIncident-v2 feedback study trains with both trainers and resumes."""

import dataclasses
import json

import pytest

from feedbackgym.training.experiments.launch import train_run
from tests.training.tiny_runs import tiny_run

STUDY_ARMS = (
    "shaping",
    "guide+shaping+critic-hints",
    "guide-then-review+shaping",
    "shaping+curriculum",
    "shaping+reexplore",
    "guide+shaping+failure-hints",
)
"""The arms ``docs/results/ops_v2/feedback`` screens (entity policy, hard-v2)."""


@pytest.mark.parametrize("trainer", ["torch", "sb3"])
@pytest.mark.parametrize("arm", STUDY_ARMS)
def test_a_study_arm_trains_the_entity_policy_and_resumes(tmp_path, trainer, arm):
    config = tiny_run("feedbackgym/OpsIncidentHard-v2", arm, tmp_path, trainer=trainer)
    train_run(config)
    state = train_run(dataclasses.replace(config, total_steps=128), resume=True)
    assert state["timesteps"] == 128
    saved = json.loads((tmp_path / "config.json").read_text())
    assert (saved["policy"], saved["review_credit"]) == ("entity", False)
