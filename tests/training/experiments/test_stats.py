import math

import numpy as np
import pytest
import scipy.stats

from feedbackgym.training.experiments.stats import (
    IMPROVEMENT_FIELDS,
    bootstrap_ci,
    improvement_rows,
    iqm,
    probability_of_improvement,
    probability_of_improvement_ci,
    steps_to,
    summarize_arm,
)

SCORES = np.random.default_rng(1).uniform(size=20)


def _curve(success, step=100.0):
    success = np.asarray(success, dtype=float)
    return {
        "step": step * np.arange(1, len(success) + 1),
        "phase": np.array(["none"] * len(success)),
        "success": success,
        "success_unguided": success,
        "mean_return": success,
    }


@pytest.mark.parametrize("n", range(1, 14))
def test_iqm_is_scipys_25_percent_trimmed_mean(n):
    values = np.random.default_rng(n).normal(size=n)
    assert iqm(values) == pytest.approx(scipy.stats.trim_mean(values, 0.25))


def _scipy_percentile_ci(values, statistic):
    result = scipy.stats.bootstrap(
        (values,), statistic, n_resamples=10_000, method="percentile", rng=np.random.default_rng(7)
    )
    return tuple(result.confidence_interval)


@pytest.mark.parametrize(
    ("statistic", "reference"),
    [("mean", np.mean), ("iqm", lambda x, axis: scipy.stats.trim_mean(x, 0.25, axis=axis))],
)
def test_bootstrap_ci_matches_scipys_percentile_bootstrap(statistic, reference):
    low, high = bootstrap_ci(SCORES, statistic)
    assert (low, high) == pytest.approx(_scipy_percentile_ci(SCORES, reference), abs=0.02)
    point = np.mean(SCORES) if statistic == "mean" else iqm(SCORES)
    assert low < point < high


def test_bootstrap_ci_is_reproducible_and_needs_two_runs():
    assert bootstrap_ci(SCORES, "iqm") == bootstrap_ci(SCORES, "iqm")
    assert bootstrap_ci(SCORES, seed=1) != bootstrap_ci(SCORES, seed=2)
    assert all(math.isnan(x) for x in bootstrap_ci([0.5]))
    assert bootstrap_ci([0.3, 0.3, 0.3]) == (0.3, 0.3)


def test_probability_of_improvement_is_mann_whitney_u_over_the_pairs():
    x = [0.9, 0.5, 0.5, 0.7, 0.2, 1.0]  # ties within and across the arms
    y = [0.5, 0.3, 0.7, 0.1]
    u = scipy.stats.mannwhitneyu(x, y).statistic
    assert probability_of_improvement(x, y) == pytest.approx(u / (len(x) * len(y)))
    assert probability_of_improvement(y, x) == pytest.approx(1 - u / (len(x) * len(y)))
    assert probability_of_improvement(x, x) == 0.5


def test_probability_of_improvement_ci_resamples_each_arm():
    x, y = SCORES[:10], SCORES[10:] + 0.2
    low, high = probability_of_improvement_ci(x, y)
    assert 0 <= low < probability_of_improvement(x, y) < high <= 1
    assert (low, high) == probability_of_improvement_ci(x, y)
    # against the same bootstrap done pair by pair, without the counting trick
    rng = np.random.default_rng(3)
    resampled = [
        probability_of_improvement(rng.choice(x, len(x)), rng.choice(y, len(y)))
        for _ in range(10_000)
    ]
    assert (low, high) == pytest.approx(np.percentile(resampled, [2.5, 97.5]), abs=0.03)
    assert all(math.isnan(v) for v in probability_of_improvement_ci([0.5], y))


def test_improvement_rows_cover_every_ordered_pair():
    rows = improvement_rows({"a": [0.1, 0.2], "b": [0.3, 0.4], "c": [0.2, 0.5]})
    assert [(r["arm"], r["baseline"]) for r in rows] == [
        ("a", "b"),
        ("a", "c"),
        ("b", "a"),
        ("b", "c"),
        ("c", "a"),
        ("c", "b"),
    ]
    assert all(tuple(r) == IMPROVEMENT_FIELDS for r in rows)
    by_pair = {(r["arm"], r["baseline"]): r["probability"] for r in rows}
    assert by_pair["a", "b"] == 0 and by_pair["b", "a"] == 1
    assert by_pair["b", "c"] + by_pair["c", "b"] == 1
    assert improvement_rows({"a": [0.1]}) == []


def test_runs_that_never_reach_a_success_are_censored_at_their_last_validation():
    assert steps_to(_curve([0.1, 0.6, 0.9]), 0.5) == (200.0, False)
    assert steps_to(_curve([0.1, 0.2]), 0.5) == (200.0, True)
    curves = [
        _curve([0.5, 0.9]),  # 50% at 100, 80% at 200
        _curve([0.2, 0.6, 0.7, 0.85]),  # 200, 400
        _curve([0.1, 0.1, 0.6, 0.6, 0.6]),  # 300, never: 500
        _curve([0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),  # never, never: 600
    ]
    row = summarize_arm("sparse", curves)
    assert row["steps_to_50"] == pytest.approx(scipy.stats.trim_mean([100, 200, 300, 600], 0.25))
    assert (row["steps_to_50_censored"], row["reached_50"]) == (True, 3)
    assert row["steps_to_80"] == pytest.approx(450.0)  # the middle two of 200, 400, 500, 600
    assert (row["steps_to_80_censored"], row["reached_80"]) == (True, 2)
    assert (row["last_step"], row["short_runs"]) == (600.0, 3)
    done = summarize_arm("guide", curves[:1])
    assert (done["steps_to_80"], done["steps_to_80_censored"], done["reached_80"]) == (
        200,
        False,
        1,
    )


def test_an_arms_row_has_the_iqm_and_mean_with_their_intervals():
    finals = [0.1, 0.5, 0.6, 0.7, 1.0]
    row = summarize_arm("shaping", [_curve([0.0, f]) for f in finals])
    assert row["iqm"] == pytest.approx(0.6) and row["success"] == pytest.approx(0.58)
    assert (row["iqm_low"], row["iqm_high"]) == bootstrap_ci(finals, "iqm")
    assert (row["mean_low"], row["mean_high"]) == bootstrap_ci(finals, "mean")
    assert row["mean_low"] < row["success"] < row["mean_high"]
    assert row["success_ci95"] > 0  # the Student t half-width, kept for older readers
