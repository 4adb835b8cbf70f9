"""The comparison statistics against rliable itself (Agarwal et al., 2021) on fixed scores.

A comparison is one task, so rliable gets score matrices of shape (runs, 1).
The point estimates must agree exactly; the bootstrap intervals within the
noise of the two bootstraps' resamples.
"""

import importlib.util

import numpy as np
import pytest

from feedbackgym.training.experiments.stats import (
    bootstrap_ci,
    iqm,
    probability_of_improvement,
    probability_of_improvement_ci,
)
from tests.conftest import require

HAVE_RLIABLE = importlib.util.find_spec("rliable") is not None
if HAVE_RLIABLE:
    from rliable import library, metrics

SCORES = {
    "shaping": np.array([0.73, 0.62, 0.54, 0.70, 0.87, 0.48, 0.91, 0.83, 0.43, 0.66]),
    "sparse": np.array([0.67, 0.20, 0.13, 0.41, 0.32, 0.19, 0.70, 0.07]),
    # Success rates over 4 validation episodes: many ties.
    "ties": np.array([0.0, 0.25, 0.5, 0.5, 0.75, 1.0, 1.0, 1.0, 0.5]),
}
"""Each arm's final success, one per run (seed)."""

RELIABLE_REPS = 5_000
"""rliable's resamples: its bootstrap runs a Python call per resample."""
TOLERANCE = 0.02
"""How far two bootstraps' percentiles may lie apart on scores in [0, 1] at these reps."""


@pytest.fixture(autouse=True)
def _needs_rliable():
    require(HAVE_RLIABLE, "rliable (the test extra)")


@pytest.fixture
def seeded_numpy():
    """rliable draws its resamples from NumPy's global generator: seed it, then restore it."""
    state = np.random.get_state()
    np.random.seed(0)
    yield
    np.random.set_state(state)


def _runs(scores: np.ndarray) -> np.ndarray:
    return scores[:, None]


@pytest.mark.parametrize("arm", SCORES)
@pytest.mark.parametrize("runs", range(1, 11))
def test_iqm_is_rliables_aggregate_iqm(arm, runs):
    scores = SCORES[arm][:runs]
    assert iqm(scores) == metrics.aggregate_iqm(_runs(scores))


@pytest.mark.parametrize(("x", "y"), [("shaping", "sparse"), ("sparse", "ties"), ("ties", "ties")])
def test_probability_of_improvement_is_rliables(x, y):
    expected = metrics.probability_of_improvement(_runs(SCORES[x]), _runs(SCORES[y]))
    assert probability_of_improvement(SCORES[x], SCORES[y]) == expected


@pytest.mark.parametrize("statistic", ["mean", "iqm"])
# Not "ties": on a few distinct scores the statistic's bootstrap distribution is a
# step function, and a percentile at a step lands on either side of it whatever the
# reps (there the IQM's 97.5th percentile is 0.9 or 0.95: 97.8% of resamples are at
# most 0.9). The probability of improvement's interval below does cover tied scores.
@pytest.mark.parametrize("arm", ["shaping", "sparse"])
def test_bootstrap_ci_matches_rliables_stratified_percentile_bootstrap(
    statistic, arm, seeded_numpy
):
    aggregate = getattr(metrics, f"aggregate_{statistic}")
    _, intervals = library.get_interval_estimates(
        {arm: _runs(SCORES[arm])},
        lambda scores: np.array([aggregate(scores)]),
        method="percentile",
        reps=RELIABLE_REPS,
    )
    expected = intervals[arm].ravel()
    assert bootstrap_ci(SCORES[arm], statistic) == pytest.approx(tuple(expected), abs=TOLERANCE)


@pytest.mark.parametrize(("x", "y"), [("shaping", "sparse"), ("sparse", "ties")])
def test_probability_of_improvement_ci_matches_rliables_independent_bootstrap(x, y, seeded_numpy):
    # A list of score matrices: rliable resamples each one's runs independently.
    _, intervals = library.get_interval_estimates(
        {"pair": [_runs(SCORES[x]), _runs(SCORES[y])]},
        lambda a, b: np.array([metrics.probability_of_improvement(a, b)]),
        method="percentile",
        reps=RELIABLE_REPS // 2,
    )
    expected = intervals["pair"].ravel()
    actual = probability_of_improvement_ci(SCORES[x], SCORES[y])
    assert actual == pytest.approx(tuple(expected), abs=TOLERANCE)
