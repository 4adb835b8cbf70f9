"""The Stable-Baselines3 trainer: SB3's PPO with the feedback stack, through callbacks.

:mod:`~.run_sb3` runs one arm (run directory,
validation, checkpoints, resume); :mod:`~.callbacks`
puts together the controller's drive
(:mod:`~.drive_controller`), review credit
(:mod:`~.review_credit`) and the round's logs;
:mod:`~.vec_wrappers` holds the vector-env wrappers; :mod:`~.entity_policy` is
the entity policy for ``MaskablePPO`` (``EntityPolicy``, ``entity_policy_kwargs``:
import them from here in your own SB3 script).

May import: workers, common
"""


def __getattr__(name: str) -> object:
    """``EntityPolicy`` and ``entity_policy_kwargs``, imported on first use (they need torch)."""
    if name in ("EntityPolicy", "EntityExtractor", "entity_policy_kwargs"):
        from feedbackgym.training.sb3 import entity_policy

        return getattr(entity_policy, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
