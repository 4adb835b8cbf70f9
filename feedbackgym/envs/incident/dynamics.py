"""How the v1 system answers an action and moves on by one step.

:func:`apply_action` changes the state for one action and records what the
agent saw (and which services it has now seen a symptom of); :func:`advance`
lets time pass: unmitigated faults gain pressure and burn the SLO budget,
mitigated ones recover. Symptoms cascade up each fault's call path: every
caller of a failing service logs errors that blame it.
"""

from __future__ import annotations

import numpy as np

from feedbackgym.envs.incident.catalog import (
    FAULTS,
    HEALTHY,
    LOG_LINES,
    LOG_SIGNALS,
    METRIC_SCALE,
    METRICS,
    NOISE_LINES,
    SLOT_ROLES,
)
from feedbackgym.envs.incident.scenario import (
    INSPECTIONS,
    PRESSURE_GROWTH,
    IncidentFault,
    IncidentState,
)
from feedbackgym.envs.ops.dynamics import INFO, NO_EFFECT, OK, RESULTS, WORSE, settle_budget

__all__ = ["INFO", "NO_EFFECT", "OK", "RESULTS", "WORSE", "advance", "apply_action"]


_METRIC = {m: i for i, m in enumerate(METRICS)}
_SIGNAL = {s: i for i, s in enumerate(LOG_SIGNALS)}
ROOT_SIGNALS = frozenset(fault.signal for fault in FAULTS.values())
"""Log signals a fault writes in its root's own logs (its root-cause evidence)."""
BLIP_BURN = 0.01
"""Budget burned by restarting a healthy service."""
SCALE_DOWN_BURN = (0.01, 5)
"""Burn per step, and steps, after scaling a healthy service down."""
STAMPEDE_BURN = (0.02, 4)
"""Burn per step, and steps, after flushing a healthy cache."""
NEEDLESS_FAILOVER_BURN = 0.05
"""Budget burned by failing over a healthy database."""
OPEN_BREAKER_BURN = 0.004
"""Burn per step for each breaker opened to a healthy service."""


def apply_action(
    state: IncidentState, kind: str, slot: int | None, rng: np.random.Generator
) -> str:
    """Carries out ``kind`` on the service in ``slot`` (``None``: a global action).

    Returns the result's words for ``last_output``; sets ``state.last_result``
    (a :data:`RESULTS` code) and, for a fatal action, ``state.outcome``.
    """
    if slot is None:
        return _global(state, kind)
    if kind.startswith("inspect_"):
        state.last_result = INFO
        return _inspect(state, kind.removeprefix("inspect_"), slot, rng)
    state.last_result, text = _intervene(state, kind, slot)
    return text


def advance(state: IncidentState) -> None:
    """Moves time on by one step and burns the SLO budget."""
    state.step += 1
    burn = 0.0
    active = state.active_faults()
    for fault in active:
        if fault.mitigated_at is None:
            fault.pressure += fault.growth
        burn += state.difficulty.burn * (0.6 + fault.pressure) * (1.0 - state.recovery(fault))
    if len(active) < len(state.faults) and all(state.is_recovered(f) for f in active):
        state.wave += 1  # the next wave of the cascade begins
        state.wave_starts.append(state.step)
    healthy_breakers = state.breakers - {f.root for f in active}
    settle_budget(state, burn + OPEN_BREAKER_BURN * len(healthy_breakers))


# --- inspections -------------------------------------------------------------------------


def _inspect(state: IncidentState, what: str, slot: int, rng: np.random.Generator) -> str:
    name = state.name(slot)
    if what == "metrics":
        values = _metrics(state, slot, rng)
        state.metrics_seen[slot] = [
            min(1.0, v / scale) for v, scale in zip(values, METRIC_SCALE, strict=True)
        ]
        state.seen_at[slot] = state.step
        at_slot = [f for f in state.active_faults() if f.root == slot]
        if at_slot and all(state.is_recovered(f) for f in at_slot):
            state.verified.add(slot)
        state.symptoms_seen.add(slot)
        if slot in state.misleading or any(
            slot in f.path and not state.is_recovered(f) for f in state.active_faults()
        ):
            state.unhealthy_seen.add(slot)
        text = " ".join(f"{m}={_fmt(v)}" for m, v in zip(METRICS, values, strict=True))
        summary = text
    elif what == "logs":
        signals, lines = _logs(state, slot, rng)
        state.logs_seen[slot] = 0
        state.logs_seen[slot, [_SIGNAL[s] for s, _ in signals]] = 1
        state.log_pointers[slot] = 0
        blamed = [t for _, t in signals if t != slot]
        state.log_pointers[slot, blamed] = 1
        state.symptoms_seen |= {slot, *blamed}
        state.blamed_seen.update(blamed)
        if signals:
            state.unhealthy_seen.add(slot)
        if any(t == slot and s in ROOT_SIGNALS for s, t in signals):
            state.cause_seen.add(slot)
        text = "\n".join(lines)
        names = sorted({s if t == slot else f"{s} ({state.name(t)})" for s, t in signals})
        summary = "signals: " + (", ".join(names) or "routine lines only")
    else:
        text = _deploys(state, slot)
        recent = state.recent_deploys.get(slot)
        state.deploys_seen[slot] = (recent == "code", recent == "config")
        summary = text.split("\n")[0]
    state.evidence[(slot, what)] = state.step
    state.inspected[slot, INSPECTIONS.index(what)] = 1
    state.findings[(slot, what)] = summary
    return f"[{name}] " + text.replace("\n", f"\n[{name}] ")


def _metrics(state: IncidentState, slot: int, rng: np.random.Generator) -> list[float]:
    values = list(HEALTHY[SLOT_ROLES[slot]])
    for fault in state.active_faults():
        severity = _severity(state, fault)
        if fault.root == slot:
            for metric, delta in fault.fault.effects:
                values[_METRIC[metric]] += delta * severity
        elif slot in fault.path:
            values[_METRIC["latency_ms"]] += 400.0 * severity
            values[_METRIC["error_rate"]] += 0.05 * severity
    if slot in state.misleading:
        values[_METRIC["cpu"]] += 0.2
        values[_METRIC["latency_ms"]] += 60.0
    noise = rng.standard_normal(len(METRICS)).tolist()
    return [max(0.0, v * (1.0 + 0.03 * n)) for v, n in zip(values, noise, strict=True)]


def _severity(state: IncidentState, fault: IncidentFault) -> float:
    return min(2.0, 0.6 + fault.pressure) * (1.0 - state.recovery(fault))


def _logs(
    state: IncidentState, slot: int, rng: np.random.Generator
) -> tuple[list[tuple[str, int]], list[str]]:
    """The signals in ``slot``'s logs as ``(signal, blamed slot)`` pairs, and the lines."""
    signals: list[tuple[str, int]] = []
    callees = state.topology.callees(slot)
    for fault in state.active_faults():
        if state.is_recovered(fault):
            continue
        if fault.root == slot:
            signals += [(fault.fault.signal, slot)] * 2
        signals += [
            (fault.fault.caller_signal, callee)
            for callee in callees
            if callee in fault.path and fault.path.index(callee) > 0
        ]
    if slot in state.misleading:
        signals += [("harmless_warning", slot), ("gc_pause", slot)]
    signals = list(dict.fromkeys(signals))
    draws = rng.random(3 + 2 * (len(signals) + 3)).tolist()
    templates = [(LOG_LINES[sig], target) for sig, target in signals]
    templates += [(NOISE_LINES[int(u * len(NOISE_LINES))], slot) for u in draws[:3]]
    numbers = iter(draws[3:])
    lines = [
        template.format(
            pct=85 + int(next(numbers) * 15),
            pid=10 + int(next(numbers) * 9989),
            target=state.name(target),
        )
        for template, target in templates
    ]
    order = rng.permutation(len(lines)).tolist()
    return signals, [lines[i] for i in order]


def _deploys(state: IncidentState, slot: int) -> str:
    if SLOT_ROLES[slot] == "third_party":
        return "no deploys (third-party service)"
    prefix = state.deploy_versions[slot]
    lines = []
    recent = state.recent_deploys.get(slot)
    if recent is not None:
        lines.append(f"{prefix}2 {recent} deploy, 20 min before the incident")
    lines += [f"{prefix}1 code deploy, 3 days before", f"{prefix}0 code deploy, 9 days before"]
    return "\n".join(lines)


def _fmt(value: float) -> str:
    return f"{value:.3f}" if value < 10 else f"{value:.0f}"


# --- interventions -----------------------------------------------------------------------


def _fix(state: IncidentState, kind: str, slot: int) -> bool:
    """Marks the faults at ``slot`` that ``kind`` mitigates; returns whether any."""
    fixed = False
    for fault in state.active_faults():
        if fault.root == slot and fault.fault.mitigation == kind and fault.mitigated_at is None:
            fault.mitigated_at = state.step
            fixed = True
    return fixed


def _relieve(state: IncidentState, kind: str, slot: int) -> list[IncidentFault]:
    return [
        f
        for f in state.active_faults()
        if f.root == slot and kind in f.fault.buys_time and f.mitigated_at is None
    ]


def _intervene(state: IncidentState, kind: str, slot: int) -> tuple[int, str]:
    name, role = state.name(slot), SLOT_ROLES[slot]
    if kind == "restart" and role == "database":
        state.outcome = "destructive_action"
        return WORSE, f"restarted {name}: in-flight writes lost, data integrity incident"
    if role == "third_party" and kind not in ("open_breaker", "scale_down"):
        return NO_EFFECT, f"{name} is a third-party service: {kind.replace('_', ' ')} impossible"
    if _fix(state, kind, slot):
        return OK, f"{kind.replace('_', ' ')} {name}: done"
    if kind == "rollback":
        if slot not in state.recent_deploys or slot in state.rolled_back:
            return NO_EFFECT, f"nothing recent to roll back on {name}"
        state.rolled_back.add(slot)
        return OK, f"rolled {name} back to {state.deploy_versions[slot]}1"
    relieved = _relieve(state, kind, slot)
    if kind == "restart":
        for fault in relieved:
            fault.pressure = 0.0
        if relieved:
            return OK, f"restarted {name}; symptoms eased for now"
        state.penalties.append([BLIP_BURN, 1])
        return NO_EFFECT, f"restarted {name}: brief error spike, nothing changed"
    if kind == "scale_up":
        for fault in relieved:
            fault.growth = 0.5 * PRESSURE_GROWTH
        return (
            (OK, f"scaled up {name}; pressure grows slower")
            if relieved
            else (
                NO_EFFECT,
                f"scaled up {name}: no change",
            )
        )
    if kind == "scale_down":
        state.penalties.append(list(SCALE_DOWN_BURN))
        return WORSE, f"scaled down {name}: less capacity, latency rises"
    if kind == "flush":
        if role != "cache":
            return NO_EFFECT, f"{name} has no cache to flush"
        state.penalties.append(list(STAMPEDE_BURN))
        return WORSE, f"flushed healthy {name}: cold-cache load hits the databases"
    if kind == "failover":
        if role != "database":
            return NO_EFFECT, f"{name} has no replica to fail over to"
        state.penalties.append([NEEDLESS_FAILOVER_BURN, 1])
        return WORSE, f"failed over healthy {name}: brief outage during promotion"
    if kind == "open_breaker":
        if slot in state.breakers:
            return NO_EFFECT, f"the breaker to {name} is already open"
        state.breakers.add(slot)
        return WORSE, f"opened the circuit breaker to healthy {name}: its callers degrade"
    return NO_EFFECT, f"{kind.replace('_', ' ')} {name}: little to change"


def _global(state: IncidentState, kind: str) -> str:
    if kind == "wait":
        state.last_result = NO_EFFECT
        return "waited one step"
    if kind == "escalate":
        state.outcome = "escalated"
        state.last_result = NO_EFFECT
        return "escalated to the on-call lead; the incident is out of your hands"
    state.declared = True
    state.last_result = OK
    return "declared the incident resolved"
