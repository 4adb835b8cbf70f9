"""``compare``'s line on what its validation seeds pose, counted by task keys."""

from __future__ import annotations

import time

from feedbackgym.training.experiments.task_overlap import validation_overlap


def test_v2s_validation_tasks_are_counted_and_none_is_a_train_task():
    line = validation_overlap("feedbackgym/OpsIncidentMedium-v2", {}, 30, train_seeds=500)
    assert line is not None and line.startswith("30 validation seeds (split test): ")
    assert ", 0 of them among the " in line


def test_v1s_train_seeds_are_counted_on_its_train_split():
    line = validation_overlap("feedbackgym/OpsIncidentEasy-v1", {}, 5, train_seeds=50)
    assert line is not None and "first 50 train seeds" in line


def test_an_env_without_task_keys_gets_no_line_and_no_env_is_made():
    start = time.perf_counter()
    assert validation_overlap("feedbackgym/WebForm-v0", {}, 30) is None  # no browser started
    assert validation_overlap("feedbackgym/CodeFix-v0", {}, 30) is None
    assert time.perf_counter() - start < 5
