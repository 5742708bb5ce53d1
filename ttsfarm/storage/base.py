"""What every storage backend is: :class:`Storage`, the object it returns, and reading in chunks."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final, Protocol

STREAM_CHUNK_BYTES: Final = 64 * 1024
"""Size of the pieces :meth:`Storage.stream` yields."""


@dataclass(frozen=True)
class StoredObject:
    """Where an uploaded file now lives."""

    location: str
    """A local path or an ``s3://bucket/key`` URI."""
    url: str | None
    """A URL a client can fetch it from, if the backend has one."""


class Storage(Protocol):
    """A place to put finished audio under a key, atomically: whole or not at all."""

    def put(self, source: Path | IO[bytes], key: str, content_type: str, sha256: str) -> StoredObject:
        """Store a file, or everything in an open one (read from its start), under ``key``;
        ``sha256`` is its digest, kept with it."""
        ...

    def fetch(self, key: str, target: Path) -> None: ...

    def exists(self, key: str, sha256: str | None = None) -> bool: ...

    def put_bytes(self, data: bytes, key: str, content_type: str) -> None: ...

    def get_bytes(self, key: str) -> bytes | None: ...

    def delete(self, key: str) -> None:
        """Remove the object under ``key`` if there is one."""
        ...

    def stream(self, key: str, first: int = 0, last: int | None = None) -> Iterator[bytes]:
        """The object's bytes from ``first`` to ``last`` (inclusive; ``None``: to the end), in
        pieces. The object is opened before this returns, so a missing one is
        :class:`JobNotFound` here, not halfway through a response."""
        ...

    def download_url(self, key: str) -> str | None:
        """A URL that hands the object to whoever holds it (presigned for S3), or ``None`` where
        the backend has none (a local folder)."""
        ...


def read_chunks(handle: IO[bytes], size: int | None = None) -> Iterator[bytes]:
    """Yield a file's bytes (``size`` of them at most, from where it stands) in
    :data:`STREAM_CHUNK_BYTES` pieces, closing it at the end (or when the reader stops early)."""
    left = size
    with handle:
        while left is None or left > 0:
            chunk = handle.read(STREAM_CHUNK_BYTES if left is None else min(left, STREAM_CHUNK_BYTES))
            if not chunk:
                return
            left = None if left is None else left - len(chunk)
            yield chunk
