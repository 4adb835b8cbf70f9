"""Prints training throughput beside the rate the envs could feed it, all in one run.

On OpsIncident hard with the guide-then-review+shaping stack (shaping, hints, reviews,
the schedule), each measured in this process one after another, best of
``--repeats``:

* env + stack: the stacks stepped with random actions, no learner (what the
  envs could feed a trainer);
* SB3 PPO (the ``compare`` default network, 8 envs, the feedback callbacks);
* the torch trainer (:func:`feedbackgym.training.torch_ppo.ppo.train`) at its defaults
  (CleanRL's 4 epochs, 2 threads in the update), its envs in the learner's
  process or stepped by one worker process (``--env-workers 1``) while the
  learner acts, each without and with every episode recorded to an HDF5 store;
  and with the update a ``compare --trainer torch`` run makes (SB3's 10 epochs
  of 256 samples, one thread), also recorded;
* the same with the update overlapped (``--overlap-update``): each round trains
  in an update worker process while the next is collected, one update stale;
* each recorded setup also with ``TrajectoryStore(path, writer="process")``
  (``+ writer process``): the episodes' encoding, log and seal in a writer
  process beside each stepping process, against the recorder in the stepping
  process (``+ recorder``: per env a store, as worker processes given a path do).

The torch trainer's rates are steady state: from the end of its first round
to the end of its last (imports, worker start-up and the first round are paid
once a run). Ratios are against the env + stack rate of the same run (the
machine's speed drifts; ratios within one run do not). A recorded setup's share
of its unrecorded one is given best over best and as the median (and range) of
the per-repeat ratios: on a VM whose speed drifts by tens of percent within
minutes, use ``--repeats 5`` or more and read the median.

Usage:
    python benchmarks/train_throughput.py [--steps 131072] [--repeats 2] [--num-envs 32]
        [--rows SETUP [SETUP ...]]

``--rows`` runs only the named setups (as the table names them), e.g.
``--rows "torch trainer, 1 env worker(s)" "torch, 1 env worker(s) + recorder"``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np
import torch

import feedbackgym
from feedbackgym.config import FeedbackConfig
from feedbackgym.datasets import TrajectoryStore
from feedbackgym.training.common.arms import arm_config
from feedbackgym.training.common.update_presets import UPDATE_PRESETS
from feedbackgym.training.torch_ppo.ppo import PPOConfig, train

ENV_ID = "feedbackgym/OpsIncidentHard-v0"
OVERLAP = {"overlap_update": True, "update_threads": 1}
"""The update in a worker process of one thread (three processes on two cores)."""
COMPARE_UPDATE = {
    "n_epochs": UPDATE_PRESETS["sb3"].n_epochs,
    "batch_size": 256,
    "update_threads": 1,
}
"""The update of a ``compare --preset sb3`` run (SB3's 10 epochs of 256 samples, one thread)."""
ARM = "guide-then-review+shaping"


def stack_rate(steps: int, config: FeedbackConfig) -> float:
    """Steps/s of the stack alone, random actions, episodes reset as they end."""
    env = feedbackgym.make(ENV_ID, config)
    env.action_space.seed(0)
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    rate = steps / (time.perf_counter() - start)
    env.close()
    return rate


def sb3_rate(steps: int, config: FeedbackConfig) -> float:
    """Steps/s of SB3 PPO training on the stack (8 envs, 128 steps a round, (128, 128))."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor

    from feedbackgym.control import FeedbackController
    from feedbackgym.training.sb3.callbacks import feedback_callbacks
    from feedbackgym.training.sb3.run_sb3 import DEFAULT_NET_ARCH

    venv = VecMonitor(DummyVecEnv([lambda: feedbackgym.make(ENV_ID, config)] * 8))
    model = PPO(
        "MultiInputPolicy",
        venv,
        n_steps=128,
        batch_size=256,
        policy_kwargs={"net_arch": list(DEFAULT_NET_ARCH)},
        seed=0,
        device="cpu",
    )
    model.set_logger(Logger(None, []))
    start = time.perf_counter()
    model.learn(steps, callback=feedback_callbacks(FeedbackController(config)))
    rate = steps / (time.perf_counter() - start)
    venv.close()
    return rate


def torch_rate(
    steps: int, num_envs: int, record: str | None, writer: str = "thread", **settings: int
) -> float:
    """Steady-state steps/s of the torch trainer on the stack, recording at ``record`` if given.

    In-process envs share one store, as a run's do. With ``writer="thread"``
    worker processes' envs each write a shard at the path (as before writer
    processes); with ``"process"`` each worker's envs share one store whose
    episodes a writer process beside the worker encodes, logs and seals.
    ``settings`` override :class:`PPOConfig`'s.
    """
    config = PPOConfig(ENV_ID, ARM, total_steps=steps, n_envs=num_envs, device="cpu", **settings)
    ends: list[float] = []

    def on_round(round_: int, metrics: dict[str, float]) -> None:
        ends.append(time.perf_counter())

    if record is None:
        train(config, on_round=on_round)
    elif config.env_workers and writer == "thread":
        train(config, on_round=on_round, record=record)
    else:
        with TrajectoryStore(record, writer=writer) as store:
            train(config, on_round=on_round, record=store)
    return (len(ends) - 1) * config.n_envs * config.n_steps / (ends[-1] - ends[0])


def recorded_share_in_turn(
    steps: int, num_envs: int, store_path: str, **settings: int
) -> tuple[float, float, float, int]:
    """What recording leaves of the torch trainer's throughput, rounds taken in turn.

    Two learners in this process, one recording (``writer="process"``) and
    one not, play and train their rounds alternately (which goes first
    alternates too), so each pair of rounds sees one machine speed. Returns
    the median and quartiles over the pairs (the first two left out) of the
    unrecorded round's time over the recorded one's, and the number of pairs.
    The writer process may drain a recorded round's episodes during the next
    unrecorded round (idle CPU either learner leaves); a recorded run alone
    has its own collection's idle core for that, which the writer needs only
    a fraction of.

    Raises:
        ValueError: Fewer than 3 pairs of rounds (``steps`` too small).
    """
    from feedbackgym.training.torch_ppo.ppo import start_learner, train_rounds

    config = PPOConfig(ENV_ID, ARM, total_steps=steps, n_envs=num_envs, device="cpu", **settings)
    if config.rounds < 5:
        raise ValueError(f"{config.rounds} rounds give too few pairs: --steps for 5 or more")
    seconds: dict[bool, list[float]] = {False: [], True: []}
    with TrajectoryStore(store_path, writer="process") as store:
        learners, rounds = {}, {}
        try:
            for recorded in (False, True):
                record = store if recorded else None
                learner, controller = start_learner(config, torch.device("cpu"), record=record)
                learners[recorded] = learner
                rounds[recorded] = train_rounds(learner, controller, 0)  # as ppo.train plays them
            for round_ in range(config.rounds):
                for recorded in (False, True) if round_ % 2 else (True, False):
                    start = time.perf_counter()
                    next(rounds[recorded])  # a round's collection and update
                    seconds[recorded].append(time.perf_counter() - start)
        finally:
            for played in rounds.values():
                played.close()
            for learner in learners.values():
                learner.close()
                learner.envs.close()
    shares = [p / r for p, r in zip(seconds[False][2:], seconds[True][2:], strict=True)]
    low, median, high = np.percentile(shares, [25, 50, 75])
    return float(median), float(low), float(high), len(shares)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=131072)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--rows", nargs="+", metavar="SETUP", help="run only these setups")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rounds = args.steps // (args.num_envs * 128)
    config = arm_config(ARM, FeedbackConfig(), rounds)
    rates: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        runs = {
            "env + stack (random actions)": lambda r: stack_rate(args.steps // 4, config),
            "SB3 PPO": lambda r: sb3_rate(args.steps // 4, config),
            "torch trainer": lambda r: torch_rate(args.steps, args.num_envs, None),
            "torch trainer, compare's update": lambda r: torch_rate(
                args.steps, args.num_envs, None, **COMPARE_UPDATE
            ),
            "compare's update + recorder": lambda r: torch_rate(
                args.steps, args.num_envs, f"{tmp}/cu{r}", **COMPARE_UPDATE
            ),
            "compare's update + writer process": lambda r: torch_rate(
                args.steps, args.num_envs, f"{tmp}/cp{r}", "process", **COMPARE_UPDATE
            ),
            "torch trainer + recorder": lambda r: torch_rate(
                args.steps, args.num_envs, f"{tmp}/store{r}"
            ),
            **{
                f"torch trainer, {w} env worker(s)": lambda r, w=w: torch_rate(
                    args.steps, args.num_envs, None, env_workers=w
                )
                for w in (1, 2)
            },
            **{
                f"torch, {w} env worker(s) + recorder": lambda r, w=w: torch_rate(
                    args.steps, args.num_envs, f"{tmp}/w{w}-{r}", env_workers=w
                )
                for w in (1, 2)
            },
            "torch trainer, overlapped update": lambda r: torch_rate(
                args.steps, args.num_envs, None, **OVERLAP
            ),
            "torch trainer + recorder, overlapped": lambda r: torch_rate(
                args.steps, args.num_envs, f"{tmp}/io-{r}", **OVERLAP
            ),
            "torch trainer + writer process, overlapped": lambda r: torch_rate(
                args.steps, args.num_envs, f"{tmp}/ipo-{r}", "process", **OVERLAP
            ),
            "torch, 1 env worker, overlapped update": lambda r: torch_rate(
                args.steps, args.num_envs, None, env_workers=1, **OVERLAP
            ),
            "torch, 1 env worker + recorder, overlapped": lambda r: torch_rate(
                args.steps, args.num_envs, f"{tmp}/o-{r}", env_workers=1, **OVERLAP
            ),
            "torch trainer + writer process": lambda r: torch_rate(
                args.steps, args.num_envs, f"{tmp}/p{r}", "process"
            ),
            **{
                f"torch, {w} env worker(s) + writer process": lambda r, w=w: torch_rate(
                    args.steps, args.num_envs, f"{tmp}/pw{w}-{r}", "process", env_workers=w
                )
                for w in (1, 2)
            },
            "torch, 1 env worker + writer process, overlapped": lambda r: torch_rate(
                args.steps, args.num_envs, f"{tmp}/po-{r}", "process", env_workers=1, **OVERLAP
            ),
            "compare's update, 1 env worker": lambda r: torch_rate(
                args.steps, args.num_envs, None, env_workers=1, **COMPARE_UPDATE
            ),
            "compare's update, 1 env worker, overlapped": lambda r: torch_rate(
                args.steps, args.num_envs, None, env_workers=1, **{**COMPARE_UPDATE, **OVERLAP}
            ),
        }
        in_turn = {
            "torch trainer, recorded in turn": lambda: recorded_share_in_turn(
                args.steps, args.num_envs, f"{tmp}/turns"
            ),
            "compare's update, recorded in turn": lambda: recorded_share_in_turn(
                args.steps, args.num_envs, f"{tmp}/compare-turns", **COMPARE_UPDATE
            ),
        }
        unknown = set(args.rows or ()) - set(runs) - set(in_turn)
        if unknown:
            choices = [*runs, *in_turn]
            parser.error(f"unknown setups {sorted(unknown)}; choose from {choices}")
        runs = {name: run for name, run in runs.items() if not args.rows or name in args.rows}
        for repeat in range(args.repeats):
            for name, run in runs.items():
                rates.setdefault(name, []).append(run(repeat))
        shares = {
            name: share() for name, share in in_turn.items() if not args.rows or name in args.rows
        }
    best = {name: max(values) for name, values in rates.items()}
    base = best.get("env + stack (random actions)")
    print(f"{ENV_ID}, {ARM}, {args.steps} steps, torch trainer {args.num_envs} envs, 2 cores")
    if best:
        print(f"{'setup':<50} {'steps/s':>9} {'vs env + stack':>15}")
    for name, rate in best.items():
        ratio = f"{rate / base:>14.2f}x" if base else ""
        print(f"{name:<50} {rate:>9.0f} {ratio}")
    overlapped = "torch, 1 env worker, overlapped update"
    pairs = [
        ("torch trainer", "torch trainer + recorder"),
        ("torch trainer", "torch trainer + writer process"),
        ("torch trainer, compare's update", "compare's update + recorder"),
        ("torch trainer, compare's update", "compare's update + writer process"),
        ("torch trainer, overlapped update", "torch trainer + recorder, overlapped"),
        ("torch trainer, overlapped update", "torch trainer + writer process, overlapped"),
        (overlapped, "torch, 1 env worker + recorder, overlapped"),
        (overlapped, "torch, 1 env worker + writer process, overlapped"),
    ]
    pairs += [
        (f"torch trainer, {w} env worker(s)", f"torch, {w} env worker(s) + {recorder}")
        for w in (1, 2)
        for recorder in ("recorder", "writer process")
    ]
    for setup, recorded in pairs:
        if setup in best and recorded in best:
            # a repeat runs both within minutes of each other: closer machine speeds than best-of
            ratios = sorted(r / s for r, s in zip(rates[recorded], rates[setup], strict=True))
            print(
                f"{recorded} keeps {best[recorded] / best[setup]:.2f}x of {setup}'s throughput "
                f"(best over best; per repeat: median {statistics.median(ratios):.2f}, "
                f"{ratios[0]:.2f}-{ratios[-1]:.2f})"
            )
    for name, (median, low, high, count) in shares.items():
        print(
            f"{name}: recording (writer process) keeps {median:.2f}x of the throughput "
            f"(median of {count} pairs of rounds, quartiles {low:.2f}-{high:.2f})"
        )
    print(f"numpy {np.__version__}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
