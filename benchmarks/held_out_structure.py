"""How much of the held-out seeds' task structure repeats training's, for the suites without splits.

CodeFix and the web families validate on held-out seeds, not on held-out
compositions. For each, this counts distinct task structures (a task with its
names, numbers and texts taken out) over the first ``--train`` training seeds
and over the held-out seeds, and how many held-out structures also occur in
training::

    python benchmarks/held_out_structure.py --train 5000

CodeFix's structure: the bug family, the number of files, of tests and of
failing tests. A web task's: its goal with every string and number blanked
(which options, list lengths, flags), drawn without a browser.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable
from typing import Any

from gymnasium.utils.seeding import np_random

from feedbackgym.envs.base import DEFAULT_VALIDATION_SEEDS
from feedbackgym.envs.code.env import VALIDATION_SEEDS as CODE_SEEDS
from feedbackgym.envs.code.env import CodeFixEnv
from feedbackgym.envs.web.tasks.checkout import CheckoutTask
from feedbackgym.envs.web.tasks.form import FormTask
from feedbackgym.envs.web.tasks.order_admin import OrderAdminTask


def shape(value: Any) -> Any:
    """``value`` with strings and numbers blanked: what is asked, not with which data.

    Example:
        >>> shape({"qty": 3, "coupons": ["A", "B"], "gift": True})
        {'coupons': ['s', 's'], 'gift': True, 'qty': 'n'}
    """
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return "s"
    if isinstance(value, (int, float)):
        return "n"
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    return [shape(v) for v in value]


def _count(structure: Callable[[int], str], train: Iterable[int], held: Iterable[int]) -> str:
    train_keys = {structure(s) for s in train}
    held_keys = [structure(s) for s in held]
    repeated = sum(k in train_keys for k in held_keys)
    return (
        f"{len(train_keys):,} | {len(set(held_keys)):,} ({len(held_keys)} seeds) "
        f"| {repeated / len(held_keys):.0%}"
    )


def _code(difficulty: str) -> Callable[[int], str]:
    env = CodeFixEnv(difficulty, sandbox="local")

    def structure(seed: int) -> str:
        env.reset(seed=seed)
        project = env._state.project  # type: ignore[union-attr]
        return f"{project.family}/{len(project.files)}/{len(project.tests)}/{len(project.failing)}"

    return structure


def _web(task: Any) -> Callable[[int], str]:
    def structure(seed: int) -> str:
        goal = task.generate(np_random(seed)[0])["goal"]  # as the env seeds it
        return json.dumps(shape(goal), sort_keys=True)

    return structure


def main() -> None:
    """Prints one Markdown row per suite and difficulty or family."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train", type=int, default=5000, help="training seeds counted")
    args = parser.parse_args()
    train = range(args.train)
    print("| suite | distinct in training | distinct held out | held-out repeating training |")
    print("|---|---|---|---|")
    for difficulty, held in CODE_SEEDS.items():
        print(f"| CodeFix {difficulty} | {_count(_code(difficulty), train, held)} |", flush=True)
    for name, task in (("WebCheckout", CheckoutTask()), ("WebForm", FormTask())):
        print(f"| {name} | {_count(_web(task), train, DEFAULT_VALIDATION_SEEDS)} |", flush=True)
    order = OrderAdminTask()
    print(f"| WebOrderAdmin | {_count(_web(order), train, DEFAULT_VALIDATION_SEEDS)} |")


if __name__ == "__main__":
    main()
