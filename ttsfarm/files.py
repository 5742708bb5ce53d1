"""Small file helpers for outputs that must be whole or absent: atomic writes, safe names."""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from ttsfarm.errors import InvalidInput

SLUG_MAX_CHARS: Final = 40
FILE_MODE: Final = 0o666
"""Mode of finished files before the umask, as ``open()`` would give them (temp files are 0o600)."""
UMASK: Final = os.umask(0o022)
os.umask(UMASK)  # read once at import, before any thread could create files
_NOT_SLUG = re.compile(r"[^a-z0-9]+")


def slug(text: str, fallback: str) -> str:
    """A file-name-safe form of ``text``: ASCII letters, digits and single hyphens only, so it
    can never hold a path separator, ``..`` or a leading dot."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    cleaned = _NOT_SLUG.sub("-", ascii_text.lower()).strip("-")[:SLUG_MAX_CHARS].rstrip("-")
    return cleaned or fallback


def sha256_file(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


@contextmanager
def atomic_target(path: Path) -> Iterator[Path]:
    """A temp path beside ``path``, with the same extension so tools can tell the format.
    On success it replaces ``path``; on failure it is removed."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(
            dir=path.parent, prefix=f".{path.stem}.", suffix=f".partial{path.suffix}"
        )
        os.close(handle)
    except (FileExistsError, NotADirectoryError):
        raise InvalidInput(
            f"cannot write to {path.parent}: part of that path is a file, not a folder"
        ) from None
    except OSError as error:
        raise InvalidInput(f"cannot write to {path.parent}: {error.strerror or error}") from None
    temp = Path(partial)
    try:
        yield temp
        os.chmod(temp, FILE_MODE & ~UMASK)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def write_atomic(path: Path, data: bytes) -> None:
    with atomic_target(path) as temp:
        temp.write_bytes(data)
