"""Statistics of a comparison: the per-arm metrics of the results table, from the runs' curves.

Pure functions over curves and arrays (no file I/O, no plotting). A curve is one
run's validations, one array per column of its ``curve.csv`` (see
``feedbackgym.baselines.runner.read_curve``). :func:`summarize_arm` is the one
place that turns an arm's curves into its row of the results table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np

__all__ = [
    "Curve",
    "ci95",
    "mean_reached",
    "steps_to",
    "success_around_switch",
    "summarize_arm",
    "t95",
]

Curve: TypeAlias = Mapping[str, np.ndarray]
"""One run's validation curve: ``step``, ``phase``, ``success``, ... as arrays."""

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


def ci95(values: Sequence[float]) -> float:
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


def steps_to(curve: Curve, threshold: float) -> float:
    """The env steps at the first validation whose success reached ``threshold``.

    ``nan`` when none did.

    Example:
        >>> curve = {"step": np.array([100.0, 200.0, 300.0]), "success": np.array([0.2, 0.6, 0.9])}
        >>> steps_to(curve, 0.5), steps_to(curve, 0.95)
        (200.0, nan)
    """
    reached = np.nonzero(curve["success"] >= threshold)[0]
    return float(curve["step"][reached[0]]) if len(reached) else float("nan")


def mean_reached(steps: Sequence[float]) -> float:
    """The mean of ``steps`` over the runs that reached the threshold (not ``nan``).

    ``nan`` when none did.

    Example:
        >>> mean_reached([100.0, float("nan"), 300.0]), mean_reached([float("nan")])
        (200.0, nan)
    """
    reached = [s for s in steps if not math.isnan(s)]
    return float(np.mean(reached)) if reached else float("nan")


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

    Success and return are at each run's last validation; ``steps_to_*`` is
    averaged over the runs that reached that success (``reached_*`` of them).

    Example:
        >>> curve = {
        ...     "step": np.array([100.0, 200.0]),
        ...     "phase": np.array(["none", "none"]),
        ...     "success": np.array([0.6, 0.8]),
        ...     "success_unguided": np.array([0.6, 0.8]),
        ...     "mean_return": np.array([0.5, 1.5]),
        ... }
        >>> row = summarize_arm("sparse", [curve, {**curve, "success": np.array([0.0, 0.4])}])
        >>> row["seeds"], round(row["success"], 3), row["steps_to_50"], row["reached_50"]
        (2, 0.6, 100.0, 1)
    """
    final = [float(c["success"][-1]) for c in curves]
    unguided = [float(c["success_unguided"][-1]) for c in curves]
    to50 = [steps_to(c, 0.5) for c in curves]
    to80 = [steps_to(c, 0.8) for c in curves]
    before, after = success_around_switch(curves)
    return {
        "arm": arm,
        "seeds": len(curves),
        "success": float(np.mean(final)),
        "success_ci95": ci95(final),
        "success_unguided": float(np.mean(unguided)),
        "steps_to_50": mean_reached(to50),
        "reached_50": sum(not math.isnan(s) for s in to50),
        "steps_to_80": mean_reached(to80),
        "reached_80": sum(not math.isnan(s) for s in to80),
        "final_return": float(np.mean([c["mean_return"][-1] for c in curves])),
        "success_before_switch": before,
        "success_after_switch": after,
    }
