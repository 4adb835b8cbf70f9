"""The model server's process: llama-cpp-python's OpenAI-compatible server, with a chat template.

:mod:`~feedbackgym.language.model_server` starts this module as a child
process; it is not meant to be run by hand (``feedbackgym serve-model`` is).
It serves one GGUF file on ``--host``/``--port`` with llama-cpp-python's
server (``/v1/chat/completions``, ``/v1/completions``, ``/v1/models``,
``/extras/tokenize/count``; replies constrained by a llama.cpp ``grammar`` or a
``response_format`` of ``{"type": "json_object", "schema": ...}``), and quits
with its parent, even one killed by ``kill -9``.

With ``--versions DIR``, it serves a version registry's adapters beside the
base model, switching on promotions, canaries and rollbacks without a restart
(:mod:`~feedbackgym.language.served_versions`).

A ``grammar`` that is only an alternation of strings (what
:func:`~feedbackgym.chat.choice_grammar` writes for the agent's
actions) is applied as a :class:`~feedbackgym.language.choice_mask.ChoiceMask`
over the choices' tokens rather than by llama.cpp's grammar sampler: the same
replies, without checking all 262,144 tokens of Gemma's vocabulary against
the grammar at every step (3-8 s an action reply on 2 cores, against well
under a second). Any other grammar, and ``response_format``, go to llama.cpp.

``--chat-template gemma`` renders chats with the Gemma turns of
``feedbackgym/chat/prompts/gemma.jinja``, which keep the system text (the
packaged model's GGUF has no template, and llama-cpp-python's own ``gemma``
format drops system messages). Without it, the GGUF's own template is used
(llama-cpp-python's fallback when the file has none).

The ``llm`` extra installs ``llama-cpp-python``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from feedbackgym._process import exit_with_parent
from feedbackgym.chat import choices_of_grammar
from feedbackgym.chat.turns import CHAT_TEMPLATES, chat_template, template_tokens
from feedbackgym.errors import requires_extra
from feedbackgym.language.choice_decode import choice_completion, prompt_tokens
from feedbackgym.language.choice_mask import ChoiceMask

__all__ = [
    "cpu_has_amx",
    "main",
    "mask_choice_grammars",
    "plain_cpu_buffers",
    "register_chat_template",
]


def register_chat_template(name: str) -> str:
    """Registers the shipped template ``name`` with llama-cpp-python; returns its chat format.

    Raises:
        DependencyNotInstalled: llama-cpp-python is not installed.
        ValueError: No template has that name.
    """
    text = chat_template(name)
    with requires_extra("llm", "llama-cpp-python"):
        from llama_cpp import llama_chat_format
    bos, end_of_turn = template_tokens(name)
    formatter = llama_chat_format.Jinja2ChatFormatter(
        template=text, eos_token=end_of_turn, bos_token=bos
    )
    chat_format = f"feedbackgym-{name}"
    llama_chat_format.LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(
        chat_format, formatter.to_chat_handler(), overwrite=True
    )
    return chat_format


def mask_choice_grammars() -> None:
    """Makes ``Llama.create_completion`` (chats and completions) apply choice grammars as masks.

    It patches llama-cpp-python's class in this process only: the server's.

    Raises:
        DependencyNotInstalled: llama-cpp-python is not installed.
    """
    with requires_extra("llm", "llama-cpp-python"):
        import llama_cpp
    create = llama_cpp.Llama.create_completion
    if getattr(create, "masks_choices", False):
        return

    def create_completion(self: Any, *args: Any, **kwargs: Any) -> Any:
        grammar = kwargs.get("grammar")
        choices = choices_of_grammar(grammar._grammar) if grammar is not None else None
        if choices:
            tokens = [self.tokenize(c.encode(), add_bos=False, special=False) for c in choices]
            prompt = kwargs.get("prompt", args[0] if args else "")
            walked = _walkable(kwargs) and prompt_tokens(self, prompt)
            if walked:
                spelled = {tuple(t): c for t, c in zip(tokens, choices, strict=True) if t}
                return choice_completion(
                    self,
                    walked,
                    spelled,
                    temperature=float(kwargs.get("temperature", 0.8)),
                    seed=kwargs.get("seed"),
                    model=kwargs.get("model") or self.model_path,
                )
            mask = ChoiceMask([t for t in tokens if t], end=self.token_eos())
            kwargs["grammar"] = None
            kwargs["logits_processor"] = llama_cpp.LogitsProcessorList(
                [*(kwargs.get("logits_processor") or []), mask]
            )
        return create(self, *args, **kwargs)

    create_completion.masks_choices = True  # type: ignore[attr-defined]
    llama_cpp.Llama.create_completion = create_completion  # type: ignore[method-assign]


def _walkable(request: Mapping[str, Any]) -> bool:
    """Whether a completion request can take :func:`choice_completion`'s path (one plain reply)."""
    return not (
        request.get("stream")
        or request.get("logprobs") is not None
        or request.get("echo")
        or request.get("suffix") is not None
    )


def cpu_has_amx(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether the CPU has Intel's AMX tiles (``amx_tile`` among ``/proc/cpuinfo``'s flags).

    Example:
        >>> cpu_has_amx("/nonexistent")
        False
    """
    try:
        with open(cpuinfo) as file:
            return any(line.startswith("flags") and "amx_tile" in line.split() for line in file)
    except OSError:
        return False


def plain_cpu_buffers() -> None:
    """Makes llama-cpp-python load models without llama.cpp's extra CPU buffer types.

    On a CPU with AMX, llama.cpp puts the weights in AMX buffers, and the
    packaged model's first decode then crashes the process (SIGSEGV, with or
    without a LoRA adapter; llama-cpp-python 0.3.36, seen on these machines).
    Without the extra buffer types (``use_extra_bufts``, which llama-cpp-python
    does not expose: its default parameters are patched, in this process only)
    the weights stay in plain CPU memory and the same replies come.

    Raises:
        DependencyNotInstalled: llama-cpp-python is not installed.
    """
    with requires_extra("llm", "llama-cpp-python"):
        import llama_cpp.llama_cpp as api
    default = api.llama_model_default_params
    if getattr(default, "plain", False):
        return

    def params() -> Any:
        chosen = default()
        chosen.use_extra_bufts = False
        return chosen

    params.plain = True  # type: ignore[attr-defined]
    api.llama_model_default_params = params


def _serve_versions(app: Any, settings: Any, root: str, alias: str) -> Any:
    """The server's app with the versions in ``root`` served too (``NAME@vN``, ``NAME@current``).

    The server takes its model proxy from a module variable at every request;
    :class:`~feedbackgym.language.served_versions.VersionProxy` takes its place there.
    """
    from llama_cpp.server import app as server_app

    from feedbackgym.language.served_versions import RouteCurrent, ServedVersions, VersionProxy

    versions = ServedVersions(root, alias)
    proxy = VersionProxy(server_app._llama_proxy, settings, versions)
    server_app._llama_proxy = proxy  # type: ignore[assignment]  # its interface, not its class
    return RouteCurrent(app, versions)


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
    parser.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    parser.add_argument("--chat-template", choices=CHAT_TEMPLATES, default=None)
    parser.add_argument("--lora", default=None, help="a LoRA adapter (GGUF) to apply")
    parser.add_argument(
        "--versions", default=None, help="a version registry's folder: its versions served too"
    )
    parser.add_argument("--orphan-ok", action="store_true", help="keep serving if the parent ends")
    args = parser.parse_args(argv)
    if not args.orphan_ok:
        exit_with_parent()
    with requires_extra("llm", "llama-cpp-python"):
        import uvicorn
        from llama_cpp.server.app import create_app
        from llama_cpp.server.settings import ModelSettings, ServerSettings
    mask_choice_grammars()
    if cpu_has_amx():
        plain_cpu_buffers()
    chat_format = register_chat_template(args.chat_template) if args.chat_template else None
    settings = ModelSettings(
        model=args.model,
        model_alias=args.alias,
        n_ctx=args.context,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        chat_format=chat_format,
        lora_path=args.lora,
        # The server's default (True) computes the 262,144-way output layer for every
        # prompt token, and keeps it: 2 GB at 2048 tokens, prompts 3-4 times slower.
        # Without it, replies carry no logprobs.
        logits_all=False,
        verbose=False,
    )
    app: Any = create_app(
        server_settings=ServerSettings(host=args.host, port=args.port), model_settings=[settings]
    )
    if args.versions is not None:
        app = _serve_versions(app, settings, args.versions, args.alias)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
