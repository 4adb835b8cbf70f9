"""Prints the trajectory recorder's throughput beside its baselines, measured in one run.

On ``feedbackgym/OpsIncident-v0`` (medium, vector observations, random
actions, reset when an episode ends), best of ``--repeats``:

* the env alone, the env under :class:`~feedbackgym.wrappers.RecordTrajectories`
  and the env under Minari's ``DataCollector`` on the same actions, taking turns
  a block of whole episodes (1,000 steps or more) at a time (ratios: best over
  best, and the median of the per-repeat ratios); the recorder is timed to the
  end of ``close()`` (every episode in a sealed HDF5 file), Minari to the end of
  ``create_dataset``, in a child process of its own;
* the write path alone on the episodes the recorder builds, alternated:
  ``TrajectoryStore`` (``add_episode`` for each, then ``close``: log, then
  sealed segment) against a raw batched h5py write of the same columns
  (10,000-row batches appended to one growing dataset per field), in
  wall-clock and CPU time.

Goals: recorder step time <= 1.3x the raw env's, >= 15x Minari's steps/s,
write path >= 0.5x raw h5py.

Usage:
    python benchmarks/recorder.py [--steps 20000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import h5py
import numpy as np

import feedbackgym
from feedbackgym.datasets import Episode, TrajectoryStore
from feedbackgym.datasets._storage.codec import EncodedEpisode, decode_encoded
from feedbackgym.datasets.episode import concat_columns
from feedbackgym.wrappers import RecordTrajectories

gym.register_envs(feedbackgym)

ENV_ID = "feedbackgym/OpsIncident-v0"
BATCH_ROWS = 10_000
BLOCK_STEPS = 1_000
Run = Callable[[], None]


def play(env: gym.Env[Any, Any], actions: list[int]) -> None:
    """Resets ``env`` with seed 0 and steps it through ``actions``."""
    env.reset(seed=0)
    advance(env, actions)


def advance(env: gym.Env[Any, Any], actions: list[int]) -> None:
    """Steps ``env`` through ``actions``, resetting when an episode ends."""
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()


RECORDER = "env + RecordTrajectories"
MINARI = "env + Minari DataCollector"


def finish(name: str, env: gym.Env[Any, Any]) -> None:
    """Ends a timed env's recording: the recorder seals its store, Minari writes its dataset."""
    if name == MINARI:
        env.create_dataset(  # type: ignore[attr-defined]
            dataset_id="bench/ops-v0",
            algorithm_name="random",
            author="benchmark",
            author_email="-",
            code_permalink="-",
            description="benchmark",
            eval_env=ENV_ID,
        )
    else:
        env.close()


def blocks_of(actions: list[int], steps: int) -> list[list[int]]:
    """Splits ``actions`` into blocks of whole episodes (from seed 0), each ``steps`` or more."""
    env = gym.make(ENV_ID)
    env.reset(seed=0)
    blocks: list[list[int]] = [[]]
    for action in actions:
        blocks[-1].append(action)
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
            if len(blocks[-1]) >= steps:
                blocks.append([])
    return [block for block in blocks if block]


class Contestant:
    """An env that takes turns, timed in this process."""

    def __init__(self, name: str, make: Callable[[], gym.Env[Any, Any]]) -> None:
        self.name = name
        self.env = make()

    def reset(self) -> float:
        """Seconds to reset with seed 0."""
        start = time.perf_counter()
        self.env.reset(seed=0)
        return time.perf_counter() - start

    def run(self, block: list[int]) -> float:
        """Seconds to step through ``block``."""
        start = time.perf_counter()
        advance(self.env, block)
        return time.perf_counter() - start

    def finish(self) -> float:
        """Seconds to end the recording (see :func:`finish`)."""
        start = time.perf_counter()
        finish(self.name, self.env)
        return time.perf_counter() - start


class ChildContestant:
    """Minari's collector in a child process: its own heap, timed there, in turns with the rest.

    Sharing one process slowed whichever env ran after Minari's blocks (its
    collector buffers every step as Python objects until ``create_dataset``):
    the recorder's step by about 3 us in this benchmark, the raw env's by less.
    """

    def __init__(self, workdir: Path) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve_minari, args=(child, str(workdir)))
        self._process.start()
        child.close()

    def _ask(self, *command: Any) -> float:
        self._conn.send(command)
        seconds: float = self._conn.recv()
        return seconds

    def reset(self) -> float:
        """:meth:`Contestant.reset`, in the child."""
        return self._ask("reset")

    def run(self, block: list[int]) -> float:
        """:meth:`Contestant.run`, in the child."""
        return self._ask("run", block)

    def finish(self) -> float:
        """:meth:`Contestant.finish`, in the child, which then exits."""
        seconds = self._ask("finish")
        self._process.join()
        return seconds


def _serve_minari(conn: Any, workdir: str) -> None:
    from minari import DataCollector

    os.environ["MINARI_DATASETS_PATH"] = str(Path(workdir) / "minari")
    contestant = Contestant(MINARI, lambda: DataCollector(gym.make(ENV_ID)))
    while True:
        command, *args = conn.recv()
        conn.send(getattr(contestant, command)(*args))
        if command == "finish":
            return


def env_timings(blocks: list[list[int]], workdir: Path, with_minari: bool) -> dict[str, float]:
    """Seconds each env takes for the blocks, to the end of :func:`finish`.

    The envs take turns a block (about a thousand steps) at a time: this VM's
    speed drifts by tens of percent over minutes, which turns slow both alike,
    while blocks keep one env's data from evicting the other's from the CPU
    caches at every step (turns of a step made the recorder look 1.4x the raw
    env where it is 1.6-1.9x on its own). Minari runs in a child process (see
    :class:`ChildContestant`).
    """
    contestants: list[Contestant | ChildContestant] = [
        Contestant("raw env", lambda: gym.make(ENV_ID)),
        Contestant(RECORDER, lambda: RecordTrajectories(gym.make(ENV_ID), workdir / "store")),
    ]
    names = ["raw env", RECORDER]
    if with_minari:
        contestants.append(ChildContestant(workdir))
        names.append(MINARI)
    spent = [c.reset() for c in contestants]
    for block in blocks:
        for i, contestant in enumerate(contestants):
            spent[i] += contestant.run(block)
    for i, contestant in enumerate(contestants):
        spent[i] += contestant.finish()
    return dict(zip(names, spent, strict=True))


def minari_missing() -> str | None:
    """Why Minari's DataCollector cannot run here, or ``None`` when it can."""
    try:
        import jax  # noqa: F401  (DataCollector needs it)
        import minari  # noqa: F401
    except ImportError as error:
        return f'{error} (pip install "minari[create,hdf5]")'
    return None


def store_writes(episodes: list[Episode], workdir: Path) -> Run:
    store = TrajectoryStore(workdir / "store")

    def run() -> None:
        for episode in episodes:
            store.add_episode(episode)
        store.close()

    return run


def batches(episodes: list[Episode], rows: int) -> list[list[Episode]]:
    """Consecutive groups of episodes holding about ``rows`` steps each."""
    groups: list[list[Episode]] = [[]]
    filled = 0
    for episode in episodes:
        if filled >= rows:
            groups.append([])
            filled = 0
        groups[-1].append(episode)
        filled += episode.meta.length
    return groups


def raw_h5py(episodes: list[Episode], workdir: Path) -> Run:
    def run() -> None:
        with h5py.File(workdir / "raw.h5", "w") as file:
            for batch in batches(episodes, BATCH_ROWS):
                for name, column in concat_columns(batch).items():
                    if name not in file:
                        file.create_dataset(
                            name,
                            shape=(0, *column.shape[1:]),
                            maxshape=(None, *column.shape[1:]),
                            dtype=h5py.string_dtype() if column.dtype == object else column.dtype,
                            chunks=True,
                        )
                    dataset = file[name]
                    dataset.resize(dataset.shape[0] + len(column), axis=0)
                    dataset[-len(column) :] = column

    return run


WRITERS = {"raw h5py, 10k-row batches": raw_h5py, "TrajectoryStore writes": store_writes}


def measure(prepare: Callable[[Any, Path], Run], data: Any) -> tuple[float, float]:
    """(wall, CPU) seconds of one run, set up in a fresh temporary directory."""
    workdir = Path(tempfile.mkdtemp(prefix="fg-bench-"))
    try:
        run = prepare(data, workdir)
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        return time.perf_counter() - wall, time.process_time() - cpu
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


class EpisodeCapture(TrajectoryStore):
    """A store that keeps the episodes it is given, as the recorder built them, in memory."""

    def __init__(self) -> None:
        super().__init__(os.devnull)
        self.captured: list[Episode] = []

    def add_encoded(self, episode: EncodedEpisode) -> None:
        """Keeps ``episode``, as columns."""
        self.captured.append(decode_encoded(episode))


def recorded_episodes(actions: list[int]) -> list[Episode]:
    """The episodes the recorder hands its store for ``actions`` (the write-path workload)."""
    capture = EpisodeCapture()
    play(RecordTrajectories(gym.make(ENV_ID), capture), actions)
    return capture.captured


def row(name: str, count: int, seconds: float, note: str = "") -> None:
    print(f"{name:<28} {count / seconds:>10.0f} {1e6 * seconds / count:>9.2f}us  {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    actions = np.random.default_rng(0).integers(70, size=args.steps).tolist()
    episodes = recorded_episodes(actions)
    blocks = blocks_of(actions, BLOCK_STEPS)
    steps = sum(e.meta.length for e in episodes)
    missing = minari_missing()
    runs: list[dict[str, float]] = []
    writes: list[dict[str, tuple[float, float]]] = []
    for _ in range(args.repeats):
        workdir = Path(tempfile.mkdtemp(prefix="fg-bench-"))
        try:
            runs.append(env_timings(blocks, workdir, missing is None))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        writes.append({name: measure(prepare, episodes) for name, prepare in WRITERS.items()})

    def best(name: str) -> float:
        return min(run[name] for run in runs)

    def ratios(a: str, b: str) -> str:
        """``a``'s time over ``b``'s: best of the repeats, and the median of per-repeat ratios."""
        median = statistics.median(run[a] / run[b] for run in runs)
        return f"{best(a) / best(b):.2f}x (median {median:.2f}x)"

    raw, recorder = best("raw env"), best(RECORDER)
    print(f"{ENV_ID}, random actions: {args.steps} steps, {len(episodes)} episodes")
    print(f"best of {args.repeats} runs")
    print(f"{'':<28} {'steps/s':>10} {'time/step':>11}")
    row("raw env", args.steps, raw)
    row(RECORDER, args.steps, recorder, f"{ratios(RECORDER, 'raw env')} raw step time")
    if missing is None:
        row(MINARI, args.steps, best(MINARI), f"{ratios(MINARI, RECORDER)} the recorder's")
    else:
        print(f"{MINARI:<28} skipped: {missing}")
    print(f"write path only, {steps} transitions (CPU time per transition in brackets):")
    floor = "raw h5py, 10k-row batches"
    bests = {name: [min(w[name][i] for w in writes) for i in (0, 1)] for name in WRITERS}
    for name, (wall, cpu) in bests.items():
        note = f"({1e6 * cpu / steps:.2f}us)"
        if name != floor:
            note += (
                f"  {bests[floor][0] / wall:.2f}x raw h5py throughput "
                f"(CPU {bests[floor][1] / cpu:.2f}x)"
            )
        row(name, steps, wall, note)


if __name__ == "__main__":
    main()
