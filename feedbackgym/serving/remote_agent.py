"""Our chat agent plays a served env: ``feedbackgym agent --env-url URL``.

The same :class:`~feedbackgym.language.agent_loop.ChatAgent` as ``agent --env``
(its prompts, constraint, retries, arms and review memory), on one session of
a ``serve-env`` server (:class:`~.remote_env.RemoteEnv`): the server's stack
gives the hints and reviews, the agent's arm says which attempts show them.
Episodes are not recorded here (the server's env is not this process's).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from feedbackgym.chat import ChatClient
from feedbackgym.language.agent_arms import DEFAULT_AGENT_ARM
from feedbackgym.language.agent_loop import (
    DEFAULT_MAX_ERRORS,
    DEFAULT_MEMORY,
    AgentResult,
    ChatAgent,
)
from feedbackgym.language.episode_chat import DEFAULT_TURNS
from feedbackgym.serving.remote_env import RemoteEnv

__all__ = ["run_remote_agent"]


def run_remote_agent(
    url: str,
    client: ChatClient,
    *,
    episodes: int,
    seed: int = 0,
    attempts: int = 1,
    arm: str = DEFAULT_AGENT_ARM,
    memory: int = DEFAULT_MEMORY,
    retries: int = 1,
    fallback: str | None = None,
    template: str | os.PathLike[str] | None = None,
    context: int | None = None,
    max_errors: int = DEFAULT_MAX_ERRORS,
    turns: str = DEFAULT_TURNS,
) -> Iterator[AgentResult]:
    """Plays ``episodes`` seeds ``attempts`` times each on the server at ``url``, yielding each.

    The arguments are :func:`~feedbackgym.language.agent_loop.run_agent`'s.

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
    agent = ChatAgent.within(
        client,
        context,
        memory=memory,
        arm=arm,
        retries=retries,
        fallback=fallback,
        template=template,
        max_errors=max_errors,
        turns=turns,
    )
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
