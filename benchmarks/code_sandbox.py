"""Prints CodeFix sandbox latencies, both backends, beside bare ``docker run`` and ``docker exec``.

For each backend: a cold reset (Docker: a new container is started), the first
reset of a new env with the warm pool (Docker: an idle container is taken), a
warm reset (the container is kept), one test run (``run all tests`` on a medium
project: a wipe, the project written, the suite run under limits, leftovers
killed) and expert episodes per second (six steps, four of them runs). Beside
them, on the same image: a bare ``docker run --rm IMAGE python3 -c pass``, a
bare ``docker exec CONTAINER python3 -c pass`` in a warm container started like
the sandbox's, and a bare ``bwrap ... python3 -c pass`` with the local
backend's mounts and user. Each figure is the median of its samples; a test
run and its bare baseline are sampled in alternation, so that load on the
machine hits both alike.

Usage:
    python benchmarks/code_sandbox.py [--runs 30] [--episodes 20] [--backends docker,local]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from collections.abc import Callable

from feedbackgym.envs.code import CodeFixEnv
from feedbackgym.envs.code.actions import RUN_ALL
from feedbackgym.envs.code.sandbox import docker_ready


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:8.1f} ms"


def bare_docker(runs: int) -> tuple[list[float], Callable[[], object], Callable[[], None]]:
    """Samples of a bare ``docker run --rm``; a bare ``docker exec`` to sample; a clean-up."""
    import docker

    from feedbackgym.envs.code.sandbox.docker import ContainerConfig
    from feedbackgym.envs.code.sandbox.image import image_tag

    client = docker.from_env()
    command = ["python3", "-S", "-c", "pass"]
    run_rm = [
        timed(lambda: client.containers.run(image_tag(), command, remove=True, network_mode="none"))
        for _ in range(max(2, min(runs, 5)))
    ]
    warm = client.containers.run(**ContainerConfig().run_arguments())  # the sandbox's own limits

    def bare_exec() -> object:
        exec_id = client.api.exec_create(warm.id, command)["Id"]
        return client.api.exec_start(exec_id, demux=True)

    return run_rm, bare_exec, lambda: warm.remove(force=True)


def bare_bwrap() -> Callable[[], object]:
    """A bare ``bwrap`` start of ``python3 -c pass`` with the local backend's mounts."""
    from feedbackgym.envs.code.sandbox.local import LocalSandbox

    box = LocalSandbox()
    command = [*box._command, box._python, "-S", "-c", "pass"]  # the backend's own mounts
    uid = box._uid  # and its user
    groups = None if uid is None else []
    return lambda: subprocess.run(
        command, check=True, env={}, user=uid, group=uid, extra_groups=groups
    )


def measure(kind: str, runs: int, episodes: int, bare: Callable[[], object]) -> dict[str, str]:
    cold, first = [], []
    for _ in range(min(3, runs)):
        if kind == "docker":
            from feedbackgym.envs.code.sandbox.docker import ContainerConfig, pool_for

            pool_for(ContainerConfig()).shutdown()  # no idle container left: the next one starts
        env = CodeFixEnv("medium", sandbox=kind)
        cold.append(timed(lambda env=env: env.reset(seed=0)))
        env.close()
        env = CodeFixEnv("medium", sandbox=kind)
        first.append(timed(lambda env=env: env.reset(seed=0)))
        env.close()
    env = CodeFixEnv("medium", sandbox=kind)
    env.reset(seed=0)
    warm = [timed(lambda i=i: env.reset(seed=i)) for i in range(runs)]
    env.reset(seed=0)
    test_runs, bare_runs = [], []
    for _ in range(runs):
        test_runs.append(timed(lambda: env.step(RUN_ALL)))
        bare_runs.append(timed(bare))
    start = time.perf_counter()
    for seed in range(episodes):
        env.reset(seed=seed)
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(env.expert_action())
            done = terminated or truncated
    rate = episodes / (time.perf_counter() - start)
    env.close()
    ratio = statistics.median(test_runs) / statistics.median(bare_runs)
    return {
        "cold reset": ms(cold),
        "new env, warm pool": ms(first),
        "warm reset": ms(warm),
        "test run": ms(test_runs),
        "bare exec / bwrap": ms(bare_runs),
        "run / bare": f"{ratio:8.2f} x",
        "episodes/s": f"{rate:8.1f}   ",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--backends", default="docker,local")
    args = parser.parse_args()
    rows: dict[str, dict[str, str]] = {}
    cleanup: Callable[[], None] = lambda: None  # noqa: E731
    for kind in args.backends.split(","):
        if kind == "docker":
            if not docker_ready():
                print("docker: no engine or no image (`feedbackgym sandbox build`); skipped")
                continue
            run_rm, bare_exec, cleanup = bare_docker(args.runs)
            rows["docker"] = measure("docker", args.runs, args.episodes, bare_exec)
            rows["docker"]["bare docker run --rm"] = ms(run_rm)
        else:
            rows["local"] = measure("local", args.runs, args.episodes, bare_bwrap())
    cleanup()
    names = list(dict.fromkeys(name for row in rows.values() for name in row))
    print(f"{'':22}" + "".join(f"{kind:>16}" for kind in rows))
    for name in names:
        print(f"{name:22}" + "".join(f"{rows[kind].get(name, '-'):>16}" for kind in rows))
    print("bare exec / bwrap: a bare `docker exec` (docker), a bare `bwrap` start (local)")


if __name__ == "__main__":
    main()
