"""``EpisodeRecorder``: the store side of recording, for loops that are not Gymnasium envs."""

import numpy as np
import pytest

from feedbackgym.datasets import EpisodeRecorder, TrajectoryStore


def test_records_episodes_of_a_plain_loop_under_the_current_round(store_path):
    store = TrajectoryStore(store_path)
    recorder = EpisodeRecorder(store, "loop")
    for round, seed in ((None, 1), (2, 2)):
        recorder.set_round(round)
        episode = recorder.start(np.zeros(2, np.float32), {}, seed=seed)
        assert recorder.episode is episode
        episode.add(0, np.ones(2, np.float32), 1.0, True, False, {"is_success": True})
        recorder.finish(env_spec="{}")
        assert recorder.episode is None
    store.close()
    metas = TrajectoryStore(store_path).episodes()
    assert [(m.task_id, m.round, m.seed, m.success) for m in metas] == [
        ("loop", "0", 1, True),
        ("loop", "2", 2, True),
    ]


def test_refuses_bad_rounds_and_a_finish_without_an_episode(store_path):
    store = TrajectoryStore(store_path)
    recorder = EpisodeRecorder(store, "loop")
    with pytest.raises(ValueError, match="may not contain '/'"):
        recorder.set_round("a/b")
    assert recorder.round == "0"
    recorder.start(0, {}, seed=None)
    recorder.discard()
    with pytest.raises(RuntimeError, match="no episode is running"):
        recorder.finish()
    store.close()
    assert len(TrajectoryStore(store_path)) == 0
