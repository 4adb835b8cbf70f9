"""Training with feedback: the trainers, what their runs share, and the experiments over them.

The layer's subpackages, lowest first (a subpackage imports only those its
docstring's ``May import`` line names, and the layers below ``training``):

- :mod:`feedbackgym.training.workers`: envs stepped in groups, in worker
  processes or on Ray actors (and SB3's ``VecEnv`` over those actors);
- :mod:`feedbackgym.training.common`: what every run shares: the arms, a run's
  settings and directory, the round book, validation, metrics, system
  metrics, behaviour cloning, the device;
- :mod:`feedbackgym.training.torch_ppo`, :mod:`feedbackgym.training.sb3` and
  :mod:`feedbackgym.training.llm`: the three trainers (PPO in torch, SB3's PPO,
  GRPO of a language model with its supervised warm-up), side by side, none
  importing another;
- :mod:`feedbackgym.training.experiments`: one run with its trainer, the arm
  comparison (in processes or on Ray), its statistics and reports.

Heavy libraries (torch, stable-baselines3, transformers, trl, tensorboard, matplotlib, ray) load
in the modules that use them; :mod:`feedbackgym.training.common.arms` and
:mod:`feedbackgym.training.common.trainer_names` need only the core package.

May import: (nothing: the package's own ``__init__`` is a docstring)
"""
