"""Reading: plain h5py, filters, sampling, replay buffers; writing: queue, flush, concurrency."""

import dataclasses
import json
import os
import pickle
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from feedbackgym.datasets import Episode, TrajectoryStore
from feedbackgym.datasets._storage.codec import encode_episode, record_body
from feedbackgym.datasets._storage.segment import write_segment
from feedbackgym.datasets._storage.wal import LogFile, frame
from feedbackgym.wrappers import RecordTrajectories

from .utils import feedback_stack, play

DOCS = Path(__file__).resolve().parents[2] / "docs" / "datasets.md"


def _record(path, rounds, env=None, **store_options):
    """Records two expert episodes per round, one round after another."""
    store = TrajectoryStore(path, **store_options)
    env = RecordTrajectories(env or feedback_stack(), store)
    for round, progress in rounds:
        env.set_round(round)
        env.get_wrapper_attr("set_progress")(progress)
        play(env, [round * 10, round * 10 + 1])
    env.close()
    store.close()
    return store


def test_plain_h5py_reads_every_field_without_feedbackgym(store_path):
    store = _record(store_path, [(0, 0), (1, 70)])
    snippet = DOCS.read_text().split("reading it with plain h5py")[1].split("```python\n")[1]
    code = snippet.split("```")[0] + textwrap.dedent(
        f"""
        import sys
        episodes = list(read_store({str(store_path)!r}))
        assert "feedbackgym" not in sys.modules
        print(json.dumps([
            {{key: (value.tolist() if hasattr(value, "tolist") else value)
              for key, value in e.items()}}
            for e in episodes
        ]))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    plain = json.loads(out.stdout)
    api = list(store.iter_episodes())
    assert len(plain) == len(api) == 4
    for row, episode in zip(plain, api, strict=True):
        meta = episode.meta
        assert row["address"] == f"/{meta.task_id}/{meta.round}/{meta.name}"
        assert row["seed"] == meta.seed and row["success"] == 1
        assert row["subgoal_ids"] == list(meta.subgoal_ids)
        assert row["env_spec"]["id"] == meta.task_id
        assert row["events"] == [e.payload for e in episode.events]
        for name, column in episode.columns.items():
            expected = column.tolist()
            if column.dtype.kind == "S":
                expected = [v.decode() for v in expected]
            np.testing.assert_array_equal(np.array(row[name]), np.array(expected), err_msg=name)


def test_filters(store_path):
    store = _record(store_path, [(0, 0), (1, 70)])
    metas = store.episodes()
    assert [m.round for m in metas] == ["0", "0", "1", "1"]
    assert len(store.episodes(round=1)) == len(store.episodes(round=["1"])) == 2
    assert [m.phase for m in store.episodes(phase="review")] == ["review", "review"]
    assert len(store.episodes(task="feedbackgym/OpsIncidentHard-v0", success=True)) == 4
    assert store.episodes(success=False) == [] and store.episodes(task="other") == []
    middle = metas[1].start_time
    assert [m.seed for m in store.episodes(since=middle, until=metas[3].start_time)] == [1, 10]
    assert [e.meta.seed for e in store.iter_episodes(round=0, phase="guide")] == [0, 1]
    with pytest.raises(TypeError, match="unknown episode filter"):
        store.episodes(rounds=1)


def test_sample_favours_the_latest_round_with_a_floor_for_old_ones(store_path):
    store = _record(store_path, [(0, 0), (1, 0), (2, 0)])
    batch = store.sample(1000, recent_fraction=0.7, min_old_fraction=0.1, seed=0)
    assert batch["recent"].sum() == 700
    assert store.sample(100, recent_fraction=1.0, min_old_fraction=0.25)["recent"].sum() == 75
    assert store.sample(50, round=[0, 1])["recent"].sum() == 35  # round 1 is the latest there
    assert store.sample(10, round=0)["recent"].all()  # one round: all recent
    np.testing.assert_array_equal(
        store.sample(64, seed=3)["actions"], store.sample(64, seed=3)["actions"]
    )
    obs, following = batch["observations"], batch["next_observations"]
    assert obs["metrics"].shape == (1000, 64) and batch["actions"].shape == (1000,)
    # every transition is real: its next observation follows it in some stored episode
    pairs = {
        (e.observations["metrics"][t].tobytes(), e.observations["metrics"][t + 1].tobytes())
        for e in store.iter_episodes()
        for t in range(e.meta.length)
    }
    assert all(
        (a.tobytes(), b.tobytes()) in pairs
        for a, b in zip(obs["metrics"], following["metrics"], strict=True)
    )
    with pytest.raises(ValueError, match="no episodes match"):
        store.sample(8, round=9)


def test_sampling_tasks_with_different_observations_asks_for_one_task(store_path):
    store = TrajectoryStore(store_path)
    for task, obs_mode in (("vector", "vector"), ("both", "both")):
        env = gym.make("feedbackgym/OpsIncidentEasy-v0", obs_mode=obs_mode)
        play(RecordTrajectories(env, store, task_id=task), [0, 1])
    with pytest.raises(ValueError, match=r"\['observations/text'\].*task="):
        store.sample(256, seed=0)
    assert "text" not in store.sample(64, task="vector")["observations"]
    store.close()


def test_numpy_integers_filter_rounds(store_path):
    store = _record(store_path, [(0, 0), (1, 0)])
    assert len(store.episodes(round=np.int64(1))) == 2
    assert len(store.episodes(round=np.arange(2))) == 4


def test_sample_as_torch_and_reading_while_logging(store_path):
    torch = pytest.importorskip("torch")
    store = TrajectoryStore(store_path)
    env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0", obs_mode="both"), store)
    play(env, [0, 1])  # still in the log: sampling reads it
    batch = store.sample(16, as_torch=True)
    assert isinstance(batch["observations"]["alerts"], torch.Tensor)
    assert (
        isinstance(batch["observations"]["text"], list) and len(batch["observations"]["text"]) == 16
    )
    assert batch["terminations"].dtype == torch.bool
    env.close()


def test_fill_sb3_replay_buffer(store_path):
    buffers = pytest.importorskip("stable_baselines3.common.buffers")
    store = _record(store_path, [(0, 0)], env=feedback_stack("feedbackgym/OpsIncidentEasy-v0"))
    env = gym.make("feedbackgym/OpsIncidentEasy-v0")
    buffer = buffers.DictReplayBuffer(1000, env.observation_space, env.action_space)
    added = store.fill_replay_buffer(buffer, reward="env_rewards")
    episodes = list(store.iter_episodes())
    assert added == buffer.size() == sum(e.meta.length for e in episodes)
    first = episodes[0]
    np.testing.assert_array_equal(
        buffer.observations["metrics"][:3, 0], first.observations["metrics"][:3]
    )
    np.testing.assert_array_equal(
        buffer.next_observations["metrics"][0, 0], first.observations["metrics"][1]
    )
    assert buffer.rewards[: first.meta.length, 0].tolist() == first.env_rewards.tolist()
    assert buffer.dones[first.meta.length - 1, 0] == 1.0


def test_queue_flush_close_and_pickling(store_path):
    store = TrajectoryStore(store_path, queue_size=1, segment_steps=1)
    env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), store)
    play(env, range(30))  # every episode is its own segment: the queue of one fills up
    assert store._writer._queue.qsize() <= 1
    store.flush()
    assert not list(store_path.glob("*.log")) and len(list(store_path.glob("*.h5"))) == 30
    assert [m.seed for m in store.episodes()] == list(range(30))
    with pickle.loads(pickle.dumps(store)) as copy:
        assert copy.path == store_path and copy.shard is None
        play(RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), copy), [99])
    assert len(store) == 31 and not list(store_path.glob("*.log"))  # the with block sealed it
    store.close()
    env.close()


DROPPED = """
import gc, sys, gymnasium as gym, feedbackgym
from feedbackgym.datasets import TrajectoryStore
from feedbackgym.wrappers import RecordTrajectories
env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), TrajectoryStore(sys.argv[1]))
env.reset(seed=0)
while not env.step(env.unwrapped.expert_action())[2]:
    pass
del env  # neither the wrapper nor the store is closed
gc.collect()
"""


def test_a_store_dropped_unclosed_still_seals_at_exit(store_path):
    subprocess.run([sys.executable, "-c", DROPPED, str(store_path)], check=True, timeout=120)
    assert not list(store_path.glob("*.log")) and len(list(store_path.glob("*.h5"))) == 1


def test_bad_episodes_are_refused_before_they_reach_the_log(store_path):
    env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), store_path)
    play(env, [0])
    env.close()
    (episode,) = TrajectoryStore(store_path).iter_episodes()
    store = TrajectoryStore(store_path)
    bad_round = Episode(dataclasses.replace(episode.meta, round="a/b"), episode.columns)
    with pytest.raises(ValueError, match="'/'"):
        store.add_episode(bad_round)
    empty = Episode(dataclasses.replace(episode.meta, length=0), {})
    with pytest.raises(ValueError, match="at least one step"):
        store.add_episode(empty)
    store.close()
    assert len(TrajectoryStore(store_path)) == 1


@pytest.mark.parametrize("first", [("a", "b"), ("a/b", "c")])
def test_round_groups_that_would_nest_are_refused(store_path, first):
    (episode,) = _recorded_episodes(store_path / "source")
    store = TrajectoryStore(store_path)
    outer, inner = ("a", "b"), ("a/b", "c")
    second = inner if first == outer else outer
    for task, round in first, ("a", "c"), ("a/bc", "b"):  # neighbours that do not nest
        store.add_episode(
            Episode(dataclasses.replace(episode.meta, task_id=task, round=round), episode.columns)
        )
    nested = dataclasses.replace(episode.meta, task_id=second[0], round=second[1])
    with pytest.raises(ValueError, match="would nest"):
        store.add_episode(Episode(nested, episode.columns))
    store.close()
    stored = {(m.task_id, m.round) for m in TrajectoryStore(store_path).episodes()}
    assert stored == {first, ("a", "c"), ("a/bc", "b")}
    assert len(list(TrajectoryStore(store_path).iter_episodes())) == 3
    (kept,) = TrajectoryStore(store_path).iter_episodes(task=first[0], round=first[1])
    with pytest.raises(ValueError, match="would nest"):  # a cold file or a recovery too
        write_segment(store_path / "x.h5", [kept, Episode(nested, episode.columns)])
    assert not list(store_path.glob("x.h5*"))


def _recorded_episodes(path):
    env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), path)
    play(env, [0])
    env.close()
    return list(TrajectoryStore(path).iter_episodes())


def test_recovery_keeps_a_log_it_cannot_seal_and_goes_on(store_path, caplog):
    env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), store_path)
    play(env, [0])
    env.close()
    (episode,) = TrajectoryStore(store_path).iter_episodes()
    bad = Episode(dataclasses.replace(episode.meta, round="a/b"), episode.columns)
    log = LogFile(store_path / "dead-000000.log", {"shard": "dead"})  # as an older version wrote
    log.append(frame(record_body(encode_episode(bad))))
    os.close(log._fd)  # the writer died: its lock is gone
    store = TrajectoryStore(store_path)
    play(RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), store), [1])
    store.close()
    assert "not recovering" in caplog.text and (store_path / "dead-000000.log").exists()
    assert len(list(store_path.glob("*.h5"))) == 2


WRITER = """
import sys, time, gymnasium as gym, feedbackgym
from feedbackgym.datasets import TrajectoryStore
from feedbackgym.wrappers import RecordTrajectories
store = TrajectoryStore(sys.argv[1], segment_steps=60)
env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), store)
for seed in range(int(sys.argv[2])):
    env.reset(seed=seed)
    while not env.step(env.unwrapped.expert_action())[2]:
        pass
    time.sleep(0.002)  # give the reader time to see the store grow
env.close()
"""


def test_readers_read_while_a_writer_writes(store_path):
    import h5py

    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store_path), "200"])
    store = TrajectoryStore(store_path)
    counts = []
    try:
        while writer.poll() is None:
            counts.append(len(store.episodes()))
            for path in store_path.glob("*.h5"):  # sealed files open with plain h5py meanwhile
                with h5py.File(path, "r") as file:
                    assert json.loads(file.attrs["groups"])
            time.sleep(0.02)
    finally:
        writer.wait(timeout=60)
    assert writer.returncode == 0
    assert counts == sorted(counts) and len(set(counts)) > 2  # saw it grow
    assert [m.seed for m in store.episodes()] == list(range(200))


def test_an_idle_writer_seals_its_log_once_it_is_segment_seconds_old(store_path):
    store = TrajectoryStore(store_path, segment_seconds=0.2)
    play(RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), store), [0])
    deadline = time.monotonic() + 10
    while list(store_path.glob("*.log")) and time.monotonic() < deadline:
        time.sleep(0.05)  # no further episode, no flush: the writer thread seals it
    assert len(list(store_path.glob("*.h5"))) == 1 and len(store) == 1
    store.close()
