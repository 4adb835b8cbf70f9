"""Experiments over the trainers: one run with its trainer, the arm comparison, its report.

:mod:`~.launch` trains one run with the trainer
its settings name; :mod:`~.logged_run` adds the
run's ``run.log`` with its alerts; :mod:`~.compare`
runs every arm x seed (in processes, or on Ray through
:mod:`~.ray_runs` and
:mod:`~.dir_sync`);
:mod:`~.stats`,
:mod:`~.report` and
:mod:`~.demonstrations` turn the runs' curves
into tables and plots.

May import: workers, common, torch_ppo, sb3
"""
