"""TRL's ``environment_factory`` over a ``feedbackgym serve-env`` server.

:class:`RemoteFeedbackEnvironments` is :class:`~.trl_env.FeedbackEnvironments`
whose instances play sessions of a server
(:class:`~feedbackgym.serving.remote_env.RemoteEnv`): the server runs the env
and its feedback stack (a browser, a sandbox, on another machine), this
process's controller decides each round's feedback and sends it with each
reset. ``reset``, the tool ``act`` and ``get_reward`` are the same.

Example:
    >>> RemoteFeedbackEnvironments("http://127.0.0.1:9")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    feedbackgym.serving.remote_env.RemoteEnvError: no feedbackgym serve-env server at ...
"""

from __future__ import annotations

import os
from typing import Any

from feedbackgym.config import FeedbackConfig
from feedbackgym.serving.remote_env import RemoteEnv, server_settings
from feedbackgym.training.llm.trl_env import FeedbackEnvironments

__all__ = ["RemoteFeedbackEnvironments"]


class RemoteFeedbackEnvironments(FeedbackEnvironments):
    """A ``GRPOTrainer(environment_factory=...)`` whose envs are sessions of a served env.

    Args:
        url: The ``serve-env`` server.
        arm: The controller's arm (default: the server's).
        feedback: As :class:`~.trl_env.FeedbackEnvironments`'s.
        rounds: As :class:`~.trl_env.FeedbackEnvironments`'s.
        memory: As :class:`~.trl_env.FeedbackEnvironments`'s.
        seed: As :class:`~.trl_env.FeedbackEnvironments`'s.
    """

    def __init__(
        self,
        url: str,
        *,
        arm: str | None = None,
        feedback: FeedbackConfig | str | os.PathLike[str] | None = None,
        rounds: int = 100,
        memory: int = 3,
        seed: int = 0,
    ) -> None:
        served = server_settings(url)
        self.url = url
        super().__init__(
            served["env_id"],
            arm=arm or served["arm"],
            feedback=feedback,
            rounds=rounds,
            memory=memory,
            seed=seed,
            env_kwargs=served["env_kwargs"],
        )

    def make_env(self) -> Any:
        """A new session of the server."""
        return RemoteEnv(self.url)
