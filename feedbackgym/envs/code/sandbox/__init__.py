"""Sandboxes that run untrusted tests: one protocol, a Docker and a bubblewrap backend.

``make_sandbox("docker" | "local" | "auto")`` returns a :class:`Sandbox`.
``"auto"`` takes ``FEEDBACKGYM_SANDBOX`` when it is set, else Docker when an
engine answers and the sandbox image is built, else the local backend. The
Docker backend (and the docker SDK) load only when chosen.
"""

from __future__ import annotations

import functools
import os

from feedbackgym.envs.code.sandbox.protocol import (
    FLAGS,
    Limits,
    RunReport,
    RunRequest,
    Sandbox,
    TestResult,
)
from feedbackgym.errors import DependencyNotInstalled

__all__ = [
    "FLAGS",
    "SANDBOXES",
    "Limits",
    "RunReport",
    "RunRequest",
    "Sandbox",
    "TestResult",
    "docker_ready",
    "make_sandbox",
    "resolve_sandbox",
]

SANDBOXES: tuple[str, ...] = ("docker", "local", "auto")
"""Values of the env's ``sandbox`` argument."""


@functools.cache
def docker_ready() -> bool:
    """Whether the docker SDK is installed, an engine answers and the image is built.

    Checked once per process.
    """
    try:
        from feedbackgym.envs.code.sandbox import docker as backend
        from feedbackgym.envs.code.sandbox.image import image_exists, image_tag
    except DependencyNotInstalled:
        return False
    if not backend.engine_answers():
        return False
    client = backend.docker.from_env()
    try:
        return image_exists(client, image_tag())
    finally:
        client.close()


def resolve_sandbox(kind: str) -> str:
    """Turns ``"auto"`` into the backend it picks; checks the value.

    Raises:
        ValueError: ``kind`` (or ``FEEDBACKGYM_SANDBOX``) is not a known backend.
    """
    if kind not in SANDBOXES:
        raise ValueError(f"sandbox must be one of {SANDBOXES}, got {kind!r}")
    if kind != "auto":
        return kind
    chosen = os.environ.get("FEEDBACKGYM_SANDBOX", "").strip()
    if chosen:
        if chosen not in ("docker", "local"):
            raise ValueError(f"FEEDBACKGYM_SANDBOX must be 'docker' or 'local', got {chosen!r}")
        return chosen
    return "docker" if docker_ready() else "local"


def make_sandbox(kind: str) -> Sandbox:
    """Returns a new sandbox of backend ``kind`` (``"docker"``, ``"local"`` or ``"auto"``).

    Raises:
        SandboxError: The backend cannot start.
        DependencyNotInstalled: Docker was asked for and the docker SDK is missing.
    """
    if resolve_sandbox(kind) == "docker":
        from feedbackgym.envs.code.sandbox.docker import DockerSandbox

        return DockerSandbox()
    from feedbackgym.envs.code.sandbox.local import LocalSandbox

    return LocalSandbox()
