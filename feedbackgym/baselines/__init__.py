"""Training with feedback: SB3 callbacks and runners, a torch PPO, behaviour cloning, comparisons.

Heavy libraries (torch, stable-baselines3, tensorboard, matplotlib) load in the
modules that use them: ``feedbackgym.baselines.callbacks``, ``.runner``,
``.ppo``, ``.bc``, ``.compare``. ``feedbackgym.baselines.arms`` needs only the
core package.
"""
