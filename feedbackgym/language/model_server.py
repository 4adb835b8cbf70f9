"""A local model server's lifecycle: start it on loopback, check it answers, stop it.

:class:`ModelServer` runs llama-cpp-python's OpenAI-compatible server
(:mod:`~feedbackgym.language.llama_process`) as a child process serving one
GGUF file (the packaged model unless told otherwise, see
:mod:`~feedbackgym.language.model_file`) on ``127.0.0.1`` and a free port. It
is ready when ``GET /v1/models`` lists the model; it is stopped (SIGTERM, then
SIGKILL) when the ``with`` block ends, on an error or a ``KeyboardInterrupt``
too, and at interpreter exit; the child also quits by itself when its parent
dies, even by ``kill -9``. So no server outlives the command that started it.
``feedbackgym agent`` starts one when given no ``--base-url``;
``feedbackgym serve-model`` starts one for other clients.

Example:
    >>> with ModelServer() as server:  # doctest: +SKIP
    ...     print(server.base_url, server.model.name)
    http://127.0.0.1:41235/v1 gemma-3-270m-q4_k_m
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO

from feedbackgym.errors import ConfigError, DependencyNotInstalled, FeedbackGymError
from feedbackgym.language.model_file import ModelFile, model_file
from feedbackgym.language.versions import CURRENT, open_registry, version_name

__all__ = [
    "DEFAULT_CONTEXT",
    "STARTUP_TIMEOUT_S",
    "ModelServer",
    "ModelServerError",
    "default_threads",
    "exit_reason",
    "served_adapter",
    "sigterm_as_interrupt",
]

DEFAULT_CONTEXT = 2048
"""The context the server gives the model, in tokens (prompt and reply together)."""
STARTUP_TIMEOUT_S = 120.0
"""How long a start waits for ``GET /v1/models`` to answer."""
STOP_TIMEOUT_S = 10.0
"""How long a stop waits after SIGTERM before SIGKILL."""
_POLL_S = 0.1
_LOG_TAIL_LINES = 8


def default_threads() -> int:
    """Half the CPU cores, at least one (llama.cpp's own default).

    llama.cpp's threads wait on each other at every step: on 2 cores shared with
    other work, 1 thread processed prompts at 181 tokens/s and generated 30-34,
    2 threads 70-113 and 4-6 (Gemma 3 270M, Q4_K_M, measured side by side).
    """
    return max(1, (os.cpu_count() or 2) // 2)


class ModelServerError(FeedbackGymError, RuntimeError):
    """The model server did not start, or died (the message says how, with its log's tail)."""


def served_adapter(path: str | os.PathLike[str]) -> Path:
    """The GGUF LoRA file llama.cpp loads for the adapter at ``path``.

    A ``.gguf`` file is taken as it is. A PEFT adapter folder (``save_pretrained``'s:
    ``adapter_config.json`` and ``adapter_model.safetensors``, such as ``feedbackgym
    sft``'s ``adapter/``) is converted on first use by
    :func:`~feedbackgym.language.lora_gguf.export_lora_gguf` into ``adapter.gguf``
    beside its weights, and converted again only when the weights are newer.

    Raises:
        ConfigError: ``path`` is neither a ``.gguf`` file nor a PEFT adapter folder.
    """
    source = Path(path).expanduser()
    if source.suffix == ".gguf":
        if not source.is_file():
            raise ConfigError(f"adapter {source}: no such GGUF file")
        return source
    weights = source / "adapter_model.safetensors"
    if not ((source / "adapter_config.json").is_file() and weights.is_file()):
        raise ConfigError(
            f"adapter {source}: neither a .gguf LoRA file nor a PEFT adapter folder "
            "(adapter_config.json and adapter_model.safetensors)"
        )
    target = source / "adapter.gguf"
    if not target.is_file() or target.stat().st_mtime < weights.stat().st_mtime:
        from feedbackgym.language.lora_gguf import export_lora_gguf

        export_lora_gguf(source, target)
    return target


def exit_reason(returncode: int) -> str:
    """A process's exit status in words.

    Example:
        >>> exit_reason(-9), exit_reason(1)
        ('killed by signal 9 (SIGKILL)', 'exited with status 1')
    """
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            return f"killed by signal {-returncode}"
        return f"killed by signal {-returncode} ({name})"
    return f"exited with status {returncode}"


class ModelServer:
    """A llama.cpp server process on loopback for one GGUF file.

    Args:
        model: The model file (default: the packaged model, joined on first use).
        host: The address to listen on (loopback unless you mean otherwise).
        port: The port (0: a free one).
        context: The model's context in tokens.
        threads: CPU threads for prompt processing and generation (default:
            :func:`default_threads`).
        chat_template: A shipped chat template (``"gemma"``), or ``None`` for the
            GGUF's own (default: ``"gemma"`` for the packaged model, else ``None``).
        lora: A LoRA adapter in llama.cpp's GGUF form to apply to the model
            (llama-cpp-python's ``lora_path``; see :func:`served_adapter`).
        versions: A version registry to serve too: a run directory (its
            ``versions/``) or the registry's folder. Its versions are served as
            ``NAME@vN`` and the current one (or the canary, for its share) as
            ``NAME@current`` beside the base model ``NAME``, and follow its
            promotions, canaries and rollbacks without a restart
            (:mod:`~feedbackgym.language.served_versions`).
        startup_timeout_s: How long :meth:`start` waits for the server to answer.
        orphan_ok: Let the server outlive this process (``serve-model`` does not).

    Attributes:
        model: The model file it serves.
        versions: The version registry it serves too, or ``None``.
        base_url: ``http://HOST:PORT/v1`` once started.

    Raises:
        ConfigError: A bad number, a LoRA adapter with versions, or no registry at ``versions``.
        DependencyNotInstalled: The packaged model's package is missing.
    """

    def __init__(
        self,
        model: ModelFile | str | os.PathLike[str] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        context: int = DEFAULT_CONTEXT,
        threads: int | None = None,
        chat_template: str | None = "auto",
        lora: str | os.PathLike[str] | None = None,
        versions: str | os.PathLike[str] | None = None,
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
        orphan_ok: bool = False,
    ) -> None:
        if context < 64 or port < 0 or startup_timeout_s <= 0 or (threads or 1) < 1:
            raise ConfigError(
                "context must be at least 64, port at least 0, threads and the start-up "
                f"timeout positive; got {context}, {port}, {threads}, {startup_timeout_s}"
            )
        self.model = model if isinstance(model, ModelFile) else model_file(model)
        self.host = host
        self.port = port
        self.context = context
        self.threads = threads or default_threads()
        if chat_template == "auto":
            chat_template = "gemma" if self.model.packaged else None
        self.chat_template = chat_template
        self.lora = Path(lora) if lora is not None else None
        if self.lora is not None and not self.lora.is_file():
            raise ConfigError(f"LoRA adapter {self.lora}: no such GGUF file")
        if self.lora is not None and versions is not None:
            raise ConfigError("a LoRA adapter or versions, not both: each version is an adapter")
        self.versions = open_registry(versions) if versions is not None else None
        self.startup_timeout_s = startup_timeout_s
        self.orphan_ok = orphan_ok
        self.base_url = ""
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        return f"ModelServer({self.model.name!r}, {self.base_url or 'not started'}, {state})"

    @property
    def pid(self) -> int | None:
        """The server process's id (``None`` before :meth:`start`)."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    def served_name(self, version: int | str | None = None) -> str:
        """The name a request gives for ``version`` (a number, ``"current"``; ``None``: the base).

        Raises:
            ConfigError: No such version, or no versions served.
        """
        if version is None:
            return self.model.name
        if self.versions is None:
            raise ConfigError(f"version {version}: this server serves no versions")
        if version != CURRENT:
            numbers = [v.number for v in self.versions.versions()]
            if version not in numbers:
                raise ConfigError(
                    f"{self.versions.root}: no version {version} "
                    f"(versions: {', '.join(map(str, numbers)) or 'none yet'})"
                )
        return version_name(self.model.name, version)

    def describe(self, version: int | str | None = None) -> str:
        """The model and where it is served, in one line (the commands' first line).

        Args:
            version: The version a client plays (a number or ``"current"``), named too.
        """
        where = f"at {self.base_url} (pid {self.pid})" if self.base_url else "(not started)"
        adapter = f" with the LoRA adapter {self.lora}" if self.lora is not None else ""
        if self.versions is not None:
            adapter = f" with the versions of {self.versions.root}"
            if version is not None:
                serving = self.versions.serving()
                which = f"version {version}"
                if version == CURRENT:
                    canary = f"; canary v{serving.canary} for {serving.share:.0%}"
                    promoted = f"v{serving.current}" if serving.current else "none: the base model"
                    which = f"the current version ({promoted}{canary if serving.canary else ''})"
                adapter = f" with {which} of {self.versions.root} as {self.served_name(version)}"
        return f"model: {self.model}{adapter}, served by llama.cpp {where}"

    def exit_reason(self) -> str | None:
        """How the process ended, in words (``None``: not started, or still running)."""
        if self._process is None or self._process.poll() is None:
            return None
        return exit_reason(self._process.returncode)

    def start(self) -> str:
        """Starts the server and waits until it answers; returns its base URL.

        Raises:
            DependencyNotInstalled: llama-cpp-python is not installed (the ``llm`` extra).
            ModelServerError: It exited, or did not answer within the start-up timeout
                (it is stopped then).
        """
        if self.running:
            return self.base_url
        if importlib.util.find_spec("llama_cpp") is None:
            raise DependencyNotInstalled.for_extra("llama-cpp-python", "llm")
        port = self.port or _free_port(self.host)
        self._log = tempfile.TemporaryFile(prefix="feedbackgym-model-server-")
        command = [
            sys.executable,
            "-m",
            "feedbackgym.language.llama_process",
            "--model",
            str(self.model.path),
            "--alias",
            self.model.name,
            "--host",
            self.host,
            "--port",
            str(port),
            "--context",
            str(self.context),
            "--threads",
            str(self.threads),
        ]
        if self.chat_template:
            command += ["--chat-template", self.chat_template]
        if self.lora is not None:
            command += ["--lora", str(self.lora)]
        if self.versions is not None:
            command += ["--versions", str(self.versions.root.resolve())]
        if self.orphan_ok:
            command.append("--orphan-ok")
        self._process = subprocess.Popen(
            command,
            env=_child_env(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a terminal's Ctrl-C reaches us; we stop it
        )
        atexit.register(self.stop)
        self.base_url = f"http://{_url_host(self.host)}:{port}/v1"
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self.base_url

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            if not self.running:
                raise ModelServerError(
                    f"the model server for {self.model.name} {self.exit_reason()} while "
                    f"starting{self._log_tail()}"
                )
            if self.model.name in self.models():
                return
            if time.monotonic() > deadline:
                raise ModelServerError(
                    f"the model server for {self.model.name} did not answer GET "
                    f"{self.base_url}/models within {self.startup_timeout_s:g} s{self._log_tail()}"
                )
            time.sleep(_POLL_S)

    def models(self, timeout_s: float = 5.0) -> list[str]:
        """The model names ``GET /v1/models`` lists (``[]`` when it does not answer)."""
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=timeout_s) as response:
                data = json.load(response)
        except (OSError, ValueError):
            return []
        return [str(entry.get("id")) for entry in data.get("data", [])]

    def check(self) -> None:
        """Raises :class:`ModelServerError` when the server process has ended."""
        if self._process is not None and not self.running:
            raise ModelServerError(
                f"the model server (pid {self.pid}) {self.exit_reason()}{self._log_tail()}"
            )

    def wait(self) -> int:
        """Waits until the process ends (``serve-model``); returns its exit status."""
        if self._process is None:
            raise ModelServerError("the model server was not started")
        return self._process.wait()

    def stop(self) -> None:
        """Stops the process (SIGTERM, then SIGKILL after :data:`STOP_TIMEOUT_S`); idempotent."""
        process, self._process = self._process, None
        atexit.unregister(self.stop)
        if process is not None:
            if process.poll() is None:
                process.terminate()
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGCONT)  # a stopped process acts on SIGTERM
                try:
                    process.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            self._process = process  # keeps pid and exit_reason() readable
        if self._log is not None:
            self._log.close()
            self._log = None

    def _log_tail(self) -> str:
        if self._log is None:
            return ""
        self._log.flush()
        self._log.seek(0)
        lines = self._log.read().decode(errors="replace").strip().splitlines()
        tail = " | ".join(line.strip() for line in lines[-_LOG_TAIL_LINES:] if line.strip())
        return f"; its log ends: {tail}" if tail else ""

    def __enter__(self) -> ModelServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM raises ``KeyboardInterrupt`` (so ``finally`` blocks run).

    The default SIGTERM ends Python at once, skipping the ``with ModelServer``
    that would stop the server (which then quits by itself within a second,
    when it sees its parent gone). Outside the main thread it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _child_env() -> dict[str, str]:
    """This environment, with this feedbackgym first on the child's path (a checkout's too)."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
