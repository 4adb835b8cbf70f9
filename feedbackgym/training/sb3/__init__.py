"""The Stable-Baselines3 trainer: SB3's PPO with the feedback stack, through callbacks.

:mod:`~.run_sb3` runs one arm (run directory,
validation, checkpoints, resume); :mod:`~.callbacks`
puts together the controller's drive
(:mod:`~.drive_controller`), review credit
(:mod:`~.review_credit`) and the round's logs;
:mod:`~.vec_wrappers` holds the vector-env wrappers.

May import: workers, common
"""
