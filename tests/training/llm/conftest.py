"""Fixtures of the LLM trainer's tests: the tiny Gemma 3, warmed up a little, built once."""

import pytest

from tests.training.llm.tiny_lm import save_tiny_model, warm_up


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A tiny Gemma 3 folder nudged towards the expert's actions (see :func:`warm_up`)."""
    pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("tiny-gemma")
    return warm_up(save_tiny_model(folder))
