"""How the simulated system answers an action and moves on by one step.

:func:`apply_action` changes the state for one action and records what the
agent saw; :func:`advance` lets time pass: unmitigated faults gain pressure and
burn the SLO error budget, mitigated ones recover.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from feedbackgym.envs.ops.actions import ACTION_MEANINGS, ACTIONS
from feedbackgym.envs.ops.catalog import (
    GLOBAL_ACTIONS,
    HEALTHY_METRICS,
    LOG_LINES,
    LOG_SIGNALS,
    METRIC_SCALE,
    METRICS,
    NOISE_LINES,
    SERVICES,
)
from feedbackgym.envs.ops.state import (
    INSPECTIONS,
    PRESSURE_GROWTH,
    RECENT_DEPLOY_MINUTES,
    ActiveFault,
    IncidentState,
    draw_int,
)

__all__ = [
    "INFO",
    "NO_EFFECT",
    "OK",
    "RESULTS",
    "WORSE",
    "advance",
    "apply_action",
    "settle_budget",
]

RESULTS: tuple[str, ...] = ("none", "info", "ok", "no_effect", "worse")
"""Codes of ``last_result``: what the previous action did."""
INFO, OK, NO_EFFECT, WORSE = 1, 2, 3, 4
"""The :data:`RESULTS` codes by name (v1 answers with the same codes)."""

_SERVICE_INDEX = {s: i for i, s in enumerate(SERVICES)}
_METRIC_INDEX = {m: i for i, m in enumerate(METRICS)}
_SIGNAL_INDEX = {s: i for i, s in enumerate(LOG_SIGNALS)}
_LATENCY, _ERRORS, _CPU = (_METRIC_INDEX[m] for m in ("latency_ms", "error_rate", "cpu"))
N_NOISE_LINES = 3
"""Routine lines mixed into every log inspection."""

BLIP_BURN = 0.01
"""Budget burned by restarting a healthy service (a short error spike)."""
SCALE_DOWN_BURN = (0.01, 5)
"""Burn per step, and steps, after scaling a service down."""
STAMPEDE_BURN = (0.02, 4)
"""Burn per step, and steps, after flushing a healthy cache."""
NEEDLESS_FAILOVER_BURN = 0.05
"""Budget burned by failing over a healthy database."""
OPEN_BREAKER_BURN = 0.004
"""Burn per step while the circuit breaker is open for no reason."""


def apply_action(state: IncidentState, index: int, rng: np.random.Generator) -> None:
    """Carries out action ``index``: updates the state and what the agent saw.

    Sets ``state.last_result`` (a :data:`RESULTS` code), ``state.last_output``
    (the console's answer) and, for a fatal action, ``state.outcome``.
    """
    action = ACTIONS[index]
    kind, service = action.kind, action.service
    state.last_action = ACTION_MEANINGS[index]
    if service is not None and kind.startswith("inspect_"):
        _inspect(state, kind.removeprefix("inspect_"), service, rng)
        return
    handler = _HANDLERS[kind]
    state.last_result, state.last_output = handler(state, service)


def advance(state: IncidentState) -> None:
    """Moves time on by one step and burns the SLO budget."""
    state.step += 1
    burn = 0.0
    for fault in state.faults:
        if fault.mitigated_at is None:
            fault.pressure += fault.growth
        burn += fault.fault.burn * (0.6 + fault.pressure) * (1.0 - state.recovery(fault))
    if state.breaker_open and not _has_fault(state, "dependency_outage"):
        burn += OPEN_BREAKER_BURN
    settle_budget(state, burn)


def settle_budget(state: Any, burn: float) -> None:
    """Burns ``burn`` and the pending penalties (``[per step, steps left]``) from the SLO budget.

    ``state`` has ``penalties``, ``budget`` and ``outcome`` (v0's and v1's
    incident states); an exhausted budget ends the episode (``slo_exhausted``).
    """
    if state.penalties:
        for penalty in state.penalties:
            burn += penalty[0]
            penalty[1] -= 1
        state.penalties = [p for p in state.penalties if p[1] > 0]
    state.budget = max(0.0, state.budget - burn)
    if state.budget <= 0.0 and state.outcome == "in_progress":
        state.outcome = "slo_exhausted"


def _has_fault(state: IncidentState, name: str) -> bool:
    return any(f.name == name for f in state.faults)


def _faults_at(state: IncidentState, service: str | None) -> list[ActiveFault]:
    return [f for f in state.faults if f.root == service]


def _severity(state: IncidentState, fault: ActiveFault) -> float:
    return min(2.0, 0.6 + fault.pressure) * (1.0 - state.recovery(fault))


# --- inspections -------------------------------------------------------------------------


def _inspect(state: IncidentState, what: str, service: str, rng: np.random.Generator) -> None:
    row = _SERVICE_INDEX[service]
    if what == "metrics":
        values = _current_metrics(state, service, rng)
        state.metrics_seen[row] = [
            min(1.0, v / scale) for v, scale in zip(values, METRIC_SCALE, strict=True)
        ]
        state.seen_at[row] = state.step
        at_service = _faults_at(state, service)
        if at_service and all(state.is_recovered(f) for f in at_service):
            state.verified.add(service)
        text = " ".join(f"{m}={_fmt(v)}" for m, v in zip(METRICS, values, strict=True))
        summary = text
    elif what == "logs":
        signals, lines = _log_lines(state, service, rng)
        state.logs_seen[row] = 0
        state.logs_seen[row, [_SIGNAL_INDEX[s] for s, _ in signals]] = 1
        state.log_pointers[row] = 0
        state.log_pointers[row, [_SERVICE_INDEX[t] for _, t in signals if t != service]] = 1
        text = "\n".join(lines)
        names = sorted({s if t == service else f"{s} ({t})" for s, t in signals})
        summary = "signals: " + (", ".join(names) or "routine lines only")
    else:
        recent = [d for d in state.deploys[service] if d.minutes_before <= RECENT_DEPLOY_MINUTES]
        state.deploys_seen[row] = (
            any(d.kind == "code" for d in recent),
            any(d.kind == "config" for d in recent),
        )
        text = "\n".join(
            f"{d.version} {d.kind} deploy, {d.minutes_before} min before the incident"
            for d in sorted(state.deploys[service], key=lambda d: d.minutes_before)
        )
        text = text or "no deploys (third-party service)"
        summary = text.split("\n")[0]
    state.evidence[(service, what)] = state.step
    state.inspected[row, INSPECTIONS.index(what)] = 1
    state.findings[(service, what)] = summary
    state.last_result, state.last_output = INFO, text


def _current_metrics(state: IncidentState, service: str, rng: np.random.Generator) -> list[float]:
    values = list(HEALTHY_METRICS[service])
    for fault in state.faults:
        severity = _severity(state, fault)
        if fault.root == service:
            for metric, delta in fault.fault.effects:
                values[_METRIC_INDEX[metric]] += delta * severity
        elif service in [s for s, _ in fault.fault.symptoms]:
            values[_LATENCY] += 400.0 * severity
            values[_ERRORS] += 0.05 * severity
    if service in state.red_herrings:
        values[_CPU] += 0.2
        values[_LATENCY] += 60.0
    noise = rng.standard_normal(len(METRICS)).tolist()
    return [max(0.0, v * (1.0 + 0.03 * n)) for v, n in zip(values, noise, strict=True)]


def _log_lines(
    state: IncidentState, service: str, rng: np.random.Generator
) -> tuple[list[tuple[str, str]], list[str]]:
    signals: list[tuple[str, str]] = []
    for fault in state.faults:
        if state.recovery(fault) >= 1.0:
            continue
        if fault.root == service:
            signals += [(fault.fault.signal, fault.root)] * 2
        signals += [(sig, fault.root) for s, sig in fault.fault.symptoms if s == service]
    if service in state.red_herrings:
        signals += [("harmless_warning", service), ("gc_pause", service)]
    filled = [(LOG_LINES[sig], target) for sig, target in signals]
    # One batched draw for the noise lines and every line's numbers keeps inspections cheap.
    draws = rng.random(N_NOISE_LINES + 2 * (len(filled) + N_NOISE_LINES)).tolist()
    filled += [
        (NOISE_LINES[draw_int(u, 0, len(NOISE_LINES))], service) for u in draws[:N_NOISE_LINES]
    ]
    numbers = iter(draws[N_NOISE_LINES:])
    lines = [
        template.format(
            pct=draw_int(next(numbers), 85, 100),
            pid=draw_int(next(numbers), 10, 9999),
            target=target,
        )
        for template, target in filled
    ]
    order = rng.permutation(len(lines)).tolist()
    return signals, [f"[{service}] {lines[i]}" for i in order]


def _fmt(value: float) -> str:
    return f"{value:.3f}" if value < 10 else f"{value:.0f}"


# --- interventions -----------------------------------------------------------------------


def _mitigate(state: IncidentState, service: str | None, kind: str) -> bool:
    """Marks the faults that ``kind`` on ``service`` fixes; returns whether any."""
    fixed = False
    for fault in state.faults:
        global_kind = fault.fault.mitigation in GLOBAL_ACTIONS
        if fault.fault.mitigation == kind and (global_kind or fault.root == service):
            if fault.mitigated_at is None:
                fault.mitigated_at = state.step
                fixed = True
    return fixed


def _restart(state: IncidentState, service: str | None) -> tuple[int, str]:
    if service == "db_primary":
        state.outcome = "destructive_action"
        return WORSE, "restarted db_primary: in-flight writes lost, data integrity incident"
    if service == "dependency":
        return NO_EFFECT, "dependency is a third-party service; it cannot be restarted"
    if _mitigate(state, service, "restart"):
        return OK, f"restarted {service}"
    relieved = _buy_time(state, service, "restart")
    if relieved:
        for fault in relieved:
            fault.pressure = 0.0
        return OK, f"restarted {service}; symptoms eased for now"
    state.penalties.append([BLIP_BURN, 1])
    return NO_EFFECT, f"restarted {service}: brief error spike, nothing changed"


def _rollback(state: IncidentState, service: str | None) -> tuple[int, str]:
    recent = [
        d for d in state.deploys.get(service or "", []) if d.minutes_before <= RECENT_DEPLOY_MINUTES
    ]
    if not recent or service in state.rolled_back:
        return NO_EFFECT, f"nothing recent to roll back on {service}"
    state.rolled_back.add(str(service))
    _mitigate(state, service, "rollback")
    return OK, f"rolled {service} back past {recent[-1].version}"


def _scale_up(state: IncidentState, service: str | None) -> tuple[int, str]:
    if service == "dependency":
        return NO_EFFECT, "dependency is a third-party service; it cannot be scaled"
    if _mitigate(state, service, "scale_up"):
        return OK, f"scaled up {service}"
    relieved = _buy_time(state, service, "scale_up")
    for fault in relieved:
        fault.growth = 0.5 * PRESSURE_GROWTH
    return (
        (OK, f"scaled up {service}; pressure grows slower")
        if relieved
        else (
            NO_EFFECT,
            f"scaled up {service}: no change",
        )
    )


def _scale_down(state: IncidentState, service: str | None) -> tuple[int, str]:
    if service == "dependency":
        return NO_EFFECT, "dependency is a third-party service; it cannot be scaled"
    state.penalties.append(list(SCALE_DOWN_BURN))
    return WORSE, f"scaled down {service}: less capacity, latency rises"


def _clear_disk(state: IncidentState, service: str | None) -> tuple[int, str]:
    if _mitigate(state, service, "clear_disk"):
        return OK, f"cleared old logs on {service}, disk usage back to normal"
    return NO_EFFECT, f"cleared disk on {service}: little to free"


def _flush_cache(state: IncidentState, service: str | None) -> tuple[int, str]:
    if _mitigate(state, service, "flush_cache"):
        return OK, "flushed the cache: bad entries gone"
    state.penalties.append(list(STAMPEDE_BURN))
    return WORSE, "flushed a healthy cache: cold-cache load hits the database"


def _failover_db(state: IncidentState, service: str | None) -> tuple[int, str]:
    lagging = [f for f in state.faults if f.name == "replica_lag" and not state.is_recovered(f)]
    if lagging:
        state.outcome = "destructive_action"
        return WORSE, "failed over onto a lagging replica: recent writes lost"
    if _mitigate(state, service, "failover_db"):
        return OK, "failed over: db_replica promoted to primary"
    state.penalties.append([NEEDLESS_FAILOVER_BURN, 1])
    return WORSE, "failed over a healthy database: brief outage during promotion"


def _toggle_breaker(state: IncidentState, service: str | None) -> tuple[int, str]:
    state.breaker_open = not state.breaker_open
    if state.breaker_open:
        _mitigate(state, service, "toggle_circuit_breaker")
        return OK, "circuit breaker to the third-party dependency is now OPEN"
    for fault in state.faults:
        if fault.name == "dependency_outage":
            fault.mitigated_at = None
    return OK, "circuit breaker to the third-party dependency is now CLOSED"


def _wait(state: IncidentState, service: str | None) -> tuple[int, str]:
    return NO_EFFECT, "waited one step"


def _escalate(state: IncidentState, service: str | None) -> tuple[int, str]:
    state.outcome = "escalated"
    return NO_EFFECT, "escalated to the on-call lead; the incident is out of your hands"


def _declare(state: IncidentState, service: str | None) -> tuple[int, str]:
    state.declared = True
    return OK, "declared the incident resolved"


def _buy_time(state: IncidentState, service: str | None, kind: str) -> list[ActiveFault]:
    return [
        f
        for f in _faults_at(state, service)
        if kind in f.fault.buys_time and f.mitigated_at is None
    ]


_HANDLERS = {
    "restart": _restart,
    "rollback": _rollback,
    "scale_up": _scale_up,
    "scale_down": _scale_down,
    "clear_disk": _clear_disk,
    "flush_cache": _flush_cache,
    "failover_db": _failover_db,
    "toggle_circuit_breaker": _toggle_breaker,
    "wait": _wait,
    "escalate": _escalate,
    "declare_resolved": _declare,
}
