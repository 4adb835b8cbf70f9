"""What every run shares, whichever trainer runs it.

The arms (:mod:`~.arms`), a run's settings
(:mod:`~.run_settings`) and the files of its
directory (:mod:`~.run_files`), the end of a round
(:mod:`~.round_book`), validation on held-out seeds
(:mod:`~.validation`), the ``feedback/`` and system
metrics, behaviour cloning (:mod:`~.cloning`), the
device, and the trainers' names; what both trainers read an env through: the
flat view of its stack (:mod:`~.trainer_view`) and the entity policy
(:mod:`~.entity_network`).

May import: workers
"""
