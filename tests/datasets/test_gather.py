"""``gather``: stores written apart, read as one, each episode once."""

from collections import Counter

import gymnasium as gym
import pytest

from feedbackgym.cli import main
from feedbackgym.datasets import StoreError, TrajectoryStore, gather
from feedbackgym.datasets._storage.catalog import Catalog
from feedbackgym.datasets._storage.segment import write_segment
from feedbackgym.wrappers import RecordTrajectories
from tests.datasets.utils import play

ENV = "feedbackgym/OpsIncidentEasy-v0"


def record(path, seeds, **store_options):
    """Records one expert episode per seed into a new shard of the store at ``path``."""
    store = TrajectoryStore(path, **store_options)
    env = RecordTrajectories(gym.make(ENV), store)
    play(env, seeds)
    return env, store


def keys_on_disk(path):
    return Counter(entry.meta.key for entry in Catalog(path).entries(unique=False))


def test_two_stores_gather_into_one_and_again_adds_nothing(tmp_path):
    for node, seeds in (("a", [0, 1]), ("b", [2, 3, 4])):
        env, _ = record(tmp_path / node, seeds)
        env.close()
    report = gather([tmp_path / "a", tmp_path / "b"], tmp_path / "all")
    assert (report.episodes, report.already, len(report.copied)) == (5, 0, 2)
    store = TrajectoryStore(tmp_path / "all")
    assert sorted(e.seed for e in store.episodes()) == [0, 1, 2, 3, 4]
    sources = [e.key for node in "ab" for e in TrajectoryStore(tmp_path / node).episodes()]
    assert sorted(e.key for e in store.episodes()) == sorted(sources)
    again = gather([tmp_path / "a", tmp_path / "b", tmp_path / "all"], tmp_path / "again")
    assert (again.episodes, again.already) == (5, 5)
    assert set(keys_on_disk(tmp_path / "again").values()) == {1}
    assert gather([tmp_path / "b"], tmp_path / "all").episodes == 0
    assert set(keys_on_disk(tmp_path / "all").values()) == {1}
    assert store.sample(8)["actions"].shape == (8,)


def test_a_live_writers_log_is_gathered_then_its_segment_adds_nothing(tmp_path):
    env, store = record(tmp_path / "live", [0, 1], segment_seconds=3600)
    assert list((tmp_path / "live").glob("*.log")) and not list((tmp_path / "live").glob("*.h5"))
    report = gather([tmp_path / "live"], tmp_path / "all")
    assert (report.episodes, len(report.written)) == (2, 1)
    env.close()  # seals the log into a segment of the same name
    assert gather([tmp_path / "live"], tmp_path / "all").episodes == 0
    assert sorted(e.seed for e in TrajectoryStore(tmp_path / "all").episodes()) == [0, 1]
    assert set(keys_on_disk(tmp_path / "all").values()) == {1}


def test_a_segment_partly_there_is_rewritten_with_the_new_episodes_only(tmp_path):
    env, _ = record(tmp_path / "a", [0, 1, 2])
    env.close()
    gather([tmp_path / "a"], tmp_path / "all")
    episodes = list(TrajectoryStore(tmp_path / "a").iter_episodes())
    env, _ = record(tmp_path / "b", [7])
    env.close()
    episodes += list(TrajectoryStore(tmp_path / "b").iter_episodes())
    (tmp_path / "mixed").mkdir()
    write_segment(tmp_path / "mixed" / "mixed-000000.h5", episodes[1:])  # 2 known, 1 new
    report = gather([tmp_path / "mixed"], tmp_path / "all")
    assert (report.episodes, report.already, len(report.written)) == (1, 2, 1)
    assert sorted(e.seed for e in TrajectoryStore(tmp_path / "all").episodes()) == [0, 1, 2, 7]
    assert set(keys_on_disk(tmp_path / "all").values()) == {1}


def test_a_damaged_source_is_refused_before_anything_is_written(tmp_path):
    env, _ = record(tmp_path / "a", [0])
    env.close()
    (tmp_path / "a" / "broken-000000.h5").write_bytes(b"not HDF5")
    with pytest.raises(StoreError, match="broken-000000.h5.*verify --quarantine"):
        gather([tmp_path / "a"], tmp_path / "all")
    assert not (tmp_path / "all").exists()
    with pytest.raises(StoreError, match="no store"):
        gather([tmp_path / "missing"], tmp_path / "all")
    with pytest.raises(StoreError, match="destination itself"):
        gather([tmp_path / "a"], tmp_path / "a")


def test_the_command_gathers(tmp_path, capsys):
    for node, seeds in (("a", [0]), ("b", [1])):
        env, _ = record(tmp_path / node, seeds)
        env.close()
    paths = [str(tmp_path / name) for name in ("a", "b", "all")]
    assert main(["datasets", "gather", *paths]) == 0
    assert "2 episode(s) gathered from 2 source(s)" in capsys.readouterr().out
    assert main(["datasets", "gather", str(tmp_path / "nowhere"), paths[2]]) == 2
