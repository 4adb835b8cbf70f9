"""The run's model versions: each saved adapter a numbered version, promoted, canaried, rolled back.

A :class:`VersionRegistry` is a folder (``RUN/versions/``) holding one folder
per version (``v0001/``: a PEFT adapter, ``adapter_config.json`` and
``adapter_model.safetensors``) and ``registry.json``, the one file a model
server reads to know what to serve::

    {
      "versions": [{"number": 1, "path": "v0001", "round": 3, "passed": true,
                    "validation": {"success": 0.4, "success_unguided": 0.3, ...},
                    "created": 1767000000.0}, ...],
      "current": 1,                         # the promoted version (null: the base model)
      "canary": {"version": 2, "share": 0.1},  # or null
      "history": [{"event": "promote", "version": 1, "time": ...}, ...]
    }

Paths are relative to the registry folder. Every change rewrites the file
atomically (a temporary file, then a rename), so a server polling it never
reads half of one; :meth:`VersionRegistry.serving` is what it needs, and
:func:`route` says which version answers a request: the canary for its share
of requests (the same request key always gets the same answer), the current
version for the rest. A model server names version ``N`` of model ``NAME``
``NAME@vN`` (:func:`version_name`; :mod:`~feedbackgym.language.served_versions`).

A version that failed its validation is never promoted (:class:`VersionRejected`);
a rollback goes back to the version promoted before the current one, or to
any earlier version named.

Example:
    >>> import tempfile
    >>> registry = VersionRegistry(tempfile.mkdtemp())
    >>> one = registry.add(lambda folder: None, round=0, validation={"success_unguided": 0.2})
    >>> two = registry.add(lambda folder: None, round=1, validation={"success_unguided": 0.5})
    >>> registry.promote(one.number).current
    1
    >>> registry.start_canary(two.number, share=0.25).canary
    {'version': 2, 'share': 0.25}
    >>> sorted({route(registry.serving(), f"request {n}") for n in range(100)})
    [1, 2]
    >>> registry.promote(two.number).current, registry.state.canary
    (2, None)
    >>> registry.rollback().current
    1
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from feedbackgym.errors import ConfigError, FeedbackGymError

__all__ = [
    "CURRENT",
    "REGISTRY_FILE",
    "RegistryState",
    "Serving",
    "Version",
    "VersionRegistry",
    "VersionRejected",
    "open_registry",
    "route",
    "version_name",
    "version_number",
]

REGISTRY_FILE = "registry.json"
"""The registry's one file, in its folder."""
CURRENT = "current"
"""A model server's ``NAME@current``: the current version, or the canary for its share."""


class VersionRejected(FeedbackGymError, ValueError):
    """A version cannot take traffic: it failed validation, or there is no such version."""


@dataclass(frozen=True)
class Version:
    """One saved adapter.

    Attributes:
        number: The version's number (1, 2, ...).
        path: Its folder, relative to the registry's.
        round: The training round it was saved after.
        passed: Whether it passed its validation (only those are promoted).
        validation: Its validation (``success``, ``success_unguided``, ...).
        created: When it was added (seconds since the epoch).
    """

    number: int
    path: str
    round: int
    passed: bool
    validation: dict[str, float] = field(default_factory=dict)
    created: float = 0.0


@dataclass(frozen=True)
class Serving:
    """What a server serves: the current version, and a canary with its share.

    Attributes:
        current: The promoted version's number (``None``: the base model alone).
        current_path: Its adapter folder (absolute), or ``None``.
        canary: The canary version's number, or ``None``.
        canary_path: Its adapter folder (absolute), or ``None``.
        share: The share of requests the canary answers (0 without one).
    """

    current: int | None
    current_path: str | None
    canary: int | None = None
    canary_path: str | None = None
    share: float = 0.0


@dataclass
class RegistryState:
    """The content of ``registry.json``."""

    versions: list[Version] = field(default_factory=list)
    current: int | None = None
    canary: dict[str, Any] | None = None
    history: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> str:
        """The state as ``registry.json`` holds it."""
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RegistryState:
        """Reads ``registry.json``."""
        data = json.loads(text)
        return cls(
            versions=[Version(**v) for v in data.get("versions", [])],
            current=data.get("current"),
            canary=data.get("canary"),
            history=list(data.get("history", [])),
        )


def _promotions(history: list[dict[str, Any]]) -> list[int]:
    """The promoted versions still on the way back: a rollback to one drops those after it."""
    chain: list[int] = []
    for event in history:
        version = event["version"]
        if event["event"] == "promote":
            chain.append(version)
        elif event["event"] == "rollback":
            if version in chain:
                del chain[chain.index(version) + 1 :]
            else:
                chain.append(version)
    return chain


def route(serving: Serving, key: str) -> int | None:
    """The version that answers the request ``key``: the canary for its share, else the current.

    The same key always gets the same version (a hash of the key, not a coin),
    so one conversation stays on one version.

    Example:
        >>> route(Serving(1, "/v1", 2, "/v2", share=0.0), "a"), route(Serving(1, "/v1"), "a")
        (1, 1)
    """
    if serving.canary is None or serving.share <= 0:
        return serving.current
    digest = hashlib.sha256(key.encode()).digest()
    draw = int.from_bytes(digest[:8], "big") / 2**64
    return serving.canary if draw < serving.share else serving.current


def open_registry(path: str | os.PathLike[str]) -> VersionRegistry:
    """The registry at ``path``: a run directory (its ``versions/``) or the registry's folder.

    Raises:
        ConfigError: Neither holds a ``registry.json``.

    Example:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp())
        >>> _ = VersionRegistry(run / "versions").add(lambda folder: None, round=0, validation={})
        >>> [version.number for version in open_registry(run).versions()]
        [1]
    """
    source = Path(path).expanduser()
    for root in (source, source / "versions"):
        if (root / REGISTRY_FILE).is_file():
            return VersionRegistry(root)
    raise ConfigError(
        f"{source}: no version registry ({REGISTRY_FILE} in it or in its versions/; "
        "a train-llm run directory has one once it has saved a version)"
    )


def version_name(model: str, version: int | str) -> str:
    """The name a model server gives version ``version`` (a number or ``"current"``) of ``model``.

    Example:
        >>> version_name("gemma", 2), version_name("gemma", "current")
        ('gemma@v2', 'gemma@current')
    """
    return f"{model}@{version if version == CURRENT else f'v{int(version)}'}"


def version_number(name: str, model: str) -> int | None:
    """The version a served name ``model@vN`` names (``None``: not a numbered version).

    Raises:
        ConfigError: ``name`` is ``model@...`` but no version's name.

    Example:
        >>> version_number("gemma@v2", "gemma"), version_number("gemma@current", "gemma")
        (2, None)
    """
    prefix = f"{model}@v"
    if not name.startswith(prefix):
        if name.startswith(f"{model}@") and name != version_name(model, CURRENT):
            raise ConfigError(f"{name}: not a served name ({model}@vN or {model}@{CURRENT})")
        return None
    digits = name[len(prefix) :]
    if not digits.isdigit():
        raise ConfigError(f"{name}: not a served name ({model}@vN or {model}@{CURRENT})")
    return int(digits)


class VersionRegistry:
    """The versions of one run, in the folder ``root`` (made if missing).

    Args:
        root: The registry's folder (a run's ``versions/``).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.file = self.root / REGISTRY_FILE

    @property
    def state(self) -> RegistryState:
        """``registry.json`` as it is now (empty when there is none yet)."""
        if not self.file.exists():
            return RegistryState()
        try:
            return RegistryState.from_json(self.file.read_text())
        except (ValueError, TypeError, KeyError) as error:
            raise ConfigError(f"{self.file}: not a version registry ({error})") from None

    def _write(self, state: RegistryState) -> RegistryState:
        tmp = self.file.with_name(self.file.name + ".tmp")
        tmp.write_text(state.to_json())
        tmp.replace(self.file)
        return state

    def _event(self, state: RegistryState, event: str, version: int | None, **more: Any) -> None:
        state.history.append({"event": event, "version": version, "time": time.time(), **more})

    def versions(self) -> list[Version]:
        """Every version, oldest first."""
        return list(self.state.versions)

    def get(self, number: int) -> Version:
        """Version ``number``.

        Raises:
            VersionRejected: There is no such version.
        """
        for version in self.state.versions:
            if version.number == number:
                return version
        raise VersionRejected(f"no version {number} in {self.root}")

    def path(self, number: int) -> Path:
        """Version ``number``'s adapter folder."""
        return self.root / self.get(number).path

    def add(
        self,
        save: Callable[[Path], None],
        *,
        round: int,
        validation: dict[str, float],
        passed: bool = True,
    ) -> Version:
        """Saves a new version: ``save(folder)`` writes the adapter, then the registry lists it.

        Args:
            save: Writes the adapter into the folder given (made for it).
            round: The training round it comes from.
            validation: Its validation results.
            passed: Whether it passed validation (a failed one can never be promoted).
        """
        state = self.state
        number = max((v.number for v in state.versions), default=0) + 1
        folder = self.root / f"v{number:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        save(folder)  # the files are in place before the registry names them
        version = Version(number, folder.name, round, passed, dict(validation), time.time())
        state.versions.append(version)
        self._event(state, "add", number, passed=passed)
        self._write(state)
        return version

    def _promotable(self, number: int) -> Version:
        version = self.get(number)
        if not version.passed:
            raise VersionRejected(
                f"version {number} failed its validation ({version.validation}); it is not promoted"
            )
        return version

    def promote(self, number: int) -> RegistryState:
        """Makes version ``number`` the current one (a canary of it ends).

        Raises:
            VersionRejected: It failed validation, or does not exist.
        """
        self._promotable(number)
        state = self.state
        state.current = number
        if state.canary is not None and state.canary["version"] == number:
            state.canary = None
        self._event(state, "promote", number)
        return self._write(state)

    def start_canary(self, number: int, share: float) -> RegistryState:
        """Lets version ``number`` answer ``share`` of the requests beside the current one.

        Raises:
            VersionRejected: It failed validation, or does not exist.
            ValueError: ``share`` is not in (0, 1].
        """
        if not 0 < share <= 1:
            raise ValueError(f"a canary's share must be in (0, 1], got {share}")
        self._promotable(number)
        state = self.state
        state.canary = {"version": number, "share": float(share)}
        self._event(state, "canary", number, share=float(share))
        return self._write(state)

    def end_canary(self) -> RegistryState:
        """Stops the canary: the current version answers every request again."""
        state = self.state
        ended = state.canary["version"] if state.canary else None
        state.canary = None
        self._event(state, "end-canary", ended)
        return self._write(state)

    def rollback(self, number: int | None = None) -> RegistryState:
        """Goes back to version ``number``, or to the one promoted before the current one.

        A canary ends too. Going back to a version that never passed validation is refused.

        Raises:
            VersionRejected: Nothing to go back to, or ``number`` cannot be promoted.
        """
        state = self.state
        if number is None:
            chain = _promotions(state.history)
            if len(chain) < 2:
                raise VersionRejected("no earlier promoted version to roll back to")
            number = chain[-2]
        self._promotable(number)
        state.current = number
        state.canary = None
        self._event(state, "rollback", number)
        return self._write(state)

    def serving(self) -> Serving:
        """What a server should serve now (absolute adapter folders)."""
        state = self.state
        current = state.current
        canary = state.canary
        return Serving(
            current=current,
            current_path=str(self.path(current)) if current is not None else None,
            canary=canary["version"] if canary else None,
            canary_path=str(self.path(canary["version"])) if canary else None,
            share=float(canary["share"]) if canary else 0.0,
        )
