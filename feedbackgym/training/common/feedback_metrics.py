"""A round's feedback metrics, as every trainer logs them under ``feedback/`` in TensorBoard."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from feedbackgym.control import FeedbackController

__all__ = ["PHASE_CODES", "feedback_metrics"]

PHASE_CODES = {"none": 0, "guide": 1, "fade": 2, "review": 3, "both": 4}
"""How ``feedback/phase`` encodes the phase as a number in TensorBoard."""


def feedback_metrics(
    controller: FeedbackController, stats: Sequence[Any], mean_return: float | None
) -> dict[str, float]:
    """The round's metrics from the controller's state and every env's ``feedback_stats()``.

    ``phase`` (:data:`PHASE_CODES`), ``guide_weight``, ``review_weight``,
    ``config_version``, ``guide_every``, ``guide_dropout`` (the reliance rule's
    when it is on), ``review_window``, ``hints_per_episode``,
    ``reviews_per_round``, ``episodes_per_round``, ``misses``, ``alert``
    (whether the reward-drop alert fired at this round's start), and when known
    ``switch_step``, ``hint_latency_p50_ms`` / ``_p99_ms``,
    ``review_latency_p99_ms`` and ``mean_return``; with restarts (a
    ``reexplore`` section) ``restores_per_round``, ``demo_restores_per_round``,
    ``restored_success`` (the share of restored episodes that succeeded),
    ``replayed_steps`` (steps replayed to reach the restarts, this round),
    ``restart_pool`` and ``demo_remaining``; with a curriculum ``curriculum_width``
    (the width in force once the rule has read the round just trained on: the
    next round's), ``curriculum_success`` (the smoothed training success at that
    width, when a round at it was reported since it last moved) and
    ``curriculum_signal`` (the share of groups of its ``group`` episodes that
    carry signal at the last round's success).

    Example:
        >>> metrics = feedback_metrics(FeedbackController(), [], mean_return=None)
        >>> metrics["phase"], metrics["hints_per_episode"]
        (1.0, 0.0)
    """
    state = controller.state
    guide = [s["guide"] for s in stats if s.get("guide")]
    review = [s["review"] for s in stats if s.get("review")]
    episodes = sum(r["episodes_ended"] for r in review)
    hint_latency = [x for g in guide for x in g["latencies_ms"]]
    review_latency = [x for r in review for x in r["latencies_ms"]]
    metrics = {
        "phase": float(PHASE_CODES.get(state.phase, -1)),
        "guide_weight": float(state.guide_weight),
        "review_weight": float(state.review_weight),
        "config_version": float(state.config_version),
        "guide_every": float(controller.config.guide.every),
        "guide_dropout": float(controller.guide_dropout),
        "review_window": float(controller.config.review.window),
        "hints_per_episode": sum(g["hints_given"] for g in guide) / max(1, episodes),
        "reviews_per_round": float(sum(r["reviews_given"] for r in review)),
        "episodes_per_round": float(episodes),
        "misses": float(sum(g["misses"] for g in guide) + sum(r["misses"] for r in review)),
        "alert": float(controller.alert_fired),
    }
    if state.switch_at is not None:
        metrics["switch_step"] = float(state.switch_at) * controller.schedule.total
    if hint_latency:
        metrics["hint_latency_p50_ms"] = float(np.percentile(hint_latency, 50))
        metrics["hint_latency_p99_ms"] = float(np.percentile(hint_latency, 99))
    if review_latency:
        metrics["review_latency_p99_ms"] = float(np.percentile(review_latency, 99))
    if mean_return is not None:
        metrics["mean_return"] = mean_return
    rule = controller.curriculum
    if rule is not None:
        metrics["curriculum_width"] = float(rule.width)
        metrics["curriculum_signal"] = float(rule.signal)
        if rule.average is not None:
            metrics["curriculum_success"] = float(rule.average)
    restarts = [s["reexplore"] for s in stats if s.get("reexplore")]
    if controller.config.reexplore is not None and restarts:
        metrics.update(_restart_metrics(restarts))
    return metrics


def _restart_metrics(restarts: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The round's restart counts, over every env's ``Reexplore.restart_stats()``."""
    ended = sum(r["restored_episodes"] for r in restarts)
    metrics = {
        "restores_per_round": float(sum(r["restores"] for r in restarts)),
        "demo_restores_per_round": float(sum(r["demo_restores"] for r in restarts)),
        "restored_success": sum(r["restored_successes"] for r in restarts) / max(1, ended),
        "replayed_steps": float(sum(r["replayed_steps"] for r in restarts)),
        "restart_pool": float(np.mean([r["pool"] for r in restarts])),
    }
    remaining = [r["demo_remaining"] for r in restarts if "demo_remaining" in r]
    if remaining:
        metrics["demo_remaining"] = float(np.mean(remaining))
    return metrics
