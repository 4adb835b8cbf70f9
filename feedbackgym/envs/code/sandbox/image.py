"""The Docker sandbox image: a debootstrap root filesystem with Python, imported once.

There is no image registry to pull from. ``feedbackgym sandbox build`` (or
:func:`build_image`) runs ``debootstrap --variant=minbase --include=python3``
for the host's Debian suite from the mirror in the host's apt sources, trims
the package caches and docs, and imports the tree with ``docker import`` (``USER
nobody``). The tag is a hash of the recipe, so a build is skipped when the
image is there, and a changed recipe builds a new tag. A file lock keeps
concurrent builds (vector env workers, parallel shells) from racing.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedbackgym.errors import SandboxError, requires_extra

__all__ = [
    "IMAGE_REPOSITORY",
    "AptSource",
    "apt_source",
    "build_image",
    "build_with_engine",
    "image_exists",
    "image_tag",
    "parse_apt_sources",
]

IMAGE_REPOSITORY = "feedbackgym/sandbox"
"""The repository every sandbox image is tagged under."""

_RECIPE_VERSION = 1
_DEFAULT_SUITE = "bookworm"
_PACKAGES = ("python3",)
_CHANGES = ("USER 65534:65534", "WORKDIR /work", 'CMD ["sleep", "infinity"]')
_TRIM = (
    "var/cache/apt/archives",
    "var/lib/apt/lists",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
)
_APT_DIR = Path("/etc/apt")
_DEBOOTSTRAP_SECONDS = 1800


@dataclass(frozen=True)
class AptSource:
    """A Debian archive to bootstrap from.

    Attributes:
        uri: The mirror, e.g. ``http://deb.debian.org/debian``.
        suite: The release, e.g. ``bookworm``.
    """

    uri: str
    suite: str


def parse_apt_sources(texts: Iterable[tuple[str, str]]) -> AptSource | None:
    r"""Finds the main Debian archive among apt source files.

    Args:
        texts: ``(file name, text)`` pairs; ``*.sources`` files are deb822, the
            rest one-line ``deb URI SUITE COMPONENTS`` format.

    Returns:
        The first ``deb`` source whose suite has no ``-updates``/``-security``
        style suffix and whose URI is not a security mirror, or ``None``.

    Example:
        >>> text = "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-x"
        >>> parse_apt_sources([("debian.sources", text)])
        AptSource(uri='http://deb.debian.org/debian', suite='bookworm')
    """
    for name, text in texts:
        entries = _deb822(text) if name.endswith(".sources") else _one_line(text)
        for uri, suite in entries:
            if "-" not in suite and "security" not in uri:
                return AptSource(uri.rstrip("/"), suite)
    return None


def _deb822(text: str) -> list[tuple[str, str]]:
    found = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled") == "no":
            continue
        for uri in fields.get("uris", "").split():
            found += [(uri, suite) for suite in fields.get("suites", "").split()]
    return found


def _one_line(text: str) -> list[tuple[str, str]]:
    found = []
    for line in text.splitlines():
        words = re.sub(r"\[[^\]]*\]", " ", line.split("#", 1)[0]).split()
        if len(words) >= 3 and words[0] == "deb":
            found.append((words[1], words[2]))
    return found


def apt_source(apt_dir: Path = _APT_DIR) -> AptSource | None:
    """The host's main Debian archive, from ``sources.list`` and ``sources.list.d``."""
    files = [apt_dir / "sources.list"]
    parts = apt_dir / "sources.list.d"
    if parts.is_dir():
        files += sorted(p for p in parts.iterdir() if p.suffix in (".list", ".sources"))
    texts = [(p.name, p.read_text(errors="replace")) for p in files if p.is_file()]
    return parse_apt_sources(texts)


def image_tag(suite: str | None = None) -> str:
    """The image reference of the current recipe (``feedbackgym/sandbox:SUITE-HASH``)."""
    if suite is None:
        source = apt_source()
        suite = source.suite if source is not None else _DEFAULT_SUITE
    recipe = repr((_RECIPE_VERSION, suite, _PACKAGES, _CHANGES, _TRIM)).encode()
    return f"{IMAGE_REPOSITORY}:{suite}-{hashlib.sha256(recipe).hexdigest()[:8]}"


def build_image(
    client: Any, *, force: bool = False, log: Callable[[str], None] = lambda _: None
) -> str:
    """Builds the sandbox image unless it is already there; returns its tag.

    Args:
        client: A ``docker.DockerClient``.
        force: Rebuild even if the tag exists.
        log: Called with a line of progress now and then.

    Raises:
        SandboxError: No apt source, debootstrap missing, not root, or a step failed.
    """
    source = apt_source()
    if source is None:
        raise SandboxError("no Debian apt source found in /etc/apt to bootstrap the image from")
    tag = image_tag(source.suite)
    lock_path = Path(tempfile.gettempdir()) / "feedbackgym-sandbox-build.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and image_exists(client, tag):
            log(f"{tag} is already built")
            return tag
        _check_tools()
        with tempfile.TemporaryDirectory(prefix="feedbackgym-image-") as tmp:
            root = Path(tmp) / "root"
            log(f"debootstrap {source.suite} from {source.uri} (about a minute)")
            _debootstrap(source, root)
            for part in _TRIM:
                _empty(root / part)
            (root / "work").mkdir(exist_ok=True)
            archive = Path(tmp) / "rootfs.tar"
            log("packing the root filesystem")
            with tarfile.open(archive, "w") as tar:
                tar.add(root, arcname=".")
            log(f"docker import as {tag}")
            repository, _, version = tag.partition(":")
            client.api.import_image(
                src=str(archive), repository=repository, tag=version, changes=list(_CHANGES)
            )
    log(f"built {tag}")
    return tag


def image_exists(client: Any, tag: str) -> bool:
    """Whether the Docker engine behind ``client`` has the image ``tag``."""
    return bool(client.images.list(name=tag))


def _check_tools() -> None:
    if os.geteuid() != 0:
        raise SandboxError("building the sandbox image needs root (debootstrap)")
    if shutil.which("debootstrap") is None:
        raise SandboxError("debootstrap is not installed (`apt-get install debootstrap`)")


def _debootstrap(source: AptSource, root: Path) -> None:
    command = [
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(_PACKAGES)}",
        source.suite,
        str(root),
        source.uri,
    ]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=_DEBOOTSTRAP_SECONDS, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise SandboxError(f"debootstrap took longer than {_DEBOOTSTRAP_SECONDS} s") from error
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        raise SandboxError("debootstrap failed: " + " | ".join(tail))


def _empty(directory: Path) -> None:
    if not directory.is_dir():
        return
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def build_with_engine(*, force: bool = False, log: Callable[[str], None] = lambda _: None) -> str:
    """Builds the image with the local Docker engine (see :func:`build_image`); returns its tag.

    Raises:
        DependencyNotInstalled: The docker SDK is missing.
        SandboxError: No engine answers, or the build failed.
    """
    with requires_extra("code", "docker"):
        import docker
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as error:
        raise SandboxError(f"no Docker engine answers: {error}") from error
    try:
        return build_image(client, force=force, log=log)
    except docker.errors.DockerException as error:
        raise SandboxError(f"docker import failed: {error}") from error
    finally:
        client.close()
