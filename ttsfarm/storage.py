"""Where finished audio goes: a local folder, or S3-compatible storage (see ``ttsfarm.s3``)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final, Protocol

from ttsfarm.errors import InvalidInput, JobNotFound
from ttsfarm.files import atomic_target, sha256_file, write_atomic
from ttsfarm.settings import Settings

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

    def put(self, source: Path, key: str, content_type: str, sha256: str) -> StoredObject: ...

    def fetch(self, key: str, target: Path) -> None: ...

    def exists(self, key: str, sha256: str | None = None) -> bool: ...

    def put_bytes(self, data: bytes, key: str, content_type: str) -> None: ...

    def get_bytes(self, key: str) -> bytes | None: ...

    def stream(self, key: str) -> Iterator[bytes]:
        """The object's bytes in pieces. The object is opened before this returns, so a missing
        one is :class:`JobNotFound` here, not halfway through a response."""
        ...

    def download_url(self, key: str) -> str | None:
        """A URL that hands the object to whoever holds it (presigned for S3), or ``None`` where
        the backend has none (a local folder)."""
        ...


class LocalStorage:
    """Files under one folder; writes go to a temp file first, then are renamed into place."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise ValueError(f"storage key {key!r} leaves the storage folder")
        return path

    def put(self, source: Path, key: str, content_type: str = "", sha256: str = "") -> StoredObject:
        target = self._path(key)
        _copy_atomically(source, target)
        return StoredObject(location=str(target), url=None)

    def fetch(self, key: str, target: Path) -> None:
        source = self._path(key)
        if not source.is_file():
            raise JobNotFound(f"{source} is not in the storage folder (was it moved or deleted?)")
        _copy_atomically(source, target)

    def exists(self, key: str, sha256: str | None = None) -> bool:
        path = self._path(key)
        return path.is_file() and (sha256 is None or sha256_file(path) == sha256)

    def put_bytes(self, data: bytes, key: str, content_type: str = "") -> None:
        target = self._path(key)
        try:
            write_atomic(target, data)
        except OSError as error:
            raise InvalidInput(f"cannot write {target}: {error.strerror}") from None

    def get_bytes(self, key: str) -> bytes | None:
        path = self._path(key)
        return path.read_bytes() if path.is_file() else None

    def stream(self, key: str) -> Iterator[bytes]:
        path = self._path(key)
        try:
            handle = path.open("rb")
        except (FileNotFoundError, IsADirectoryError):
            raise JobNotFound(f"{key} is not in the storage folder (was it moved or deleted?)") from None
        return read_chunks(handle)

    def download_url(self, key: str) -> str | None:
        return None


def open_storage(settings: Settings, create_bucket: bool = False) -> Storage:
    """The backend ``settings.storage_url`` names: ``s3://bucket/prefix`` or a local folder.
    With ``create_bucket`` and ``settings.s3_create_bucket``, a missing bucket is made."""
    if settings.storage_url.startswith("s3://"):
        from ttsfarm.s3 import S3Storage, make_client, parse_s3_url

        bucket, prefix = parse_s3_url(settings.storage_url)
        client = make_client(settings.s3_endpoint_url, settings.s3_region)
        storage = S3Storage(client, bucket, prefix, settings.presign_seconds)
        if create_bucket and settings.s3_create_bucket:
            storage.ensure_bucket()
        return storage
    return LocalStorage(settings.storage_url)


def read_chunks(handle: BinaryIO) -> Iterator[bytes]:
    """Yield a file's bytes in :data:`STREAM_CHUNK_BYTES` pieces, closing it at the end (or when
    the reader stops early)."""
    with handle:
        while chunk := handle.read(STREAM_CHUNK_BYTES):
            yield chunk


def storage_at(
    location: str, settings: Settings, opened: dict[str, Storage] | None = None
) -> tuple[Storage, str]:
    """The storage that holds ``location`` (where a job's result says its audio is), and the
    key there: a job is fetched from where its worker put it, whatever this side's
    ``storage_url`` says. S3 credentials and endpoint come from ``settings``. ``opened`` keeps
    the storages made so far, one per bucket or folder, for the next call to reuse."""
    opened = {} if opened is None else opened
    if location.startswith("s3://"):
        from ttsfarm.s3 import S3Storage, make_client, parse_s3_url

        bucket, key = parse_s3_url(location)
        key = key.rstrip("/")  # parse_s3_url reads a prefix; this is an object's key
        root = f"s3://{bucket}"
        if root not in opened:
            client = make_client(settings.s3_endpoint_url, settings.s3_region)
            opened[root] = S3Storage(client, bucket, "", settings.presign_seconds)
        return opened[root], key
    path = Path(location)
    if str(path.parent) not in opened:
        opened[str(path.parent)] = LocalStorage(path.parent)
    return opened[str(path.parent)], path.name


def _copy_atomically(source: Path, target: Path) -> None:
    """Copy to a temp file beside ``target``, then rename: readers see all of it or none."""
    try:
        with atomic_target(target) as temp:
            shutil.copyfile(source, temp)
    except OSError as error:
        raise InvalidInput(f"cannot write {target}: {error.strerror}") from None
