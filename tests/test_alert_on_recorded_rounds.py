"""The reward-drop alert on recorded runs: quiet over healthy ones, quick on a collapse.

``tests/data/alert_rounds/*.csv.gz`` hold the per-round mean return each run
reported to its controller (TensorBoard's ``feedback/mean_return``), one row a
round: ``quick.csv.gz`` is the main job (``feedbackgym compare --quick``: 15
runs of OpsIncident easy), ``hard.csv.gz`` 5 runs of the shaping arm on
OpsIncident hard over 1.5M steps each (``benchmarks/time_to_result.py --setups torch``). A
collapse is injected into each healthy run from a round on: the reward's sign
flipped, or the reward gone (0).
"""

import csv
import gzip
import logging
from pathlib import Path

import pytest

from feedbackgym.config import AlertConfig
from feedbackgym.control import RewardDropAlert

DATA = Path(__file__).parent / "data" / "alert_rounds"


def _runs() -> dict[str, list[float]]:
    runs: dict[str, list[float]] = {}
    for path in sorted(DATA.glob("*.csv.gz")):
        with gzip.open(path, "rt", newline="") as file:
            for row in csv.DictReader(file):
                runs.setdefault(f"{path.name.split('.')[0]}/{row['run']}", []).append(
                    float(row["mean_return"])
                )
    return runs


RUNS = _runs()


def _fired(means: list[float], **settings: float) -> list[int]:
    alert = RewardDropAlert(config=AlertConfig(**settings))
    return [round_ for round_, mean in enumerate(means) if alert.update(round_, mean)]


@pytest.fixture(autouse=True)
def _quiet(caplog):
    caplog.set_level(logging.ERROR, logger="feedbackgym.control")


def test_the_recorded_runs_are_there():
    assert {name.split("/")[0] for name in RUNS} >= {"quick"} and len(RUNS) >= 15
    assert all(len(means) >= 50 for means in RUNS.values())


def test_the_default_alert_stays_quiet_over_every_healthy_run():
    assert {name: fired for name, means in RUNS.items() if (fired := _fired(means))} == {}


def test_the_raw_rule_fires_in_healthy_runs():
    """Why the default smooths: the spec's rule on raw round means trips on noise."""
    noisy = [name for name, means in RUNS.items() if _fired(means, smoothing=1.0, noise=0.0)]
    assert len(noisy) >= 3, noisy


@pytest.mark.parametrize("collapse", ["flipped", "gone"])
def test_a_collapse_fires_the_alert_within_three_rounds(collapse):
    """At most one collapse in ten goes unseen: where the average lags a steep rise."""
    missed, injected = [], 0
    for name, means in RUNS.items():
        for at in (len(means) * k // 8 for k in (3, 4, 5, 6, 7)):
            if sum(means[at - 5 : at]) / 5 < 0.15:
                continue  # near the floor (0.1): a run with little to lose yet
            after = [-m if collapse == "flipped" else 0.0 for m in means[at:]]
            fired = [r for r in _fired(means[:at] + after) if r >= at]
            injected += 1
            if not fired or fired[0] > at + 2:
                missed.append((name, at, fired[:1]))
    assert injected >= 10 and len(missed) <= injected // 10, missed
    assert not [name for name, *_ in missed if name.startswith("hard/")]
