"""The arms the trainers' per-arm tests train on OpsIncident-v0."""

from feedbackgym.config import CRITIC_HINTS_SUFFIX, CURRICULUM_SUFFIX, arm_suffixes
from feedbackgym.schedules import ARMS

TRAINED_ARMS = [
    arm for arm in ARMS if not {CRITIC_HINTS_SUFFIX, CURRICULUM_SUFFIX} & set(arm_suffixes(arm))
]
"""Every arm but the curriculum's (v0 has no task knobs; ``tests/feedback/test_curriculum.py``
trains those on v2) and the critic-only hints' (``test_critic_inputs.py`` trains those)."""
