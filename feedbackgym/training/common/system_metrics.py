"""System metrics for training logs: CPU, memory, GPU and the sample rate, per round."""

from __future__ import annotations

import os
import sys
import time

__all__ = ["SystemMonitor"]

_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20 if hasattr(os, "sysconf") else 0.0


class SystemMonitor:
    """Samples the training process's CPU share, memory and GPU use between two calls.

    Every :meth:`sample` covers the time since the previous one (or since the
    monitor was made): ``cpu_percent`` is this process's CPU time over that wall
    time (100 per busy core; subprocess env workers are not included),
    ``load_average`` the machine's one-minute load, ``rss_mb`` the resident
    memory, ``steps_per_s`` the sample rate when ``steps`` is given, and with a
    CUDA device in use ``gpu_memory_mb`` and, when NVML is available,
    ``gpu_util_percent`` (low values point at a feedback or env bottleneck).

    Example:
        >>> monitor = SystemMonitor()
        >>> sorted(monitor.sample(steps=0))[:4]
        ['cpu_percent', 'load_average', 'rss_mb', 'steps_per_s']
    """

    def __init__(self, steps: int = 0) -> None:
        """Starts measuring now, from ``steps`` env steps done (a resumed run's count)."""
        self._wall = time.perf_counter()
        self._cpu = time.process_time()
        self._steps = steps

    def sample(self, steps: int | None = None) -> dict[str, float]:
        """Metrics since the last call; ``steps`` is the total env steps so far."""
        wall, cpu = time.perf_counter(), time.process_time()
        elapsed = max(wall - self._wall, 1e-9)
        metrics = {
            "cpu_percent": 100.0 * (cpu - self._cpu) / elapsed,
            "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0,
            "rss_mb": _rss_mb(),
        }
        if steps is not None:
            metrics["steps_per_s"] = (steps - self._steps) / elapsed
            self._steps = steps
        metrics.update(_gpu_metrics())
        self._wall, self._cpu = wall, cpu
        return metrics


def _rss_mb() -> float:
    """Resident memory now (Linux), else the peak the OS reports."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * _PAGE_MB
    except (OSError, ValueError, IndexError):
        import resource  # POSIX only; reached where /proc is missing

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _gpu_metrics() -> dict[str, float]:
    """GPU memory and utilisation, when torch is loaded and a CUDA device is in use."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return {}
    metrics = {"gpu_memory_mb": torch.cuda.memory_allocated() / 2**20}
    try:
        metrics["gpu_util_percent"] = float(torch.cuda.utilization())
    except Exception:  # NVML missing or not usable (e.g. on MIG): a metric never stops training
        pass
    return metrics
