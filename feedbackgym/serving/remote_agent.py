"""Our chat agent plays a served env: ``feedbackgym agent --env-url URL``.

The same :class:`~feedbackgym.language.agent_loop.ChatAgent` as ``agent --env``
(its prompts, constraint, retries, arms and review memory), on one session of
a ``serve-env`` server (:class:`~.remote_env.RemoteEnv`): the server's stack
gives the hints and reviews, the agent's arm says which attempts show them.
Episodes are not recorded here (the server's env is not this process's).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from feedbackgym.chat import ChatClient
from feedbackgym.language.agent_loop import (
    AgentResult,
    ChatAgent,
)
from feedbackgym.serving.remote_env import RemoteEnv

__all__ = ["run_remote_agent"]


def run_remote_agent(
    url: str,
    client: ChatClient,
    *,
    episodes: int,
    seed: int = 0,
    attempts: int = 1,
    context: int | None = None,
    **agent_settings: Any,
) -> Iterator[AgentResult]:
    """Plays ``episodes`` seeds ``attempts`` times each on the server at ``url``, yielding each.

    The arguments are :func:`~feedbackgym.language.agent_loop.run_agent`'s; ``agent_settings``
    are :class:`~feedbackgym.language.agent_loop.ChatAgent`'s (``memory``, ``arm``,
    ``retries``, ``fallback``, ``template``, ``max_errors``, ``turns``).

    Raises:
        RemoteEnvError: No server at ``url``, or it refused a message.
        ModelUnavailable: (after yielding the episode it cut short) The model
            failed ``max_errors`` calls in a row.

    Example:
        >>> client = ChatClient("http://127.0.0.1:9/v1", "m", timeout_s=0.5)
        >>> next(run_remote_agent("http://127.0.0.1:9", client, episodes=1))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        feedbackgym.serving.remote_env.RemoteEnvError: no feedbackgym serve-env server at ...
    """
    agent = ChatAgent.within(client, context, **agent_settings)
    env = RemoteEnv(url, message_timeout_s=max(60.0, client.timeout_s))
    try:
        yield from agent.play_seeds(
            lambda attempt: env,
            episodes=episodes,
            seed=seed,
            attempts=attempts,
            cut_short=lambda r: "was played out with the fallback action",
        )
    finally:
        env.close()
