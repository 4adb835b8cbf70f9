"""Chat with a language model: the client, the grammars, the prompt templates, the prompts.

The one owner of how the project talks to a chat model. It sits just above
``core`` (it imports ``feedbackgym.errors`` and the standard library only, and
``openai`` lazily), below the LLM generators in ``feedback/``, the agent loop
and model server in ``language/``, and the LLM trainer:

* :mod:`~feedbackgym.chat.client`: :class:`ChatClient` and the :class:`Replier`
  protocol the agent loop asks for;
* :mod:`~feedbackgym.chat.grammar`: choice grammars and the JSON in replies;
* :mod:`~feedbackgym.chat.template`: :class:`PromptTemplate`;
* :mod:`~feedbackgym.chat.turns`: the packaged model's turn format, one template
  (``prompts/gemma.jinja``) that the server, the warm-up and the trainer render;
* ``prompts/``: every shipped prompt (the guide's, the reviewer's, the agent's)
  and the packaged model's turn format (``gemma.jinja``).
"""

from __future__ import annotations

from feedbackgym.chat.client import (
    API_KEY_ENV,
    BASE_URL_ENV,
    CONSTRAIN_ENV,
    CONSTRAINTS,
    DEFAULT_TIMEOUT_S,
    MODEL_ENV,
    TIMEOUT_ENV,
    ChatClient,
    Replier,
)
from feedbackgym.chat.grammar import (
    choice_grammar,
    choices_of_grammar,
    compact_json,
    json_object,
    request_block,
)
from feedbackgym.chat.template import PromptTemplate, prompt_file

__all__ = [
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "CONSTRAINTS",
    "CONSTRAIN_ENV",
    "DEFAULT_TIMEOUT_S",
    "MODEL_ENV",
    "TIMEOUT_ENV",
    "ChatClient",
    "PromptTemplate",
    "Replier",
    "choice_grammar",
    "choices_of_grammar",
    "compact_json",
    "json_object",
    "prompt_file",
    "request_block",
]
