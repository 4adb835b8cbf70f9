"""A run config of a few rounds, for tests that train, resume and read a run's files."""

from feedbackgym.training.common.run_settings import RunConfig


def tiny_run(env_id: str, arm: str, out_dir, **settings) -> RunConfig:
    """Two envs, rounds of 32 steps, 64 steps in all, one validation episode a round, CPU."""
    defaults = {"total_steps": 64, "n_envs": 2, "n_steps": 32, "eval_every": 1}
    return RunConfig(
        env_id=env_id,
        arm=arm,
        seed=0,
        out_dir=str(out_dir),
        **{"eval_episodes": 1, "device": "cpu", **defaults, **settings},
    )
