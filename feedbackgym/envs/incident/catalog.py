"""OpsIncident-v1's building blocks: service roles, their slots, name pools, faults.

Pure data. Every topology is drawn from :data:`ROLES`; a service of a role sits
in one of that role's fixed slots (:data:`ROLE_SLOTS`), so the vector
observation and the ``Discrete`` action space keep one shape whatever the
topology; empty slots are padded and masked (``present``).

Example:
    >>> N_SLOTS, SLOT_ROLES[0], SLOT_ROLES[N_SLOTS - 1]
    (16, 'edge', 'third_party')
    >>> sorted(FAULTS["memory_leak"].roles)
    ['api', 'frontend', 'worker']
"""

from __future__ import annotations

from dataclasses import dataclass

from feedbackgym.envs.ops.catalog import (
    ACTION_KINDS_PER_SERVICE,
    HEALTHY_METRICS,
    METRIC_SCALE,
    METRICS,
    NOISE_LINES,
)

__all__ = [
    "FAULTS",
    "FAULT_TYPES",
    "HEALTHY",
    "LOG_LINES",
    "LOG_SIGNALS",
    "METRICS",
    "METRIC_SCALE",
    "NAMES",
    "NOISE_LINES",
    "N_SLOTS",
    "ROLES",
    "ROLE_SLOTS",
    "SLOT_ROLES",
    "Fault",
]

ROLES: tuple[str, ...] = (
    "edge",
    "frontend",
    "api",
    "worker",
    "cache",
    "queue",
    "database",
    "third_party",
)
"""Service roles, front to back."""

ROLE_SLOTS: dict[str, int] = {
    "edge": 1,
    "frontend": 2,
    "api": 4,
    "worker": 2,
    "cache": 2,
    "queue": 1,
    "database": 2,
    "third_party": 2,
}
"""Most services of each role a topology holds (its slots, in :data:`ROLES` order)."""

SLOT_ROLES: tuple[str, ...] = tuple(role for role in ROLES for _ in range(ROLE_SLOTS[role]))
"""The role of every slot."""
N_SLOTS = len(SLOT_ROLES)
ROLE_FIRST_SLOT: dict[str, int] = {role: SLOT_ROLES.index(role) for role in ROLES}

NAMES: dict[str, tuple[str, ...]] = {
    "edge": ("gateway", "ingress", "edge-proxy", "lb"),
    "frontend": ("web", "storefront", "portal", "webapp", "mobile-bff"),
    "api": (
        "checkout",
        "catalog",
        "payments",
        "search",
        "orders",
        "accounts",
        "inventory",
        "pricing",
        "auth",
        "cart",
    ),
    "worker": ("mailer", "indexer", "billing-worker", "exporter", "thumbnailer"),
    "cache": ("redis", "memcache", "session-cache", "hot-cache"),
    "queue": ("kafka", "rabbitmq", "jobs-queue"),
    "database": ("postgres", "orders-db", "users-db", "mysql", "ledger-db"),
    "third_party": ("stripe", "sendgrid", "maps-api", "sms-gateway", "fraud-api"),
}
"""Service names by role; a topology draws its names from these pools."""

HEALTHY: dict[str, tuple[float, ...]] = {
    **{
        role: HEALTHY_METRICS[service]
        for role, service in (
            ("edge", "lb"),
            ("frontend", "web"),
            ("api", "app"),
            ("worker", "worker"),
            ("cache", "cache"),
            ("third_party", "dependency"),
        )
    },
    "queue": (4.0, 0.001, 0.25, 0.50, 0.45, 60.0, 120.0, 0.0),
    "database": (*HEALTHY_METRICS["db_primary"][:-1], 1.0),  # a replica a second behind
}
"""Healthy metric values by role, in :data:`METRICS` order (v0's, by the matching service)."""

LOG_SIGNALS: tuple[str, ...] = (
    "oom",
    "config_error",
    "disk_full",
    "pool_exhausted",
    "cache_miss_storm",
    "deserialization_error",
    "cert_expired",
    "cron_running",
    "io_error",
    "partition_stalled",
    "provider_outage",
    "rate_limited",
    "deadlock",
    "upstream_5xx",
    "upstream_timeout",
    "slow_calls",
    "harmless_warning",
    "gc_pause",
)
"""Log signatures an inspection can reveal (the ``logs`` observation's columns)."""

LOG_LINES: dict[str, str] = {
    "oom": "ERROR heap usage {pct}% of limit; OOMKilled worker process pid {pid}",
    "config_error": "ERROR invalid config key 'pool.max_size': expected integer, got '{pct}x'",
    "disk_full": "ERROR write failed: No space left on device (/var/data, {pct}% used)",
    "pool_exhausted": "ERROR timeout acquiring connection: pool exhausted ({pid}/{pid} in use)",
    "cache_miss_storm": "WARN cache hit ratio {pct}%: mass key eviction, miss storm on hot keys",
    "deserialization_error": "ERROR cache entry deserialization failed for key 'sku:{pid}'",
    "cert_expired": "ERROR TLS handshake failed: certificate has expired (serial {pid})",
    "cron_running": "WARN cron job 'nightly-reindex' still running, started {pid} min ago",
    "io_error": "ERROR I/O error on device sdb, sector {pid}; retrying write",
    "partition_stalled": "ERROR partition {pid} has no leader; consumers stalled",
    "provider_outage": "ERROR provider status page: major outage ({pid} failed calls)",
    "rate_limited": "ERROR 429 Too Many Requests: quota exceeded, retry after {pid} s",
    "deadlock": "WARN thread dump: {pid} threads BLOCKED waiting on lock 'orders'",
    "upstream_5xx": "ERROR upstream {target} returned 503 for {pid} requests in the last minute",
    "upstream_timeout": "ERROR call to {target} timed out after 30000 ms (attempt {pid})",
    "slow_calls": "WARN {pid} calls to {target} took over 2 s in the last minute",
    "harmless_warning": "WARN deprecated API '/v1/legacy' called {pid} times (sunset next quarter)",
    "gc_pause": "INFO GC pause {pid} ms (young generation), heap {pct}%",
}
"""Templates of the log lines behind each signal; ``{target}`` is the callee a line blames."""

SERVICE_KINDS: tuple[str, ...] = (*ACTION_KINDS_PER_SERVICE, "flush", "failover", "open_breaker")
"""Actions that take a service, in action-index order (slot-major)."""

GLOBAL_KINDS: tuple[str, ...] = ("wait", "escalate", "declare_resolved")
"""Actions without a service, after the per-service ones."""


@dataclass(frozen=True)
class Fault:
    """A fault type: where it may strike, what it shows and what fixes it.

    Attributes:
        name: Fault type identifier.
        label: Its name in words (the ``target`` hint level prints it).
        roles: Roles of the services it may start in.
        mitigation: The service action kind that fixes it, on its root.
        signal: The log signal in the root's logs (the root-cause evidence).
        caller_signal: What its callers' logs show, blaming the callee.
        effects: Metric changes on the root at full severity, by metric name.
        deploy: ``"code"`` or ``"config"`` when a recent deploy caused it;
            its evidence then includes the root's deploy history.
        buys_time: Action kinds that relieve pressure without fixing it.
    """

    name: str
    label: str
    roles: tuple[str, ...]
    mitigation: str
    signal: str
    caller_signal: str
    effects: tuple[tuple[str, float], ...]
    deploy: str | None = None
    buys_time: tuple[str, ...] = ()


FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault(
            "memory_leak",
            "memory leak after a release",
            ("frontend", "api", "worker"),
            "rollback",
            "oom",
            "upstream_5xx",
            (("memory", 0.5), ("latency_ms", 900.0), ("error_rate", 0.08)),
            deploy="code",
            buys_time=("restart", "scale_up"),
        ),
        Fault(
            "bad_config",
            "bad config push",
            ("edge", "frontend", "api"),
            "rollback",
            "config_error",
            "upstream_5xx",
            (("error_rate", 0.35), ("latency_ms", 150.0)),
            deploy="config",
        ),
        Fault(
            "disk_full",
            "full disk",
            ("worker", "queue", "database"),
            "clear_disk",
            "disk_full",
            "upstream_5xx",
            (("disk", 0.6), ("error_rate", 0.12)),
        ),
        Fault(
            "pool_exhaustion",
            "connection-pool exhaustion",
            ("api", "worker"),
            "restart",
            "pool_exhausted",
            "upstream_timeout",
            (("connections", 400.0), ("latency_ms", 1500.0), ("error_rate", 0.15)),
        ),
        Fault(
            "thread_deadlock",
            "thread deadlock",
            ("frontend", "api"),
            "restart",
            "deadlock",
            "upstream_timeout",
            (("latency_ms", 5000.0), ("cpu", -0.3)),
        ),
        Fault(
            "cert_expiry",
            "expired certificate",
            ("edge", "frontend"),
            "restart",
            "cert_expired",
            "upstream_5xx",
            (("error_rate", 0.45),),
        ),
        Fault(
            "runaway_cron",
            "runaway cron job",
            ("worker",),
            "restart",
            "cron_running",
            "slow_calls",
            (("cpu", 0.6), ("queue_depth", 4000.0)),
        ),
        Fault(
            "cache_stampede",
            "cache stampede",
            ("cache",),
            "scale_up",
            "cache_miss_storm",
            "slow_calls",
            (("cpu", 0.55), ("connections", 300.0), ("error_rate", 0.03)),
        ),
        Fault(
            "cache_poisoning",
            "poisoned cache",
            ("cache",),
            "flush",
            "deserialization_error",
            "upstream_5xx",
            (("error_rate", 0.25),),
            deploy="code",
        ),
        Fault(
            "partition_stall",
            "stalled queue partition",
            ("queue",),
            "restart",
            "partition_stalled",
            "upstream_timeout",
            (("queue_depth", 4500.0), ("latency_ms", 3000.0)),
        ),
        Fault(
            "db_degraded",
            "degraded database primary",
            ("database",),
            "failover",
            "io_error",
            "slow_calls",
            (("latency_ms", 900.0), ("error_rate", 0.2)),
        ),
        Fault(
            "provider_outage",
            "third-party outage",
            ("third_party",),
            "open_breaker",
            "provider_outage",
            "upstream_timeout",
            (("latency_ms", 28000.0), ("error_rate", 0.95)),
        ),
        Fault(
            "rate_limited",
            "third-party rate limiting",
            ("third_party",),
            "scale_down",
            "rate_limited",
            "upstream_5xx",
            (("error_rate", 0.6),),
        ),
    )
}
"""Every fault type, by name."""

FAULT_TYPES: tuple[str, ...] = tuple(FAULTS)
"""Fault type names, in a stable order."""

FAULTS_BY_ROLE: dict[str, tuple[str, ...]] = {
    role: tuple(name for name, fault in FAULTS.items() if role in fault.roles) for role in ROLES
}
"""The fault types each role may host."""
