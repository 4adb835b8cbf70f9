"""The ``doctor`` command: what is installed, what is missing, and the command that fixes each.

Usage::

    feedbackgym doctor [--json]

It reports the core dependencies and each extra (from the installed package's
metadata: every requirement importable or not, with its version), Chromium for
the web suite, the Docker engine, the sandbox image and bubblewrap for the code
suite, the language model that ``feedbackgym agent`` serves by default
(llama.cpp loads its vocabulary), and a GPU for the torch trainer. The exit
status is 0 when what the core needs (the ops suite and the baselines: the
core dependencies and the ``baselines`` and ``hdf5`` extras) is there, 1
otherwise; the rest is optional. Nothing is mocked or guessed: each check asks the real thing (the
Docker engine at ``DOCKER_HOST``, bubblewrap on ``PATH``, torch for CUDA).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from feedbackgym.cli._helpers import CommandError

__all__ = ["REQUIRED_EXTRAS", "Check", "add_commands", "diagnose"]

REQUIRED_EXTRAS = ("baselines", "hdf5")
"""The extras the core needs besides the core dependencies (``compare --quick`` runs on them)."""
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9_.-]+)[^;]*(?:;.*extra\s*==\s*['\"]([^'\"]+))?")
"""A requirement's distribution name, and the extra it belongs to (if any)."""
_DOCKERD = "sudo dockerd --bridge=none --iptables=false --ip6tables=false &"
_DOCKER_TIMEOUT_S = 5
_VERSION_TIMEOUT_S = 10


@dataclass(frozen=True)
class Check:
    """One line of the report.

    Attributes:
        name: What was checked (``core``, ``extra web``, ``Chromium``, ...).
        ok: Whether it is there and works.
        required: Whether the core needs it (a missing one makes the exit status 1).
        detail: What was found (versions, paths), or what is missing and why.
        fix: The command that fixes it; empty when ``ok``.

    Example:
        >>> check = Check("bubblewrap", False, False, "no bwrap on PATH", "apt install bubblewrap")
        >>> check.ok, check.fix
        (False, 'apt install bubblewrap')
    """

    name: str
    ok: bool
    required: bool
    detail: str
    fix: str = ""


def add_commands(commands: Any) -> None:
    """Adds ``doctor`` to the top-level subparsers ``commands``."""
    doctor = commands.add_parser(
        "doctor", help="report what is installed or missing, with the command that fixes each"
    )
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")
    doctor.set_defaults(run=_cmd_doctor)


def diagnose() -> list[Check]:
    """Runs every check: the core, each extra, then the system parts.

    Raises:
        CommandError: feedbackgym is not installed (no package metadata to read).

    Example:
        >>> checks = diagnose()
        >>> [check.name for check in checks if not check.name.startswith("extra ")]
        ... # doctest: +NORMALIZE_WHITESPACE
        ['core', 'Chromium', 'Docker engine', 'sandbox image', 'bubblewrap', 'language model',
         'GPU']
    """
    engine, client = _docker_engine()
    return [
        *_requirement_checks(),
        _chromium(),
        engine,
        _sandbox_image(client),
        _bubblewrap(),
        _language_model(),
        _gpu(),
    ]


def _cmd_doctor(args: argparse.Namespace) -> int:
    checks = diagnose()
    ready = all(check.ok for check in checks if check.required)
    if args.json:
        report = {
            "ready": ready,
            "feedbackgym": importlib.metadata.version("feedbackgym"),
            "python": platform.python_version(),
            "checks": [asdict(check) for check in checks],
        }
        print(json.dumps(report, indent=2))
    else:
        print(_text(checks))
    return 0 if ready else 1


def _text(checks: list[Check]) -> str:
    width = max(len(check.name) for check in checks)
    lines = [
        f"feedbackgym {importlib.metadata.version('feedbackgym')}, "
        f"Python {platform.python_version()}"
    ]
    for check in checks:
        status = "ok" if check.ok else "MISSING" if check.required else "missing"
        lines.append(f"  {status:<8} {check.name:<{width}}  {check.detail}")
        if check.fix:
            lines.append(f"  {'':<8} {'':<{width}}  fix: {check.fix}")
    missing = [check.name for check in checks if check.required and not check.ok]
    if not missing:
        lines.append("the core (ops suite and baselines) is ready")
    else:
        lines.append(f"the core (ops suite and baselines) is not ready: {', '.join(missing)}")
    return "\n".join(lines)


def _requirement_checks() -> list[Check]:
    """One check for the core dependencies and one per extra that names packages."""
    try:
        requirements = importlib.metadata.requires("feedbackgym") or []
    except importlib.metadata.PackageNotFoundError as error:
        raise CommandError("feedbackgym is not installed: run `pip install -e .`") from error
    groups: dict[str, list[str]] = {"": []}
    for requirement in requirements:
        match = _REQUIREMENT.match(requirement)
        if match is None or match[1] == "feedbackgym":
            continue  # an extra made of other extras (all, dev)
        groups.setdefault(match[2] or "", []).append(match[1])
    modules = importlib.metadata.packages_distributions()
    checks = []
    for extra, names in groups.items():
        found: list[str] = []
        missing: list[str] = []
        for name in names:
            version = _importable_version(name, modules)
            (found if version else missing).append(f"{name} {version}" if version else name)
        required = extra == "" or extra in REQUIRED_EXTRAS
        detail = ", ".join(found) if not missing else "not importable: " + ", ".join(missing)
        command = "pip install feedbackgym" if not extra else f'pip install "feedbackgym[{extra}]"'
        checks.append(
            Check(
                f"extra {extra}" if extra else "core",
                not missing,
                required,
                detail,
                "" if not missing else command,
            )
        )
    return checks


def _importable_version(name: str, modules: Mapping[str, list[str]]) -> str | None:
    """The installed version of distribution ``name`` if its modules can be imported."""
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    normal = _normal(name)
    tops = [top for top, dists in modules.items() if normal in map(_normal, dists)]
    if tops and not all(importlib.util.find_spec(top) for top in tops if top.isidentifier()):
        return None
    return version


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _chromium() -> Check:
    from feedbackgym.envs.web.executable import (
        CHROMIUM_ENV,
        configured_chromium,
        playwright_chromiums,
    )

    path = configured_chromium()
    if Path(path).is_file() and os.access(path, os.X_OK):
        return Check("Chromium", True, False, f"{path} ({_version_of([path, '--version'])})")
    downloaded = playwright_chromiums()
    fix = (
        f"export {CHROMIUM_ENV}={downloaded[0]}"
        if downloaded
        else "sudo apt-get install chromium-headless-shell, or: "
        f"python -m playwright install chromium and set {CHROMIUM_ENV} to it"
    )
    return Check("Chromium", False, False, f"no executable at {path} (the web suite)", fix)


def _docker_engine() -> tuple[Check, Any]:
    """The Docker engine check, and a client to it (``None`` when none answers)."""
    try:
        import docker
    except ImportError:
        detail = "the docker SDK is not installed (the code suite's Docker backend)"
        return Check("Docker engine", False, False, detail, 'pip install "feedbackgym[code]"'), None
    where = os.environ.get("DOCKER_HOST", "the default socket")
    try:
        client = docker.from_env(timeout=_DOCKER_TIMEOUT_S)
        version = client.version()["Version"]
    except docker.errors.DockerException as error:
        reason = str(error).splitlines()[0][:160]
        fix = _DOCKERD if shutil.which("dockerd") else "sudo apt-get install docker.io"
        if "DOCKER_HOST" in os.environ:
            fix += " (or point DOCKER_HOST at a running engine)"
        detail = f"no engine answers at {where}: {reason}"
        return Check("Docker engine", False, False, detail, fix), None
    return Check("Docker engine", True, False, f"{version} at {where}"), client


def _sandbox_image(client: Any) -> Check:
    from feedbackgym.envs.code.sandbox.image import IMAGE_REPOSITORY, image_exists, image_tag

    tag = image_tag()
    fix = "sudo feedbackgym sandbox build"
    if client is None:
        detail = f"{tag} not checked: no Docker engine"
        return Check("sandbox image", False, False, detail, fix)
    try:
        there = image_exists(client, tag)
    finally:
        client.close()
    if there:
        return Check("sandbox image", True, False, tag)
    return Check("sandbox image", False, False, f"{tag} is not built ({IMAGE_REPOSITORY})", fix)


def _bubblewrap() -> Check:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        detail = "bwrap is not on PATH (the code suite's local backend)"
        return Check("bubblewrap", False, False, detail, "sudo apt-get install bubblewrap")
    return Check("bubblewrap", True, False, f"{bwrap} ({_version_of([bwrap, '--version'])})")


def _language_model() -> Check:
    """The packaged model's package and file, and llama-cpp-python loading its vocabulary."""
    from feedbackgym.errors import FeedbackGymError
    from feedbackgym.language.model_file import PACKAGED_DESCRIPTION, packaged_model_package

    fix = 'pip install "feedbackgym[llm]" (or bash scripts/setup.sh, which caches the build)'
    try:
        package = packaged_model_package()
        package.verify_chunks()
    except (FeedbackGymError, OSError) as error:
        return Check("language model", False, False, f"{error} (feedbackgym agent's default)", fix)
    try:
        import llama_cpp
    except (ImportError, OSError) as error:  # OSError: the built library does not load
        detail = f"llama-cpp-python does not import: {str(error)[:120]}"
        return Check("language model", False, False, detail, fix)
    path = Path(package.default_output_path())
    size = sum(chunk.stat().st_size for chunk in package.chunk_paths())
    name = path.name.removesuffix(".gguf")
    where = f"llama-cpp-python {llama_cpp.__version__}"
    if not (path.is_file() and path.stat().st_size == size):
        detail = f"{name} ({PACKAGED_DESCRIPTION}; joined from its chunks on first use), {where}"
        return Check("language model", True, False, detail)
    try:
        with _quiet_stderr():  # llama.cpp writes to the C stderr, verbose or not
            llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    except (ValueError, RuntimeError, OSError) as error:
        detail = f"llama.cpp cannot load {path}: {str(error)[:120]}"
        return Check("language model", False, False, detail, f"rm {path}, then run it again")
    return Check(
        "language model", True, False, f"{name} ({PACKAGED_DESCRIPTION}) at {path}, {where}"
    )


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 goes to ``/dev/null`` while the block runs."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _gpu() -> Check:
    fix = "optional: the trainers run on the CPU; a GPU needs an NVIDIA driver and a CUDA torch"
    if importlib.util.find_spec("torch") is None:
        detail = "not checked: torch is not installed (the baselines extra)"
        return Check("GPU", False, False, detail, 'pip install "feedbackgym[baselines]"')
    import torch

    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        return Check("GPU", True, False, f"{', '.join(names)} (torch {torch.__version__})")
    if torch.version.cuda is None:
        return Check("GPU", False, False, f"none: torch {torch.__version__} is a CPU build", fix)
    detail = f"none visible to torch {torch.__version__} (CUDA {torch.version.cuda})"
    return Check("GPU", False, False, detail, fix)


def _version_of(command: list[str]) -> str:
    """The first line a ``--version`` command prints, or ``version unknown``."""
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=_VERSION_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return "version unknown"
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0] if done.returncode == 0 and lines else "version unknown"
