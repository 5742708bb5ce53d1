"""Small file helpers for outputs that must be whole or absent: atomic writes, safe names."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import tempfile
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Final

from ttsfarm.core.errors import InvalidInput, StorageUnavailable, TtsfarmError

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
        return sha256_and_size(handle)[0]


def sha256_and_size(handle: IO[bytes]) -> tuple[str, int]:
    """The SHA-256 and size of everything in an open file, read from its start; it is left at
    its start for the next reader."""
    handle.seek(0)
    digest = hashlib.file_digest(handle, "sha256").hexdigest()  # type: ignore[arg-type]  # IO lacks readinto
    size = handle.tell()  # read to its end
    handle.seek(0)
    return digest, size


PASSING_ERRNOS: Final = frozenset(
    {
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EIO,
        errno.EAGAIN,
        errno.EBUSY,
        errno.EMFILE,
        errno.ENFILE,
        errno.ENOMEM,
    }
)
"""Write failures of the disk, not of the path: full, over quota, an I/O error, out of handles.
They pass (space is freed, the disk comes back), so they are transient and the job is retried."""


def write_error(where: Path | str, error: OSError) -> TtsfarmError:
    """The error to raise for ``error`` while writing ``where``: :class:`StorageUnavailable`
    (transient) for a full or failing disk, :class:`InvalidInput` for a path that cannot be
    written (missing folder, no permission) until it is changed."""
    message = f"cannot write {where}: {error.strerror or error}"
    return StorageUnavailable(message) if error.errno in PASSING_ERRNOS else InvalidInput(message)


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
        raise write_error(f"to {path.parent}", error) from None
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
