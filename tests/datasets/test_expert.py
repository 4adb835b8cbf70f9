"""Expert datasets from code and from ``feedbackgym datasets make``; ``inspect``."""

import gymnasium as gym
import pytest

from feedbackgym.cli import main
from feedbackgym.datasets import TrajectoryStore
from feedbackgym.envs.ops import VALIDATION_SEEDS
from feedbackgym.experts import held_out_seeds, make_expert_dataset

from .utils import feedback_stack


def test_train_and_validation_splits(store_path):
    make_expert_dataset("feedbackgym/OpsIncidentEasy-v0", store_path, 4, seed=5)
    store = make_expert_dataset("feedbackgym/OpsIncidentEasy-v0", store_path, 3, split="validation")
    train, validation = store.episodes(round="train"), store.episodes(round="validation")
    assert [m.seed for m in train] == [5, 6, 7, 8]
    assert [m.seed for m in validation] == list(VALIDATION_SEEDS["easy"][:3])
    assert all(m.success for m in train + validation)
    batch = store.sample(32, round="train", seed=0)
    assert batch["observations"]["alerts"].shape == (32, 8)


def test_expert_through_the_learners_stack(store_path):
    env = feedback_stack("feedbackgym/OpsIncidentEasy-v0")
    store = make_expert_dataset(env, store_path, 2, task_id="ops-easy-guided")
    (episode, _) = store.iter_episodes()
    assert episode.meta.task_id == "ops-easy-guided" and episode.events
    assert "hint_next" not in episode.observations  # channels=("info",): obs unchanged
    env.reset(seed=0)  # not closed: it belongs to the caller


def test_bad_requests():
    env = gym.make("feedbackgym/OpsIncidentEasy-v0")
    assert held_out_seeds(env) == VALIDATION_SEEDS["easy"]
    with pytest.raises(ValueError, match="held-out seeds"):
        make_expert_dataset(env, "unused", 2, seed=VALIDATION_SEEDS["easy"][0])
    with pytest.raises(ValueError, match="has 100 held-out seeds"):
        make_expert_dataset(env, "unused", 101, split="validation")
    with pytest.raises(ValueError, match="split"):
        make_expert_dataset(env, "unused", 1, split="holdout")
    with pytest.raises(ValueError, match="no held-out validation seeds"):
        held_out_seeds(gym.make("CartPole-v1"))


def test_make_and_inspect_commands(tmp_path, capsys):
    assert main(["datasets", "make", "feedbackgym/OpsIncidentHard-v0", "--episodes", "3"]) == 0
    path = tmp_path / "datasets" / "feedbackgym_OpsIncidentHard-v0-expert"
    assert "3 expert episodes (train)" in capsys.readouterr().out
    args = ["--episodes", "2", "--split", "validation", "--out", str(path)]
    assert main(["datasets", "make", "feedbackgym/OpsIncidentHard-v0", *args]) == 0
    assert len(TrajectoryStore(path)) == 5
    capsys.readouterr()
    assert main(["datasets", "inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1 segment(s), 0 cold, 0 log(s)" not in out  # two runs: two segments
    assert "| feedbackgym/OpsIncidentHard-v0 | train      | 3        |" in out
    assert "validation" in out and "100.0%" in out
    assert main(["datasets", "inspect", str(tmp_path / "nothing")]) == 2
    assert main(["datasets", "make", "feedbackgym/Nope-v0", "--episodes", "1"]) == 2


def test_inspect_counts_feedback(store_path, capsys):
    env = feedback_stack("feedbackgym/OpsIncidentEasy-v0")
    make_expert_dataset(env, store_path, 2)
    capsys.readouterr()
    assert main(["datasets", "inspect", str(store_path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "| train" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[5] == "guide 2" and int(cells[6]) > 2 and cells[7] == "0"
