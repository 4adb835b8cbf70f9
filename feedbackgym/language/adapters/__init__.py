"""LoRA adapters trained by this project, shipped with the package: the agent's defaults.

``feedbackgym agent --env ID`` plays the packaged model with the adapter
:func:`trained_adapter` names for ``ID`` (when there is one and no other model,
adapter or server is given; ``--base-model`` plays the base model instead).
Each adapter is a GGUF LoRA file beside this module, with the commands that
reproduce it and what it scored when it was shipped.

Example:
    >>> trained_adapter("feedbackgym/OpsIncidentEasy-v1").name
    'ops-incident-easy-v1'
    >>> trained_adapter("feedbackgym/OpsIncident-v0") is None
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["TRAINED_ADAPTERS", "TrainedAdapter", "trained_adapter"]


@dataclass(frozen=True)
class TrainedAdapter:
    """One shipped adapter.

    Attributes:
        name: Its name (the file is ``NAME.gguf`` beside this module).
        env_id: The env it was trained for.
        recipe: How it was trained, in words (the commands are in ``docs/results/``).
        report: Where its figures are, under ``docs/results/``.
    """

    name: str
    env_id: str
    recipe: str
    report: str

    @property
    def path(self) -> Path:
        """The GGUF LoRA file."""
        return Path(__file__).with_name(f"{self.name}.gguf")


TRAINED_ADAPTERS = {
    adapter.env_id: adapter
    for adapter in (
        TrainedAdapter(
            "ops-incident-easy-v1",
            "feedbackgym/OpsIncidentEasy-v1",
            "the supervised warm-up on 150 expert episodes of the train split, phase hints "
            "dropped from half",
            "docs/results/ops_v1/default_agent/",
        ),
    )
}
"""The shipped adapters by env id."""


def trained_adapter(env_id: str) -> TrainedAdapter | None:
    """The adapter shipped for ``env_id`` (``None``: none; the agent plays the base model)."""
    return TRAINED_ADAPTERS.get(env_id)
