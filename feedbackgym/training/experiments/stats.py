"""Statistics of a comparison: the per-arm metrics of the results table, from the runs' curves.

Pure functions over curves and arrays (no file I/O, no plotting). A curve is one
run's validations, one array per column of its ``curve.csv`` (see
``feedbackgym.training.common.run_files.read_curve``). :func:`summarize_arm` is the one
place that turns an arm's curves into its row of the results table, and
:func:`improvement_rows` the one that sets arms against each other.

The aggregates follow rliable's methodology (Agarwal et al., "Deep Reinforcement
Learning at the Edge of the Statistical Precipice", NeurIPS 2021), over each
run's final validation success: the interquartile mean (:func:`iqm`) beside the
mean, each with a percentile bootstrap 95% confidence interval
(:func:`bootstrap_ci`: a comparison is one task, so the stratified bootstrap
resamples its seeds), and the probability that a run of one arm beats a run of
another (:func:`probability_of_improvement`). Each bootstrap draws from a
generator with a fixed seed: the same runs always give the same intervals.
``tests/training/test_stats_rliable.py`` checks them against rliable itself:
the IQM and the probability of improvement exactly, the intervals within the
bootstrap noise.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "BOOTSTRAP_REPS",
    "Curve",
    "IMPROVEMENT_FIELDS",
    "bootstrap_ci",
    "ci95",
    "final_success",
    "improvement_rows",
    "iqm",
    "probability_of_improvement",
    "probability_of_improvement_ci",
    "steps_to",
    "speed_scores",
    "success_around_switch",
    "summarize_arm",
    "t95",
]

Curve: TypeAlias = Mapping[str, np.ndarray]
"""One run's validation curve: ``step``, ``phase``, ``success``, ... as arrays."""

BOOTSTRAP_REPS = 10_000
"""Bootstrap resamples per confidence interval."""

IMPROVEMENT_FIELDS = ("arm", "baseline", "probability", "low", "high")
"""The columns of :func:`improvement_rows` (and of ``improvement.csv``)."""

_T95: tuple[float, ...] = (
    *(12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179),
    *(2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064),
    *(2.060, 2.056, 2.052, 2.048, 2.045, 2.042),
)
"""Two-sided 95% Student t quantiles for 1 to 30 degrees of freedom."""
_Z95 = 1.959964


def t95(df: int) -> float:
    """The two-sided 95% Student t quantile for ``df`` >= 1 degrees of freedom.

    Within 0.001: a table to 30, then two terms of the Cornish-Fisher expansion.

    Example:
        >>> t95(4), t95(30), round(t95(31), 3), round(t95(60), 3), round(t95(1000), 3)
        (2.776, 2.042, 2.039, 2.0, 1.962)
    """
    if df <= len(_T95):
        return _T95[df - 1]
    z = _Z95
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def ci95(values: Sequence[float] | np.ndarray) -> float:
    """The half-width of the Student t 95% confidence interval of the mean of ``values``.

    ``nan`` for fewer than two values.

    Example:
        >>> round(ci95([0.2, 0.4, 0.6]), 3), ci95([0.5])
        (0.497, nan)
    """
    n = len(values)
    if n < 2:
        return float("nan")
    return float(t95(n - 1) * np.std(values, ddof=1) / math.sqrt(n))


def steps_to(curve: Curve, threshold: float) -> tuple[float, bool]:
    """The env steps at the first validation whose success reached ``threshold``, censored.

    A run that never reached it is censored at its last validation: it gives
    the steps of that validation and ``True`` (it needs at least that many).

    Example:
        >>> curve = {"step": np.array([100.0, 200.0, 300.0]), "success": np.array([0.2, 0.6, 0.9])}
        >>> steps_to(curve, 0.5), steps_to(curve, 0.95)
        ((200.0, False), (300.0, True))
    """
    reached = np.nonzero(curve["success"] >= threshold)[0]
    if len(reached):
        return float(curve["step"][reached[0]]), False
    return float(curve["step"][-1]), True


def final_success(curves: Sequence[Curve]) -> np.ndarray:
    """Each run's success at its last validation: the score the arms are compared on.

    Example:
        >>> final_success([{"success": np.array([0.1, 0.5])}, {"success": np.array([0.7])}])
        array([0.5, 0.7])
    """
    return np.array([c["success"][-1] for c in curves], dtype=float)


def _trimmed_mean(values: np.ndarray, axis: int) -> np.ndarray:
    """The mean along ``axis`` without its lowest and highest quarter (``n // 4`` values each).

    As ``scipy.stats.trim_mean`` computes it: a partition, then the mean of the
    middle in the order the partition left it, so that the sums round alike.
    """
    n = values.shape[axis]
    cut = n // 4
    middle = np.partition(values, (cut, n - cut - 1), axis=axis)
    return np.take(middle, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def _mean(values: np.ndarray, axis: int) -> np.ndarray:
    return values.mean(axis=axis)


_STATISTICS: dict[str, Callable[[np.ndarray, int], np.ndarray]] = {
    "iqm": _trimmed_mean,
    "mean": _mean,
}
"""What :func:`bootstrap_ci` can estimate, each reducing one axis of an array."""


def iqm(values: ArrayLike) -> float:
    """The interquartile mean of ``values``: the mean of their middle half.

    rliable's IQM (``rliable.metrics.aggregate_iqm``), ``scipy.stats.trim_mean(values,
    0.25)``, to the last bit: a quarter of the values (rounded down) is cut from
    each end. One outlying run moves it less than the mean, and it is less noisy
    than the median. ``nan`` for no values.

    Example:
        >>> iqm([0.0, 0.4, 0.5, 0.6, 1.0]), iqm([0.25, 0.5]), iqm([])
        (0.5, 0.375, nan)
    """
    scores = np.asarray(values, dtype=float).ravel()
    return float(_trimmed_mean(scores, 0)) if len(scores) else float("nan")


def bootstrap_ci(
    values: ArrayLike, statistic: str = "mean", *, reps: int = BOOTSTRAP_REPS, seed: int = 0
) -> tuple[float, float]:
    """The percentile bootstrap 95% confidence interval of a statistic of the runs' scores.

    Draws ``reps`` resamples of the runs with replacement (rliable's stratified
    bootstrap, with one task) and takes the 2.5th and 97.5th percentiles of the
    statistic over them. ``(nan, nan)`` for fewer than two runs: one run says
    nothing of the spread. rliable's ``get_interval_estimates`` gives the same
    interval up to the resampling noise; on a few distinct scores (success rates
    of a few episodes) that noise can move a bound by a whole step of the
    statistic, when a percentile falls where its bootstrap distribution jumps.

    Args:
        values: One score per run.
        statistic: ``"mean"`` or ``"iqm"``.
        reps: Resamples.
        seed: The seed of the generator: the same scores always give the same interval.

    Example:
        >>> bootstrap_ci([0.25, 0.5, 0.75, 1.0]), bootstrap_ci([0.5])
        ((0.375, 0.875), (nan, nan))
    """
    scores = np.asarray(values, dtype=float).ravel()
    if len(scores) < 2:
        return float("nan"), float("nan")
    picks = np.random.default_rng(seed).integers(0, len(scores), size=(reps, len(scores)))
    low, high = np.percentile(_STATISTICS[statistic](scores[picks], 1), [2.5, 97.5])
    return float(low), float(high)


def _pair_scores(x: ArrayLike, y: ArrayLike) -> np.ndarray:
    """One row per run of ``x``, one column per run of ``y``: 1 if it beats it, 0.5 on a tie."""
    xs = np.asarray(x, dtype=float).ravel()[:, None]
    ys = np.asarray(y, dtype=float).ravel()[None, :]
    return (xs > ys) + 0.5 * (xs == ys)


def probability_of_improvement(x: ArrayLike, y: ArrayLike) -> float:
    """The probability that a run of arm X scores above a run of arm Y, ties counting half.

    ``P(X > Y) + P(X = Y) / 2`` over every pair of runs: the Mann-Whitney U
    statistic over ``n * m``, as rliable computes it. At 0.5 neither arm tends
    to score higher.

    Example:
        >>> probability_of_improvement([0.9, 0.8, 0.5], [0.5, 0.3])
        0.9166666666666666
    """
    return float(_pair_scores(x, y).mean())


def probability_of_improvement_ci(
    x: ArrayLike, y: ArrayLike, *, reps: int = BOOTSTRAP_REPS, seed: int = 0
) -> tuple[float, float]:
    """The percentile bootstrap 95% confidence interval of :func:`probability_of_improvement`.

    Resamples each arm's runs with replacement, the two independently (as
    rliable's ``StratifiedIndependentBootstrap``). ``(nan, nan)`` when either
    arm has fewer than two runs.

    Example:
        >>> probability_of_improvement_ci([0.9, 0.8, 0.5], [0.5, 0.3])
        (0.6666666666666666, 1.0)
    """
    pairs = _pair_scores(x, y)
    n, m = pairs.shape
    if min(n, m) < 2:
        return float("nan"), float("nan")
    generator = np.random.default_rng(seed)
    times_x = generator.multinomial(n, np.full(n, 1 / n), size=reps)  # each run's draws
    times_y = generator.multinomial(m, np.full(m, 1 / m), size=reps)
    resampled = ((times_x @ pairs) * times_y).sum(axis=1) / (n * m)
    low, high = np.percentile(resampled, [2.5, 97.5])
    return float(low), float(high)


def improvement_rows(scores: Mapping[str, ArrayLike]) -> list[dict[str, Any]]:
    """The probability of improvement of every arm over every other, with its 95% CI.

    Args:
        scores: Each arm's scores, one per run (see :func:`final_success`).

    Returns:
        One row per ordered pair of distinct arms, with the columns of
        :data:`IMPROVEMENT_FIELDS`: ``probability`` that a run of ``arm``
        beats a run of ``baseline``, ``low`` and ``high`` its 95% CI.

    Example:
        >>> rows = improvement_rows({"shaping": [0.9, 0.8], "sparse": [0.0, 0.1]})
        >>> [(r["arm"], r["baseline"], r["probability"], r["low"]) for r in rows]
        [('shaping', 'sparse', 1.0, 1.0), ('sparse', 'shaping', 0.0, 0.0)]
    """
    rows = []
    for arm, baseline in itertools.permutations(scores, 2):
        probability = probability_of_improvement(scores[arm], scores[baseline])
        low, high = probability_of_improvement_ci(scores[arm], scores[baseline])
        values = (arm, baseline, probability, low, high)
        rows.append(dict(zip(IMPROVEMENT_FIELDS, values, strict=True)))
    return rows


def success_around_switch(curves: Sequence[Curve]) -> tuple[float, float]:
    """Success at the last validation before the fade, and the mean after the fade ends.

    Each averaged over the runs that switched; ``(nan, nan)`` when none did.

    Example:
        >>> phases = np.array(["guide", "guide", "fade", "review", "review"])
        >>> switched = {"phase": phases, "success": np.array([0.1, 0.5, 0.6, 0.7, 0.9])}
        >>> held = {"phase": np.array(["guide"] * 5), "success": np.zeros(5)}
        >>> success_around_switch([switched, held])
        (0.5, 0.8)
    """
    before, after = [], []
    for curve in curves:
        phases = list(curve["phase"])
        if "fade" not in phases and len(set(phases)) < 2:
            continue  # this seed never switched (within the run)
        first_phase = phases[0]
        pre = [s for s, p in zip(curve["success"], phases, strict=True) if p == first_phase]
        post = [
            s
            for s, p in zip(curve["success"], phases, strict=True)
            if p not in (first_phase, "fade")
        ]
        if pre and post:
            before.append(pre[-1])
            after.append(float(np.mean(post)))
    if not before:
        return float("nan"), float("nan")
    return float(np.mean(before)), float(np.mean(after))


def summarize_arm(arm: str, curves: Sequence[Curve]) -> dict[str, Any]:
    """An arm's row of the results table, from its runs' curves (one per seed).

    Success and return are at each run's last validation: ``iqm`` and
    ``success`` (the mean) over the runs, each with its bootstrap 95% CI
    (``iqm_low``, ``iqm_high``, ``mean_low``, ``mean_high``; ``success_ci95``
    is the half-width of the Student t interval of the mean). ``steps_to_50``
    and ``steps_to_80`` are the IQM of the runs' steps to that success, a run
    that never reached it counted at its last validation: then
    ``steps_to_*_censored`` is true and the value a lower bound (``reached_*``
    runs reached it). ``last_step`` is the furthest validation of the runs;
    ``short_runs`` of them stopped before it (unfinished, or a smaller budget).
    ``replayed_steps`` is the mean over the runs of the steps replayed to reach
    restarts (not in ``step``), and ``steps_to_80_with_replayed`` the IQM of the
    steps to 80% with them counted (equal to ``steps_to_80`` without restarts).

    Example:
        >>> curve = {
        ...     "step": np.array([100.0, 200.0]),
        ...     "phase": np.array(["none", "none"]),
        ...     "success": np.array([0.6, 0.8]),
        ...     "success_unguided": np.array([0.6, 0.8]),
        ...     "mean_return": np.array([0.5, 1.5]),
        ... }
        >>> row = summarize_arm("sparse", [curve, {**curve, "success": np.array([0.0, 0.4])}])
        >>> row["seeds"], round(row["iqm"], 3), (row["mean_low"], row["mean_high"])
        (2, 0.6, (0.4, 0.8))
        >>> row["steps_to_50"], row["reached_50"], row["steps_to_80"], row["steps_to_80_censored"]
        (150.0, 1, 200.0, True)
    """
    final = final_success(curves)
    last = [float(c["step"][-1]) for c in curves]
    iqm_low, iqm_high = bootstrap_ci(final, "iqm")
    mean_low, mean_high = bootstrap_ci(final, "mean")
    before, after = success_around_switch(curves)
    return {
        "arm": arm,
        "seeds": len(curves),
        "last_step": max(last),
        "short_runs": sum(step < max(last) for step in last),
        "iqm": iqm(final),
        "iqm_low": iqm_low,
        "iqm_high": iqm_high,
        "success": float(np.mean(final)),
        "mean_low": mean_low,
        "mean_high": mean_high,
        "success_ci95": ci95(final),
        "success_unguided": float(np.mean([c["success_unguided"][-1] for c in curves])),
        **_steps_columns(curves, 50),
        **_steps_columns(curves, 80),
        "replayed_steps": float(np.mean([_replayed(c)[-1] for c in curves])),
        "steps_to_80_with_replayed": iqm(
            np.array(
                [steps_to({**c, "step": c["step"] + _replayed(c)}, 0.8)[0] for c in curves],
                dtype=float,
            )
        ),
        "final_return": float(np.mean([c["mean_return"][-1] for c in curves])),
        "success_before_switch": before,
        "success_after_switch": after,
    }


def speed_scores(curves: Sequence[Curve], percent: int) -> np.ndarray:
    """Each run's speed to ``percent``% success, for :func:`improvement_rows`: higher is sooner.

    Minus the env steps it took; ``-inf`` for a run that never got there
    (slower than any run that did, whatever its budget; two such runs tie).

    Example:
        >>> curve = {"step": np.array([100.0, 200.0]), "success": np.array([0.5, 0.9])}
        >>> speed_scores([curve, {**curve, "success": np.array([0.1, 0.2])}], 80)
        array([-200.,  -inf])
    """
    reached = [steps_to(c, percent / 100) for c in curves]
    return np.array([-math.inf if censored else -steps for steps, censored in reached], dtype=float)


def _replayed(curve: Curve) -> np.ndarray:
    """A curve's replayed steps at each validation (zeros for a curve without the column)."""
    return np.asarray(curve.get("replayed_steps", np.zeros(len(curve["step"]))), dtype=float)


def _steps_columns(curves: Sequence[Curve], percent: int) -> dict[str, Any]:
    """``steps_to_P`` (IQM, censored) with its bootstrap CI, ``..._censored``, ``reached_P``."""
    reached = [steps_to(c, percent / 100) for c in curves]
    steps = np.array([steps for steps, _ in reached], dtype=float)
    censored = [censored for _, censored in reached]
    low, high = bootstrap_ci(steps, "iqm")
    return {
        f"steps_to_{percent}": iqm(steps),
        f"steps_to_{percent}_low": low,
        f"steps_to_{percent}_high": high,
        f"steps_to_{percent}_censored": any(censored),
        f"reached_{percent}": censored.count(False),
    }
