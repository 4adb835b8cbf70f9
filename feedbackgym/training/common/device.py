"""Where a trainer runs: CUDA when asked for and present, else the CPU with one torch thread."""

from __future__ import annotations

from feedbackgym.errors import requires_extra

with requires_extra("baselines", "torch"):
    import torch

__all__ = ["resolve_device"]


def resolve_device(name: str) -> torch.device:
    """The device ``name`` asks for: ``"auto"`` is CUDA when a GPU is present, else the CPU.

    On the CPU torch gets one thread: the envs step on the trainer's thread
    between inferences, and on 2 cores more torch threads only contend.

    Raises:
        ValueError: A CUDA device asked for on a machine without a GPU.

    Example:
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {name!r}: torch finds no CUDA GPU on this machine")
    device = torch.device(name)
    if device.type == "cpu":
        torch.set_num_threads(1)
    return device
