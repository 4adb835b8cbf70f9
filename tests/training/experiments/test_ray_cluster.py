"""``compare --backend ray``, store gathering and env actors on a real two-node Ray cluster here.

One cluster for the module: a head and a second node with one CPU each (the
head's health checks made fast, so that a removed node is seen dead within
a few seconds). The test that removes the second node runs last.
"""

import csv
import json
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("torch")
pytest.importorskip("h5py")

from ray.cluster_utils import Cluster  # noqa: E402

from feedbackgym.training.experiments.compare import ComparisonConfig, run_comparison  # noqa: E402
from feedbackgym.training.experiments.ray_runs import RayOptions  # noqa: E402

ENV = "feedbackgym/OpsIncidentEasy-v0"


@pytest.fixture(scope="module")
def cluster():
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "include_dashboard": False,
            "_system_config": {
                "health_check_initial_delay_ms": 0,
                "health_check_period_ms": 1000,
                "health_check_failure_threshold": 4,
            },
        },
    )
    second = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        yield cluster, second
    finally:
        ray.shutdown()
        cluster.shutdown()


def _comparison(out, *, rounds, seeds=1, arms=("sparse", "shaping"), jobs=1):
    return ComparisonConfig(
        env_id=ENV,
        arms=list(arms),
        seeds=seeds,
        steps=2 * 32 * rounds,
        out=str(out),
        jobs=jobs,
        n_envs=2,
        n_steps=32,
        eval_every=1,
        eval_episodes=2,
        keep_checkpoints=2,
    )


def _curves(out):
    """Each run's curve, less its wall-clock column (the one a node may change)."""
    return {
        run.name: [
            {k: v for k, v in row.items() if k != "seconds"}
            for row in csv.DictReader((run / "curve.csv").open())
        ]
        for run in sorted((Path(out) / "runs").iterdir())
    }


def test_a_comparison_on_two_nodes_equals_the_local_one(cluster, tmp_path):
    started = time.monotonic()
    on_ray = run_comparison(
        _comparison(tmp_path / "ray", rounds=2), show_progress=False, ray=RayOptions()
    )
    print(f"on ray: {time.monotonic() - started:.1f} s")
    local = run_comparison(_comparison(tmp_path / "local", rounds=2, jobs=2), show_progress=False)
    assert json.dumps(on_ray) == json.dumps(local)  # NaN included
    assert _curves(tmp_path / "ray") == _curves(tmp_path / "local")
    record = json.loads((tmp_path / "ray" / "ray.json").read_text())
    nodes = {a["node"] for run in record.values() for a in run["attempts"]}
    assert len(nodes) == 2  # one run on each node
    for name, run in record.items():
        assert [a["resumed_after_round"] for a in run["attempts"]] == [None]
        assert run["round"] == 1
        config = json.loads((tmp_path / "ray" / "runs" / name / "config.json").read_text())
        assert config["out_dir"] == str(tmp_path / "ray" / "runs" / name)  # not the node's
        checkpoints = sorted(p.name for p in (tmp_path / "ray" / "runs" / name).glob("*/*.pt"))
        assert checkpoints == ["best.pt", "round_0000.pt", "round_0001.pt"]


def _record_on_this_node(path, seeds):
    import gymnasium as gym

    from feedbackgym.wrappers import RecordTrajectories

    env = RecordTrajectories(gym.make(ENV), path)
    for seed in seeds:
        env.reset(seed=seed)
        while not env.step(env.unwrapped.expert_action())[2]:
            pass
    env.close()
    return ray.get_runtime_context().get_node_id()


def test_shards_recorded_on_two_nodes_gather_into_one_store(cluster, tmp_path):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from feedbackgym.datasets import TrajectoryStore, gather

    record = ray.remote(num_cpus=1)(_record_on_this_node)
    nodes = [node["NodeID"] for node in ray.nodes() if node["Alive"]]
    refs = [
        record.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False)
        ).remote(str(tmp_path / f"node{i}"), [2 * i, 2 * i + 1])
        for i, node in enumerate(nodes)
    ]
    assert sorted(ray.get(refs)) == sorted(nodes)
    sources = [tmp_path / f"node{i}" for i in range(len(nodes))]
    report = gather(sources, tmp_path / "all")
    assert report.episodes == 4 and gather(sources, tmp_path / "all").episodes == 0
    gathered = TrajectoryStore(tmp_path / "all").episodes()
    assert sorted(e.seed for e in gathered) == [0, 1, 2, 3]
    assert len({e.shard for e in gathered}) == 2


def test_a_training_run_takes_its_hints_and_reviews_from_actor_pools(cluster, tmp_path):
    from feedbackgym.config import FeedbackConfig
    from feedbackgym.feedback.ray_pool import RaySubgoalGuide, RayTrajectoryReviewer
    from feedbackgym.training.common.run_settings import RunConfig
    from feedbackgym.training.experiments.launch import train_run

    pools = [RaySubgoalGuide(), RayTrajectoryReviewer()]
    for pool in pools:  # held here, so the actors outlive the run's envs for the counts
        pool.pool("feedbackgym/OpsIncidentEasy")
    named = "feedbackgym.feedback.ray_pool:Ray"
    feedback = FeedbackConfig.from_mapping(
        {
            "guide": {"generator": f"{named}SubgoalGuide", "deadline_ms": 5000},
            "review": {"generator": f"{named}TrajectoryReviewer", "deadline_ms": 5000},
        },
        source="test",
    )
    run = RunConfig(
        ENV,
        "guide-then-review",
        0,
        2 * 32 * 3,
        str(tmp_path),
        n_envs=2,
        n_steps=32,
        eval_episodes=1,
        feedback=feedback,
        feedback_overrides={"schedule": {"adaptive": None, "switch_at": 0.0, "fade": 1}},
    )
    assert train_run(run)["timesteps"] == 192
    guide, reviewer = (pool.served() for pool in pools)
    assert len(guide) == len(reviewer) == 2
    assert all(count > 0 for count in guide.values())  # both actors of each pool served
    assert all(count > 0 for count in reviewer.values())


class _Recorded:
    """Patches the env actor pool so that a test sees each pool of a run: its nodes, its end."""

    def __init__(self, monkeypatch):
        from feedbackgym.training.workers import ray_actors, ray_vec_env

        self.pools = []
        pools = self.pools

        class Recording(ray_actors.EnvActors):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                pools.append(self)

        monkeypatch.setattr(ray_actors, "EnvActors", Recording)
        monkeypatch.setattr(ray_vec_env, "EnvActors", Recording)

    def names(self):
        return [name for pool in self.pools for name in pool.names]

    def nodes(self):
        return {node for pool in self.pools for node in pool.nodes}


def _alive(names):
    """The env actors of ``names`` still alive (a killed actor's name is freed shortly)."""
    from feedbackgym.training.workers.ray_actors import NAMESPACE

    deadline = time.monotonic() + 10
    while True:
        alive = []
        for name in names:
            try:
                ray.get_actor(name, namespace=NAMESPACE)
            except ValueError:
                continue
            alive.append(name)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def _actor_run(tmp_path, trainer, **settings):
    from feedbackgym.training.common.run_settings import RunConfig

    return RunConfig(
        ENV,
        "guide-then-review",
        0,
        4 * 64 * 4,
        str(tmp_path / trainer),
        n_envs=4,
        n_steps=64,
        eval_every=4,
        eval_episodes=1,
        trainer=trainer,
        env_backend="ray",
        env_workers=2,
        record=True,
        feedback_overrides={"schedule": {"adaptive": None, "switch_at": 0.0, "fade": 1}},
        **settings,
    )


@pytest.mark.parametrize("trainer", ["torch", "sb3"])
def test_a_training_run_steps_its_envs_in_actors_on_both_nodes(
    cluster, tmp_path, monkeypatch, trainer
):
    from feedbackgym.datasets import TrajectoryStore
    from feedbackgym.training.experiments.launch import train_run

    recorded = _Recorded(monkeypatch)
    run = _actor_run(tmp_path, trainer)
    assert train_run(run)["timesteps"] == 1024
    assert len(recorded.pools) == 1 and len(recorded.names()) == 2
    assert len(recorded.nodes()) == 2  # spread: one actor on each node
    assert _alive(recorded.names()) == []  # the run closed its envs: no actor left
    # The controller's state reached the actors' envs: their recorder files each episode
    # under the round pushed to it, with the phase in force (review after the first round).
    episodes = TrajectoryStore(Path(run.out_dir) / "trajectories").episodes()
    assert len({e.shard.split("-")[-2] for e in episodes}) == 2  # by both actors' processes
    rounds = {int(e.round) for e in episodes}
    assert rounds >= {1, 2, 3}
    assert {e.phase for e in episodes if int(e.round) >= 2} == {"review"}


def test_env_actors_meet_the_trainer_interface_and_name_a_dead_one(cluster):
    import numpy as np

    import feedbackgym
    from feedbackgym.protocol import FeedbackState, call_envs
    from feedbackgym.training.common.trainer_view import TrainerView
    from feedbackgym.training.workers.env_groups import EnvGroups, EnvWorkers
    from feedbackgym.training.workers.ray_actors import EnvActorError, RayEnvWorkers

    def build():
        return TrainerView(feedbackgym.make(ENV, "guide-then-review"))

    envs = RayEnvWorkers([build] * 4, groups=4, actors=2)
    here = EnvWorkers([build] * 4, groups=4)
    try:
        assert isinstance(envs, EnvGroups) and isinstance(here, EnvGroups)
        assert len(set(envs.nodes)) == 2
        np.testing.assert_array_equal(envs.reset(seed=3), here.reset(seed=3))
        rng = np.random.default_rng(0)
        for _ in range(30):  # the same trajectories as in this process
            actions = rng.integers(envs.single_action_space.n, size=4)
            for group in range(4):
                envs.step_async(group, actions[group : group + 1])
                here.step_async(group, actions[group : group + 1])
            steps = dict(envs.step_wait_any() for _ in range(4))  # as they come back
            for group in range(4):  # in this process: in the order they were started
                mine = here.step_wait(group)
                np.testing.assert_array_equal(steps[group].obs, mine.obs)
                np.testing.assert_array_equal(steps[group].reward, mine.reward)
                np.testing.assert_array_equal(steps[group].action, mine.action)
        state = FeedbackState("review", 0.0, 1.0, round=5)
        call_envs(envs, "set_feedback_state", state)  # the controller's path
        stats = call_envs(envs, "feedback_stats")
        assert len(stats) == 4 and all(s["guide"] is not None for s in stats)
        dead = envs.actors.actors[1]
        ray.kill(dead, no_restart=True)
        _wait_dead(dead)  # the kill is asynchronous
        with pytest.raises(EnvActorError, match=envs.actors.names[1]) as raised:
            for group in range(4):
                envs.step_async(group, np.zeros(1, np.int64))
            for _ in range(4):
                envs.step_wait_any()
        assert raised.value.actor == envs.actors.names[1]
        assert raised.value.node == envs.nodes[1]
    finally:
        names = list(envs.actors.names)
        envs.close()
        envs.close()  # idempotent
        here.close()
    assert _alive(names) == []


def test_env_actors_asking_more_cpus_than_the_cluster_has_fail_at_once(cluster):
    from feedbackgym.training.workers.ray_actors import EnvActorError, EnvActors

    total = ray.cluster_resources()["CPU"]
    start = time.monotonic()
    with pytest.raises(EnvActorError, match="CPUs asked"):
        EnvActors([list, list], num_cpus=total, name="too-big")
    assert time.monotonic() - start < 30
    assert [a for a in ray.util.list_named_actors(all_namespaces=True) if "too-big" in str(a)] == []


def test_env_actor_error_survives_pickling():
    import pickle

    from feedbackgym.training.workers.ray_actors import EnvActorError

    error = pickle.loads(pickle.dumps(EnvActorError("it died", "envs-ab-1", "node-7")))
    assert isinstance(error, EnvActorError)
    assert (str(error), error.actor, error.node) == ("it died", "envs-ab-1", "node-7")


def test_runs_never_outnumber_the_cluster_cpus(cluster, tmp_path):
    # A task waiting in ray.get on its main thread lends Ray its CPU: runs must not.
    run_comparison(_comparison(tmp_path, rounds=3, seeds=2), show_progress=False, ray=RayOptions())
    record = json.loads((tmp_path / "ray.json").read_text())
    spans = [(a["started"], a["ended"]) for run in record.values() for a in run["attempts"]]
    assert len(spans) == 4 and all(end is not None for _, end in spans)
    for started, _ in spans:
        running = sum(begin <= started < end for begin, end in spans)
        assert running <= ray.cluster_resources()["CPU"], spans


def test_a_run_lost_with_its_node_resumes_from_its_last_round(cluster, tmp_path):
    head_cluster, second = cluster
    config = _comparison(tmp_path, rounds=20)  # long enough to outlast the wait below
    done: dict = {}
    deadline = time.monotonic() + 60  # actors of earlier tests release their CPUs lazily
    while ray.available_resources().get("CPU", 0) < ray.cluster_resources().get("CPU", 0):
        assert time.monotonic() < deadline, ray.available_resources()
        time.sleep(0.2)

    def compare():
        try:
            done["rows"] = run_comparison(
                config, show_progress=False, ray=RayOptions(ship_every_s=0)
            )
        except BaseException as error:  # re-raised below
            done["error"] = error

    thread = threading.Thread(target=compare)
    thread.start()
    states = [tmp_path / "runs" / f"{arm}-seed0" / "state.json" for arm in config.arms]
    deadline = time.monotonic() + 120
    while not all(s.exists() and json.loads(s.read_text())["round"] >= 1 for s in states):
        assert time.monotonic() < deadline and thread.is_alive(), done
        time.sleep(0.1)
    head_cluster.remove_node(second, allow_graceful=False)
    thread.join(timeout=240)
    assert not thread.is_alive()
    assert "error" not in done, str(done.get("error"))
    assert len(done["rows"]) == 2
    record = json.loads((tmp_path / "ray.json").read_text())
    retried = [run for run in record.values() if len(run["attempts"]) > 1]
    assert len(retried) == 1, record
    assert retried[0]["attempts"][-1]["resumed_after_round"] >= 1
    for name, run in record.items():
        assert run["round"] == config.rounds - 1
        rounds = [int(row["round"]) for row in _curves(tmp_path)[name]]
        assert rounds == list(range(1, config.rounds + 1))  # each validation once


def _wait_dead(actor, timeout_s=30.0):
    """Returns once ``actor`` answers no more (a killed actor may finish a call or two first)."""
    import time

    ray = pytest.importorskip("ray")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get(actor.__ray_ready__.remote(), timeout=timeout_s)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.1)
    raise AssertionError(f"the actor still answers {timeout_s} s after it was killed")
