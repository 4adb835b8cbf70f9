"""The torch trainer: a CleanRL-style PPO that reads the feedback stack at the envs' speed.

Read it top to bottom in this order:
:mod:`~feedbackgym.training.common.trainer_view` (one flat observation per env),
:mod:`~.network` (actor, critic and the PPO update; the entity policy is
:mod:`~feedbackgym.training.common.entity_network`), :mod:`~.ppo_config`
(its settings), :mod:`~.learner` (collect a round,
update), :mod:`~.ppo` (the round loop and its
command line), then :mod:`~.run_torch` (the run
directory around it) and :mod:`~.update_worker`
(the update in a process of its own).

May import: workers, common
"""
