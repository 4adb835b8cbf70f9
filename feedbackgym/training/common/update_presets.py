"""Named rollout-and-update settings: what one round collects and how it is trained on.

A preset fixes the five settings that decide how fast a run learns per env
step and per second: envs, steps per env per round, epochs, minibatch size
and learning rate. :data:`DEFAULT_PRESET` is what ``compare`` and ``train``
(and :class:`~.run_settings.RunConfig`) use unless told otherwise; it was
chosen by ``benchmarks/settings_study.py`` (wall-clock to 80% validation
success on OpsIncident hard, final success held; see ``docs/benchmarks.md``).
``"sb3"`` is SB3's PPO update as the SB3 path ran it before (8 envs x 128
steps, 10 epochs of 256-sample minibatches, learning rate 3e-4): the preset
for trainer-against-trainer comparisons, which then take the same gradient
steps per sample with either trainer.

Example:
    >>> UPDATE_PRESETS["sb3"].settings()["n_epochs"]
    10
    >>> preset_settings("nope")
    Traceback (most recent call last):
    ...
    ValueError: no update preset 'nope' (known: fast, sb3)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["DEFAULT_PRESET", "UPDATE_PRESETS", "UpdatePreset", "preset_settings"]


@dataclass(frozen=True)
class UpdatePreset:
    """One preset's settings (``RunConfig``'s field names).

    Attributes:
        n_envs: Parallel envs.
        n_steps: Steps per env per round.
        n_epochs: Passes over each round's rollout.
        batch_size: Samples per minibatch.
        learning_rate: Adam's step size.
    """

    n_envs: int
    n_steps: int
    n_epochs: int
    batch_size: int
    learning_rate: float

    def settings(self) -> dict[str, Any]:
        """The preset as ``RunConfig`` / ``ComparisonConfig`` keyword arguments."""
        return asdict(self)


UPDATE_PRESETS: dict[str, UpdatePreset] = {
    "fast": UpdatePreset(n_envs=16, n_steps=128, n_epochs=4, batch_size=512, learning_rate=1e-3),
    "sb3": UpdatePreset(n_envs=8, n_steps=128, n_epochs=10, batch_size=256, learning_rate=3e-4),
}
"""The presets by name."""

DEFAULT_PRESET = "fast"
"""The preset runs take unless told otherwise."""


def preset_settings(name: str) -> dict[str, Any]:
    """The settings of preset ``name``.

    Raises:
        ValueError: No preset has that name.
    """
    if name not in UPDATE_PRESETS:
        raise ValueError(f"no update preset {name!r} (known: {', '.join(sorted(UPDATE_PRESETS))})")
    return UPDATE_PRESETS[name].settings()
