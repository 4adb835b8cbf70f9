"""The language-model commands: ``agent``, ``serve-model``, ``sft``, ``train-llm``, ``versions``.

One module a command, named after it, as in :mod:`feedbackgym.cli`; they share
its ``_helpers`` and ``_runs``.
"""
