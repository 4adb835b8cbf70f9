"""The feedback config a test's learner discounts with."""

from feedbackgym.config import FeedbackConfig, merge_config


def discounted(gamma: float) -> FeedbackConfig:
    """The default feedback config with the shaping's (and so PPO's) discount ``gamma``."""
    return merge_config(FeedbackConfig(), {"shaping": {"gamma": gamma}})
