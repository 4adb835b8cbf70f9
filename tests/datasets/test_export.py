"""The Minari export, read back with real ``minari.load_dataset``."""

import numpy as np
import pytest

from feedbackgym.datasets import export_minari
from feedbackgym.experts import make_expert_dataset

from .utils import feedback_stack

minari = pytest.importorskip("minari")
pytestmark = pytest.mark.filterwarnings("ignore:`(code_permalink|author_email)` is set to None")


def test_minari_reads_the_export(store_path):
    env = feedback_stack("feedbackgym/OpsIncidentEasy-v0", obs_mode="both")
    store = make_expert_dataset(env, store_path, 3)
    exported = export_minari(
        store, "feedbackgym/ops-easy-expert-v0", author="tests", algorithm_name="expert"
    )
    dataset = minari.load_dataset("feedbackgym/ops-easy-expert-v0")
    assert dataset.total_episodes == exported.total_episodes == 3
    originals = list(store.iter_episodes())
    assert dataset.total_steps == sum(e.meta.length for e in originals)
    for read, original in zip(dataset.iterate_episodes(), originals, strict=True):
        np.testing.assert_array_equal(
            read.observations["metrics"], original.observations["metrics"]
        )
        assert list(read.observations["text"]) == list(original.observations["text"])
        np.testing.assert_array_equal(read.actions, original.actions)
        np.testing.assert_array_equal(read.rewards, original.rewards)
        np.testing.assert_array_equal(read.infos["feedback_type"], original.feedback_types)
    assert dataset.recover_environment().spec.id == "feedbackgym/OpsIncidentEasy-v0"
    with pytest.raises(ValueError, match="no episodes"):
        export_minari(store, "feedbackgym/empty-v0", round="nope")


def test_a_store_of_a_third_party_env_with_subgoals_exports_its_base_env(store_path):
    import gymnasium as gym

    from feedbackgym.core import Subgoal
    from feedbackgym.datasets import TrajectoryStore
    from feedbackgym.wrappers import RecordTrajectories, WithSubgoals

    lib = [Subgoal("right", "move right of -0.4", lambda c: c.obs[0] > -0.4)]
    with TrajectoryStore(store_path) as store:
        env = RecordTrajectories(WithSubgoals(gym.make("MountainCar-v0"), subgoals=lib), store)
        env.reset(seed=0)
        for _ in range(300):
            if any(env.step(2)[2:4]):
                break
        env.close()
        exported = export_minari(store, "feedbackgym/car-subgoals-v0", author="tests")
    assert exported.total_episodes == 1
    dataset = minari.load_dataset("feedbackgym/car-subgoals-v0")
    assert dataset.recover_environment().spec.id == "MountainCar-v0"
    assert "WithSubgoals" in dataset.storage.metadata["description"]  # what the spec left out
