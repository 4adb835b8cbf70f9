"""Fixtures for the code suite: both sandbox backends, for real.

A backend that is not available skips locally and fails in CI
(``tests.conftest.require``); Docker cases carry the ``docker`` marker.
"""

import shutil

import pytest

from feedbackgym.envs.code.sandbox import docker_ready
from tests.conftest import require

BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]


def require_backend(kind):
    if kind == "docker":
        require(
            docker_ready(), "a Docker engine with the sandbox image (`feedbackgym sandbox build`)"
        )
    else:
        require(shutil.which("bwrap") is not None, "bubblewrap")


@pytest.fixture(params=BACKENDS)
def backend(request):
    """The name of a sandbox backend that is available here."""
    require_backend(request.param)
    return request.param
