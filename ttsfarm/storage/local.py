"""Storage in a local folder: each write goes to a temp file first, then is renamed into place."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from ttsfarm.core.errors import InvalidInput, JobNotFound, StorageRejected, TtsfarmError
from ttsfarm.core.files import atomic_target, sha256_file, write_atomic, write_error
from ttsfarm.storage.base import StoredObject, read_chunks


class LocalStorage:
    """Files under one folder; writes go to a temp file first, then are renamed into place."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._resolved_root = self.root.resolve()  # once: resolving costs a look at every folder above

    def _path(self, key: str) -> Path:
        # By name: ".." cannot climb out. A link inside the folder is followed (only whoever
        # runs the storage can make one).
        path = Path(os.path.normpath(self._resolved_root / key))
        if not path.is_relative_to(self._resolved_root):
            raise ValueError(f"storage key {key!r} leaves the storage folder")
        return path

    def put(
        self, source: Path | IO[bytes], key: str, content_type: str = "", sha256: str = ""
    ) -> StoredObject:
        target = self._path(key)
        try:
            _copy_atomically(source, target)
        except InvalidInput as error:
            raise _rejected(error) from None
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
            raise _rejected(write_error(target, error)) from None
        except InvalidInput as error:
            raise _rejected(error) from None

    def get_bytes(self, key: str) -> bytes | None:
        path = self._path(key)
        return path.read_bytes() if path.is_file() else None

    def stream(self, key: str, first: int = 0, last: int | None = None) -> Iterator[bytes]:
        path = self._path(key)
        try:
            handle = path.open("rb")
        except (FileNotFoundError, IsADirectoryError):
            raise JobNotFound(f"{key} is not in the storage folder (was it moved or deleted?)") from None
        handle.seek(first)
        return read_chunks(handle, None if last is None else last - first + 1)

    def delete(self, key: str) -> None:
        try:
            self._path(key).unlink(missing_ok=True)
        except OSError as error:
            raise _rejected(write_error(self._path(key), error)) from None

    def download_url(self, key: str) -> str | None:
        return None


def _rejected(error: TtsfarmError) -> TtsfarmError:
    """A write the storage folder refuses until it is changed (read-only, no permission, a file
    where a folder should be) is the storage's fault, not the request's: :class:`StorageRejected`.
    A full disk stays transient."""
    return (
        StorageRejected(f"the storage folder refused a write: {error}")
        if isinstance(error, InvalidInput)
        else error
    )


def _copy_atomically(source: Path | IO[bytes], target: Path) -> None:
    """Copy to a temp file beside ``target``, then rename: readers see all of it or none."""
    try:
        with atomic_target(target) as temp:
            if isinstance(source, Path):
                shutil.copyfile(source, temp)
            else:
                source.seek(0)
                with temp.open("wb") as copy:
                    shutil.copyfileobj(source, copy)
    except OSError as error:
        raise write_error(target, error) from None
