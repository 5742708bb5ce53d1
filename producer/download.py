"""A finished job's audio copied from storage to a file, checked against its SHA-256."""

from __future__ import annotations

from pathlib import Path

from ttsfarm.core.errors import InvalidInput, StorageUnavailable
from ttsfarm.core.jobs import JobResult
from ttsfarm.storage import Storage, fetch_checked


def download(
    result: JobResult, target: str | Path, source: tuple[Storage, str], overwrite: bool = False
) -> JobResult:
    """Copy a finished job's audio from ``source`` (a storage and key: :meth:`Client.audio`, or
    :func:`~ttsfarm.storage.storage_at` its location) to ``target`` and check it against the
    job's SHA-256. An existing file is replaced only with ``overwrite``."""
    target = Path(target)
    if target.is_dir():
        raise InvalidInput(f"{target} is a folder: give a file name")
    if target.exists() and not overwrite:
        raise InvalidInput(
            f"{target} exists already: give another name, or overwrite it (--force; overwrite=True)"
        )
    if not fetch_checked(source, target, result.sha256):
        raise StorageUnavailable(f"the audio of job {result.job_id} did not arrive whole: fetch it again")
    return result
