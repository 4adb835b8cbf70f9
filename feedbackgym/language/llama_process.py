"""The model server's process: llama-cpp-python's OpenAI-compatible server, with a chat template.

:mod:`~feedbackgym.language.model_server` starts this module as a child
process; it is not meant to be run by hand (``feedbackgym serve-model`` is).
It serves one GGUF file on ``--host``/``--port`` with llama-cpp-python's
server (``/v1/chat/completions``, ``/v1/completions``, ``/v1/models``,
``/extras/tokenize/count``; replies constrained by a llama.cpp ``grammar`` or a
``response_format`` of ``{"type": "json_object", "schema": ...}``), and quits
with its parent, even one killed by ``kill -9``.

``--chat-template gemma`` renders chats with the Gemma turns of
``feedbackgym/language/prompts/gemma.jinja``, which keep the system text (the
packaged model's GGUF has no template, and llama-cpp-python's own ``gemma``
format drops system messages). Without it, the GGUF's own template is used
(llama-cpp-python's fallback when the file has none).

The ``llm`` extra installs ``llama-cpp-python``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import resources

from feedbackgym._process import exit_with_parent
from feedbackgym.errors import DependencyNotInstalled

__all__ = ["CHAT_TEMPLATES", "main", "register_chat_template"]

CHAT_TEMPLATES = ("gemma",)
"""The chat templates shipped in ``feedbackgym/language/prompts/`` (``NAME.jinja``)."""
_TEMPLATE_TOKENS = {"gemma": ("<bos>", "<end_of_turn>")}
"""Each template's BOS text and its end of a turn (where a reply stops)."""


def register_chat_template(name: str) -> str:
    """Registers the shipped template ``name`` with llama-cpp-python; returns its chat format.

    Raises:
        DependencyNotInstalled: llama-cpp-python is not installed.
        ValueError: No template has that name.
    """
    if name not in CHAT_TEMPLATES:
        raise ValueError(f"no chat template {name!r} (known: {', '.join(CHAT_TEMPLATES)})")
    try:
        from llama_cpp import llama_chat_format
    except ImportError as error:
        raise DependencyNotInstalled.for_extra("llama-cpp-python", "llm") from error
    text = resources.files("feedbackgym.language").joinpath(f"prompts/{name}.jinja").read_text()
    bos, end_of_turn = _TEMPLATE_TOKENS[name]
    formatter = llama_chat_format.Jinja2ChatFormatter(
        template=text, eos_token=end_of_turn, bos_token=bos
    )
    chat_format = f"feedbackgym-{name}"
    llama_chat_format.LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(
        chat_format, formatter.to_chat_handler(), overwrite=True
    )
    return chat_format


def main(argv: Sequence[str] | None = None) -> int:
    """Serves until SIGTERM or SIGINT (or the parent's end); returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m feedbackgym.language.llama_process",
        description="llama.cpp's OpenAI-compatible server for one GGUF file (feedbackgym's).",
    )
    parser.add_argument("--model", required=True, help="the GGUF file")
    parser.add_argument("--alias", required=True, help="the model's name in /v1/models")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--context", type=int, default=2048, help="context size in tokens")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--chat-template", choices=CHAT_TEMPLATES, default=None)
    parser.add_argument("--orphan-ok", action="store_true", help="keep serving if the parent ends")
    args = parser.parse_args(argv)
    if not args.orphan_ok:
        exit_with_parent()
    try:
        import uvicorn
        from llama_cpp.server.app import create_app
        from llama_cpp.server.settings import ModelSettings, ServerSettings
    except ImportError as error:
        raise DependencyNotInstalled.for_extra("llama-cpp-python", "llm") from error
    chat_format = register_chat_template(args.chat_template) if args.chat_template else None
    app = create_app(
        server_settings=ServerSettings(host=args.host, port=args.port),
        model_settings=[
            ModelSettings(
                model=args.model,
                model_alias=args.alias,
                n_ctx=args.context,
                n_threads=args.threads,
                n_threads_batch=args.threads,
                chat_format=chat_format,
                verbose=False,
            )
        ],
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
