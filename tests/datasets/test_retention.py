"""Retention: hot rounds stay, old ones move to a gzip cold file, the oldest are deleted."""

import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import h5py

from feedbackgym.cli import main
from feedbackgym.config import RetentionConfig
from feedbackgym.datasets import TrajectoryStore, prune
from feedbackgym.datasets._storage.catalog import Catalog, load_episodes
from feedbackgym.datasets._storage.segment import write_segment
from feedbackgym.wrappers import RecordTrajectories

from .utils import play

DAY = 86_400.0


def _record_rounds(path, rounds):
    env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), path)
    for round in rounds:
        env.set_round(round)
        play(env, [round * 10, round * 10 + 1])
        env.store.flush()  # one segment per round
    env.close()


def test_prune_moves_then_deletes_by_age(store_path):
    _record_rounds(store_path, [0, 1])
    store = TrajectoryStore(store_path)
    episodes = {m.key: m for m in store.episodes()}
    limits = RetentionConfig(hot_days=7, cold_days=90, min_raw_days=30)
    now = time.time()

    plan = prune(store_path, limits, now=now + 8 * DAY, dry_run=True)
    assert [r.round for r in plan.to_cold] == ["0", "1"] and plan.to_delete == ()
    assert "would move to cold" in plan.describe() and plan.cold_file is None
    assert not (store_path / "cold").exists()  # a dry run changes nothing

    plan = prune(store_path, limits, now=now + 8 * DAY)
    assert plan.cold_file is not None and plan.cold_file.parent.name == "cold"
    assert not list(store_path.glob("*.h5"))  # the hot files held nothing else
    with h5py.File(plan.cold_file, "r") as file:
        assert file["feedbackgym/OpsIncidentEasy-v0/0/rewards"].compression == "gzip"
    assert {m.key: m for m in store.episodes()} == episodes  # nothing lost on the way
    assert prune(store_path, limits, now=now + 8 * DAY).describe() == "nothing to prune"

    plan = prune(store_path, limits, now=now + 91 * DAY)
    assert [r.round for r in plan.to_delete] == ["0", "1"]
    assert len(store) == 0 and not list((store_path / "cold").glob("*.h5"))


def test_prune_keeps_young_rounds_and_finishes_an_interrupted_prune(store_path):
    _record_rounds(store_path, [0, 1])
    catalog = Catalog(store_path)
    old = [e for e in catalog.entries() if e.meta.round == "0"]
    # an interrupted prune: round 0 copied to cold, hot file not yet rewritten
    (store_path / "cold").mkdir()
    write_segment(store_path / "cold" / "cold-x.h5", list(load_episodes(catalog, old)))
    store = TrajectoryStore(store_path)
    assert len(store) == 4  # duplicates are read once
    newest = {r: max(e.meta.end_time for e in store.iter_episodes(round=r)) for r in (0, 1)}
    now = (newest[0] + newest[1]) / 2 + DAY  # round 0 is just over a day old, round 1 just under
    limits = RetentionConfig(hot_days=1, cold_days=90, min_raw_days=30)
    plan = prune(store_path, limits, now=now)
    assert [r.round for r in plan.to_cold] == ["0"] and plan.cold_file is None  # already copied
    assert {m.round for m in store.episodes()} == {"0", "1"} and len(store) == 4
    hot = TrajectoryStore(next(store_path.glob("*.h5")))
    assert [m.round for m in hot.episodes()] == ["1", "1"]


def test_prune_command_takes_limits_from_the_config(store_path, tmp_path, capsys):
    _record_rounds(store_path, [0])
    config = tmp_path / "feedback.yaml"
    config.write_text("retention: {hot_days: 0.000001, cold_days: 0.00001, min_raw_days: 0}\n")
    time.sleep(1.0)  # older than cold_days (0.86 s)
    assert main(["datasets", "prune", str(store_path), "--config", str(config), "--dry-run"]) == 0
    assert "would delete: feedbackgym/OpsIncidentEasy-v0 round 0" in capsys.readouterr().out
    assert len(TrajectoryStore(store_path)) == 2
    assert main(["datasets", "prune", str(store_path), "--config", str(config)]) == 0
    assert len(TrajectoryStore(store_path)) == 0
    assert main(["datasets", "prune", str(tmp_path / "missing")]) == 2


def test_prune_beside_a_live_writer_leaves_what_it_still_logs(store_path):
    _record_rounds(store_path, [0])
    writing = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), store_path, round=1)
    play(writing, [5])  # in the live writer's log, not sealed
    limits = RetentionConfig(hot_days=7, cold_days=90, min_raw_days=30)
    plan = prune(store_path, limits, now=time.time() + 8 * DAY)
    assert [r.round for r in plan.to_cold] == ["0"] and plan.cold_file is not None
    writing.close()
    assert sorted(m.round for m in TrajectoryStore(store_path).episodes()) == ["0", "0", "1"]


def test_a_dry_run_plans_what_a_prune_does_with_a_crashed_writers_log(store_path):
    script = (
        "import os, sys, gymnasium as gym, feedbackgym\n"
        "from feedbackgym.wrappers import RecordTrajectories\n"
        "from tests.datasets.utils import play\n"
        "gym.register_envs(feedbackgym)\n"
        "env = RecordTrajectories(gym.make('feedbackgym/OpsIncidentEasy-v0'), sys.argv[1])\n"
        "play(env, [3])\n"
        "os._exit(0)  # a crash: the episode stays in the log, unsealed\n"
    )
    subprocess.run(
        [sys.executable, "-c", script, str(store_path)], check=True, cwd=Path(__file__).parents[2]
    )
    assert list(store_path.glob("*.log")) and not list(store_path.glob("*.h5"))
    limits = RetentionConfig(hot_days=7, cold_days=90, min_raw_days=30)
    now = time.time() + 8 * DAY
    planned = prune(store_path, limits, now=now, dry_run=True)
    assert [r.round for r in planned.to_cold] == ["0"]
    assert list(store_path.glob("*.log"))  # the dry run changed nothing
    done = prune(store_path, limits, now=now)
    assert done.to_cold == planned.to_cold and done.cold_file is not None
    assert not list(store_path.glob("*.log"))
