"""The simulated production system: services, metrics, log signals and faults.

Pure data. The scenario generator draws faults from :data:`FAULTS`; the env,
the expert and the text renderer all read the same tables, so a new fault type
is added here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "FAULTS",
    "FAULT_TYPES",
    "LOG_SIGNALS",
    "METRICS",
    "SERVICES",
    "Fault",
]

SERVICES: tuple[str, ...] = (
    "lb",
    "web",
    "app",
    "db_primary",
    "db_replica",
    "cache",
    "worker",
    "dependency",
)
"""The service graph, front to back: load balancer, web tier, app tier, the
database pair, the cache, the queue worker and a third-party dependency."""

METRICS: tuple[str, ...] = (
    "latency_ms",
    "error_rate",
    "cpu",
    "memory",
    "disk",
    "connections",
    "queue_depth",
    "replica_lag_s",
)
"""Per-service metrics, in the column order of the ``metrics`` observation."""

METRIC_SCALE: tuple[float, ...] = (2000.0, 1.0, 1.0, 1.0, 1.0, 500.0, 5000.0, 600.0)
"""Value of each metric that maps to 1.0 in the normalised observation."""

HEALTHY_METRICS: dict[str, tuple[float, ...]] = {
    "lb": (40.0, 0.002, 0.20, 0.30, 0.35, 180.0, 0.0, 0.0),
    "web": (120.0, 0.004, 0.35, 0.45, 0.40, 140.0, 0.0, 0.0),
    "app": (180.0, 0.005, 0.40, 0.50, 0.40, 90.0, 0.0, 0.0),
    "db_primary": (8.0, 0.001, 0.35, 0.60, 0.55, 60.0, 0.0, 0.0),
    "db_replica": (6.0, 0.001, 0.25, 0.55, 0.55, 30.0, 0.0, 1.0),
    "cache": (1.5, 0.001, 0.15, 0.55, 0.10, 120.0, 0.0, 0.0),
    "worker": (300.0, 0.003, 0.30, 0.40, 0.35, 20.0, 40.0, 0.0),
    "dependency": (220.0, 0.004, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
}
"""Baseline metric values of a healthy service."""

LOG_SIGNALS: tuple[str, ...] = (
    "oom",
    "config_error",
    "disk_full",
    "pool_exhausted",
    "cache_miss_storm",
    "upstream_timeout",
    "cert_expired",
    "cron_running",
    "replication_lag",
    "io_error",
    "deserialization_error",
    "upstream_5xx",
    "slow_queries",
    "harmless_warning",
    "gc_pause",
)
"""Log signatures an inspection can reveal (the ``logs`` observation's columns)."""

LOG_LINES: dict[str, str] = {
    "oom": "ERROR heap usage {pct}% of limit; OOMKilled worker process pid {pid}",
    "config_error": "ERROR invalid config key 'pool.max_size': expected integer, got '{pct}x'",
    "disk_full": "ERROR write failed: No space left on device (/var/log, {pct}% used)",
    "pool_exhausted": "ERROR timeout acquiring DB connection: pool exhausted ({pid}/{pid} in use)",
    "cache_miss_storm": "WARN cache hit ratio {pct}%: mass key eviction, miss storm on hot keys",
    "upstream_timeout": "ERROR third-party payments API timeout after 30000 ms (attempt {pid})",
    "cert_expired": "ERROR TLS handshake failed: certificate has expired (CN=shop.example)",
    "cron_running": "WARN cron job 'nightly-reindex' still running, started {pid} min ago",
    "replication_lag": "ERROR replication apply thread stalled; lag {pid} s behind primary",
    "io_error": "ERROR I/O error on device sdb, sector {pid}; retrying write",
    "deserialization_error": "ERROR cache entry deserialization failed for key 'sku:{pid}'",
    "upstream_5xx": "ERROR upstream {target} returned 503 for {pid} requests in the last minute",
    "slow_queries": "WARN slow query log: {pid} queries over 2 s (caller {target})",
    "harmless_warning": "WARN deprecated API '/v1/legacy' called {pid} times (sunset next quarter)",
    "gc_pause": "INFO GC pause {pid} ms (young generation), heap {pct}%",
}
"""Templates of the log lines behind each signal."""

NOISE_LINES: tuple[str, ...] = (
    "INFO request served in {pid} ms",
    "INFO health check ok",
    "INFO rotated log file",
    "DEBUG feature flag 'new-checkout' evaluated for user {pid}",
    "INFO scheduled job 'metrics-export' finished",
    "INFO config reloaded, no changes",
)
"""Routine lines mixed into every log inspection."""

ACTION_KINDS_PER_SERVICE: tuple[str, ...] = (
    "inspect_metrics",
    "inspect_logs",
    "inspect_deploys",
    "restart",
    "rollback",
    "scale_up",
    "scale_down",
    "clear_disk",
)
"""Actions that take a service as their target, in action-index order."""

GLOBAL_ACTIONS: tuple[str, ...] = (
    "flush_cache",
    "failover_db",
    "toggle_circuit_breaker",
    "wait",
    "escalate",
    "declare_resolved",
)
"""Actions without a target service, after the per-service ones."""


@dataclass(frozen=True)
class Fault:
    """A fault type: where it may strike, what it shows and what fixes it.

    Attributes:
        name: Fault type identifier.
        label: Its name in words, as subgoals and reviews print it.
        roots: Services it may start in.
        mitigation: The action kind that fixes it; per-service kinds act on
            the root, global kinds take no target.
        signal: The log signal in the root's logs (the root-cause evidence).
        symptoms: Services that alert because of it, as ``(service, signal)``
            pairs; ``"root"`` stands for the root itself. The signal is what
            their own logs show, pointing onward to the root.
        effects: Metric changes on the root at full severity, by metric name.
        deploy: ``"code"`` or ``"config"`` when a recent deploy caused it;
            its evidence then includes the root's deploy history.
        buys_time: Action kinds that relieve pressure without fixing it.
        burn: SLO budget burned per step at unit pressure.
    """

    name: str
    label: str
    roots: tuple[str, ...]
    mitigation: str
    signal: str
    symptoms: tuple[tuple[str, str], ...]
    effects: tuple[tuple[str, float], ...]
    deploy: str | None = None
    buys_time: tuple[str, ...] = ()
    burn: float = 0.010


FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault(
            "memory_leak",
            label="memory leak",
            roots=("app", "web", "worker"),
            mitigation="rollback",
            signal="oom",
            symptoms=(("root", "oom"), ("lb", "upstream_5xx")),
            effects=(("memory", 0.5), ("latency_ms", 900.0), ("error_rate", 0.08)),
            deploy="code",
            buys_time=("restart", "scale_up"),
        ),
        Fault(
            "bad_config",
            label="bad config push",
            roots=("web", "app"),
            mitigation="rollback",
            signal="config_error",
            symptoms=(("lb", "upstream_5xx"),),
            effects=(("error_rate", 0.35), ("latency_ms", 150.0)),
            deploy="config",
        ),
        Fault(
            "disk_full",
            label="full disk",
            roots=("db_primary", "app", "worker"),
            mitigation="clear_disk",
            signal="disk_full",
            symptoms=(("root", "disk_full"),),
            effects=(("disk", 0.6), ("error_rate", 0.12)),
        ),
        Fault(
            "db_pool_exhaustion",
            label="DB connection-pool exhaustion",
            roots=("app",),
            mitigation="restart",
            signal="pool_exhausted",
            symptoms=(("web", "upstream_5xx"),),
            effects=(("connections", 400.0), ("latency_ms", 1500.0), ("error_rate", 0.15)),
        ),
        Fault(
            "cache_stampede",
            label="cache stampede",
            roots=("cache",),
            mitigation="scale_up",
            signal="cache_miss_storm",
            symptoms=(("db_primary", "slow_queries"), ("web", "upstream_5xx")),
            effects=(("cpu", 0.55), ("connections", 300.0), ("error_rate", 0.03)),
        ),
        Fault(
            "dependency_outage",
            label="third-party outage",
            roots=("dependency",),
            mitigation="toggle_circuit_breaker",
            signal="upstream_timeout",
            symptoms=(("app", "upstream_timeout"), ("worker", "upstream_timeout")),
            effects=(("latency_ms", 28000.0), ("error_rate", 0.95)),
        ),
        Fault(
            "cert_expiry",
            label="expired certificate",
            roots=("lb",),
            mitigation="restart",
            signal="cert_expired",
            symptoms=(("root", "cert_expired"),),
            effects=(("error_rate", 0.45),),
        ),
        Fault(
            "runaway_cron",
            label="runaway cron job",
            roots=("worker",),
            mitigation="restart",
            signal="cron_running",
            symptoms=(("db_primary", "slow_queries"),),
            effects=(("cpu", 0.6), ("queue_depth", 4000.0)),
        ),
        Fault(
            "replica_lag",
            label="replica lag",
            roots=("db_replica",),
            mitigation="restart",
            signal="replication_lag",
            symptoms=(("app", "slow_queries"),),
            effects=(("replica_lag_s", 500.0), ("cpu", 0.4)),
        ),
        Fault(
            "db_primary_degraded",
            label="degraded DB primary",
            roots=("db_primary",),
            mitigation="failover_db",
            signal="io_error",
            symptoms=(("root", "io_error"), ("app", "slow_queries")),
            effects=(("latency_ms", 900.0), ("error_rate", 0.2)),
        ),
        Fault(
            "cache_poisoning",
            label="poisoned cache",
            roots=("cache",),
            mitigation="flush_cache",
            signal="deserialization_error",
            symptoms=(("web", "deserialization_error"),),
            effects=(("error_rate", 0.25),),
            deploy="code",
        ),
    )
}
"""Every fault type, by name."""

FAULT_TYPES: tuple[str, ...] = tuple(FAULTS)
"""Fault type names, in a stable order."""

INCOMPATIBLE_PAIRS: frozenset[frozenset[str]] = frozenset(
    {frozenset({"memory_leak", "bad_config"})}
)
"""Fault pairs a hard episode never combines (same evidence, same fix)."""

INTERACTING_PAIRS: tuple[tuple[str, str], ...] = (("replica_lag", "db_primary_degraded"),)
"""Pairs that interact: failing over onto a lagging replica loses writes, so the
first fault must be fixed (and recovered) before the second is mitigated."""
