"""System metrics for training logs: CPU, memory, GPU and the sample rate, per round.

The CPU and memory figures cover the whole run, this process and every process
under it, through ``psutil``; the GPU's through NVML (``nvidia-ml-py``). The
module is imported by the trainers only, so ``import feedbackgym`` loads neither.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from typing import Any

from feedbackgym.errors import requires_extra

with requires_extra("baselines", "psutil"):
    import psutil

__all__ = ["SystemMonitor"]


class SystemMonitor:
    """Samples the run's CPU share, memory and GPU use between two calls.

    The run is this process and all its descendants: env worker subprocesses
    (SB3's ``SubprocVecEnv``, Gymnasium's ``AsyncVectorEnv``), feedback or model
    servers, browsers. Processes elsewhere (Ray actors, Docker containers) are
    not in it. Every :meth:`sample` covers the time since the previous one (or
    since the monitor was made):

    * ``cpu_percent``: the CPU time the run's processes used over that wall time
      (100 per busy core). A process that started since the last sample counts
      from its start; one that ended since then drops out.
    * ``rss_mb``: the resident memory of the run's processes, summed (pages
      that forked workers share are counted in each).
    * ``processes``: how many processes the run has, this one included.
    * ``load_average``: the machine's one-minute load.
    * ``steps_per_s``: the sample rate, when ``steps`` is given.
    * ``gpu_util_percent`` and ``gpu_memory_mb`` (the device's used memory, all
      processes on it): only once torch has initialised CUDA, read through NVML
      for the device torch uses. Low utilisation points at a feedback or env
      bottleneck. Without NVML, or where it cannot read them (e.g. on MIG), they
      are left out: a metric never stops training.

    Example:
        >>> monitor = SystemMonitor()
        >>> sorted(monitor.sample(steps=0))[:5]
        ['cpu_percent', 'load_average', 'processes', 'rss_mb', 'steps_per_s']
    """

    def __init__(self, steps: int = 0) -> None:
        """Starts measuring now, from ``steps`` env steps done (a resumed run's count)."""
        self._process = psutil.Process()
        self._cpu: dict[tuple[int, float], float] = {}
        self._wall = time.perf_counter()
        self._read_tree()
        self._steps = steps

    def sample(self, steps: int | None = None) -> dict[str, float]:
        """Metrics since the last call; ``steps`` is the total env steps so far."""
        wall = time.perf_counter()
        previous = self._cpu
        rss = self._read_tree()
        elapsed = max(wall - self._wall, 1e-9)
        used = sum(cpu - previous.get(key, 0.0) for key, cpu in self._cpu.items())
        metrics = {
            "cpu_percent": 100.0 * used / elapsed,
            "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0,
            "rss_mb": rss / 2**20,
            "processes": float(len(self._cpu)),
        }
        if steps is not None:
            metrics["steps_per_s"] = (steps - self._steps) / elapsed
            self._steps = steps
        metrics.update(_gpu_metrics())
        self._wall = wall
        return metrics

    def _read_tree(self) -> int:
        """Reads each live process's CPU time into ``self._cpu``; returns their summed RSS."""
        try:
            children = self._process.children(recursive=True)
        except psutil.Error:  # a child ended while its parent was looked up
            children = []
        cpu: dict[tuple[int, float], float] = {}
        rss = 0
        for process in (self._process, *children):
            try:
                with process.oneshot():
                    # A pid can be reused: the start time tells two processes apart.
                    key = (process.pid, process.create_time())
                    times = process.cpu_times()
                    memory = process.memory_info()
            except psutil.Error:  # ended (or a zombie) since the list was made
                continue
            cpu[key] = times.user + times.system
            rss += memory.rss
        self._cpu = cpu
        return rss


def _gpu_metrics() -> dict[str, float]:
    """GPU utilisation and used memory, when torch is loaded and a CUDA device is in use."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return {}
    handle = _nvml_handle(str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid))
    if handle is None:
        return {}
    import pynvml

    metrics = {}
    try:
        metrics["gpu_util_percent"] = float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    except pynvml.NVMLError:  # e.g. not supported on a MIG slice
        pass
    try:
        metrics["gpu_memory_mb"] = pynvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20
    except pynvml.NVMLError:
        pass
    return metrics


@functools.cache
def _nvml_handle(uuid: str) -> Any:
    """NVML's handle of the CUDA device with ``uuid``; ``None`` without a usable NVML.

    NVML is initialised once per process, at the first call. The device is found
    by its UUID, so ``CUDA_VISIBLE_DEVICES`` (which renumbers CUDA's devices,
    not NVML's) does not matter. Cached, a failure too: it is not retried.
    """
    try:
        import pynvml
    except ImportError:  # nvidia-ml-py (baselines, llm-train extras) not installed
        return None
    try:
        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}")
    except pynvml.NVMLError:  # no driver library, or a device NVML does not list (MIG)
        return None
