"""Sandbox lifecycle: no leaks over 500 episodes, warm reuse, vector envs, orphan clean-up."""

import gc
import os
import pickle
import subprocess

import gymnasium as gym
import pytest

import feedbackgym  # noqa: F401  (registers the ids)
from feedbackgym.envs.code import CodeFixEnv
from feedbackgym.envs.code.actions import LIST, REVERT, SUBMIT, view_action
from feedbackgym.envs.code.sandbox.local import sandbox_uid
from tests.envs.code.conftest import require_backend

ENV_ID = "feedbackgym/CodeFix-v0"
EPISODES = 500


def _running_processes():
    """Non-zombie processes that a sandbox could have left: the sandbox uid's, and our children."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = open(f"/proc/{pid}/status").read()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if fields["State"].startswith("Z"):
            continue
        uid = int(fields["Uid"].split()[0])
        if (os.geteuid() == 0 and uid == sandbox_uid()) or int(fields["PPid"]) == os.getpid():
            found.append(pid)
    return found


def _open_fds():
    return len(os.listdir("/proc/self/fd"))


def _play_short_episodes(env, cycle):
    """One-step episodes; the first action of ``cycle`` (a submit) runs the tests."""
    for episode in range(EPISODES):
        env.reset(seed=episode)
        _, _, terminated, truncated, _ = env.step(cycle[episode % len(cycle)])
        assert terminated or truncated


def test_500_local_episodes_leak_nothing():
    require_backend("local")
    before, fds = _running_processes(), _open_fds()
    env = gym.make(ENV_ID, difficulty="easy", sandbox="local", max_episode_steps=1)
    _play_short_episodes(env, [SUBMIT, LIST, view_action(0, 0), LIST, REVERT])
    env.close()
    assert _running_processes() == before
    assert _open_fds() <= fds


def _docker():
    require_backend("docker")
    import docker

    from feedbackgym.envs.code.sandbox.docker import LABEL

    client = docker.from_env()

    def containers(pid=None):
        owner = f":{pid or os.getpid()}"
        found = client.containers.list(all=True, filters={"label": LABEL})
        return [c for c in found if c.labels[LABEL].endswith(owner)]

    return client, LABEL, containers


@pytest.mark.docker
def test_500_docker_episodes_reuse_one_warm_container():
    _, _, containers = _docker()
    env = gym.make(ENV_ID, difficulty="easy", sandbox="docker", max_episode_steps=1)
    env.reset(seed=0)
    name = env.unwrapped.sandbox_name
    before = {c.name for c in containers()}
    _play_short_episodes(env, [SUBMIT, *[LIST, view_action(0, 0), REVERT] * 3])
    assert env.unwrapped.sandbox_name == name
    assert {c.name for c in containers()} == before
    container = next(c for c in containers() if c.name == name)
    assert [p[-1] for p in container.top()["Processes"]] == ["sleep infinity"]
    env.close()
    env.close()
    second = CodeFixEnv("easy", sandbox="docker")
    second.reset(seed=0)
    assert second.sandbox_name == name  # the warm pool hands the same container out again
    clone = pickle.loads(pickle.dumps(second))
    clone.step(SUBMIT)
    assert clone.sandbox_name not in ("", name)  # a copy gets a container of its own
    del clone
    gc.collect()
    second.close()
    assert len(containers()) <= 4


@pytest.mark.docker
def test_async_vector_env_workers_get_their_own_containers():
    _, _, containers = _docker()
    envs = gym.make_vec(
        ENV_ID, num_envs=2, vectorization_mode="async", sandbox="docker", difficulty="easy"
    )
    envs.reset(seed=0)
    envs.step([SUBMIT, SUBMIT])
    names = envs.get_attr("sandbox_name")
    assert len(set(names)) == 2 and all(n.startswith("feedbackgym-sandbox-") for n in names)
    worker_pids = {int(n.split("-")[2]) for n in names}  # names carry the worker's pid
    assert len(worker_pids) == 2 and os.getpid() not in worker_pids
    envs.close()
    for pid in worker_pids:
        assert containers(pid) == []  # each worker removed its containers when it exited


@pytest.mark.docker
def test_containers_of_dead_processes_are_removed():
    client, label, _ = _docker()
    from feedbackgym.envs.code.sandbox.docker import ContainerConfig, _host_id, pool_for
    from feedbackgym.envs.code.sandbox.image import image_tag

    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = client.containers.run(
        image_tag(),
        ["sleep", "infinity"],
        detach=True,
        network_mode="none",
        labels={label: f"{_host_id()}:{dead.pid}"},
    )
    assert pool_for(ContainerConfig()).remove_orphans() >= 1
    with pytest.raises(Exception, match="No such container|404"):
        client.containers.get(orphan.id)
