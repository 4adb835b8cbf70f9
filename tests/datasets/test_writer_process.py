"""A writer process (``writer="process"``): one per directory, its errors raised late.

The crash guarantees (``kill -9`` of the recording process, of the writer) are
checked in ``test_crash.py``.
"""

import pickle

import numpy as np
import pytest

from feedbackgym.datasets import EpisodeRecorder, TrajectoryStore


def _record(recorder, obs, seed):
    recorder.start(obs, {}, seed=seed)
    recorder.episode.add(1, obs, 1.0, True, False, {})
    recorder.finish()


def test_stores_of_one_directory_share_one_writer(store_path):
    first = TrajectoryStore(store_path, writer="process")
    second = TrajectoryStore(store_path, writer="process")
    _record(EpisodeRecorder(first, "t"), 0, seed=1)
    _record(EpisodeRecorder(second, "t"), 0, seed=2)
    assert first._process is second._process
    first.close()  # flushes; the writer stays for the second store
    _record(EpisodeRecorder(second, "t"), 0, seed=3)
    second.close()
    metas = TrajectoryStore(store_path).episodes()
    assert sorted(m.seed for m in metas) == [1, 2, 3] and len({m.shard for m in metas}) == 1
    assert not list(store_path.glob("*.log"))


def test_an_episode_the_writer_refuses_is_raised_by_a_later_call(store_path):
    store = TrajectoryStore(store_path, writer="process")
    recorder = EpisodeRecorder(store, "t")
    _record(recorder, 0, seed=1)
    _record(recorder, np.zeros(3, np.float32), seed=2)  # other columns than episode 1's
    with pytest.raises(ValueError, match="other columns than earlier ones"):
        store.flush()
    _record(recorder, 0, seed=3)
    store.close()
    assert [m.seed for m in TrajectoryStore(store_path).episodes()] == [1, 3]


def test_the_writer_choice_is_checked_and_pickled(store_path):
    with pytest.raises(ValueError, match="writer must be one of"):
        TrajectoryStore(store_path, writer="threads")
    assert pickle.loads(pickle.dumps(TrajectoryStore(store_path, writer="process"))).writer == (
        "process"
    )


def test_an_episode_that_cannot_be_pickled_is_refused_at_once(store_path):
    store = TrajectoryStore(store_path, writer="process")
    recorder = EpisodeRecorder(store, "t")
    recorder.start(0, {}, seed=1)
    recorder.episode.add(1, 0, 1.0, True, False, {"feedback": {"guide": {"f": lambda: 0}}})
    with pytest.raises(ValueError, match="cannot be sent to the writer process"):
        recorder.finish()
    _record(recorder, 0, seed=2)
    store.close()
    assert [m.seed for m in TrajectoryStore(store_path).episodes()] == [2]
