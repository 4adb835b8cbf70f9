"""Envs stepped in groups for a trainer: in its process, in worker processes, on Ray actors.

- :mod:`~.env_groups`: the groups' protocol, their
  layout and the worker processes;
- :mod:`~.ray_actors`: the same groups as Ray actors
  on a cluster's nodes;
- :mod:`~.ray_vec_env`: SB3's ``VecEnv`` over those
  actors (the SB3 path's envs on a cluster).

May import: (no other subpackage of ``feedbackgym.training``)
"""
