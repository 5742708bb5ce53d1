"""Job temp space that a killed worker does not leak: temp files without a name, and folders.

A job's audio is encoded into a temp file without a name (:func:`job_file`): there is nothing
to create or remove around it, and the kernel frees it however the process ends.

Where a file needs a name (another process masters it), the job gets a folder ``ttsfarm-XXXX``
with a lock file ``ttsfarm-XXXX.lock`` beside it, locked (``flock``) by the process that uses
the folder. The kernel drops the lock when that process ends, however it ends, so a folder whose
lock can be taken belongs to no live process: a worker removes such folders when it starts.
Workers that share a temp folder (on one host, or in containers sharing a volume) never remove
each other's live folders.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Final

from ttsfarm.core.errors import TempSpaceUnavailable, TtsfarmError

log = logging.getLogger(__name__)

TEMP_PREFIX: Final = "ttsfarm-"
LOCK_SUFFIX: Final = ".lock"
LOW_SPACE_BYTES: Final = 16 * 2**20
"""Below this much free space, a write that failed in a job's file or folder is taken for a full disk:
libsndfile and encoders report one as a bare "System error"."""


@contextmanager
def job_folder(parent: str | None = None) -> Iterator[Path]:
    """A fresh temp folder under ``parent`` (the system's temp folder by default), locked to
    this process while it is in use, and removed with its lock file afterwards.

    A failure that came from the disk under it (full, over quota, read-only) is raised as
    :class:`TempSpaceUnavailable`: it passes when space is freed, so the job is retried."""
    with _space_errors_named(parent):
        fd, lock = _locked_file(parent)
    folder = Path(lock.removesuffix(LOCK_SUFFIX))
    try:
        # looked at before the folder goes: what the job wrote still fills the disk
        with _space_errors_named(parent, folder):
            folder.mkdir()
            yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        Path(lock).unlink(missing_ok=True)
        os.close(fd)  # last: the lock guards the folder until it is gone


@contextmanager
def job_file(parent: str | None = None) -> Iterator[IO[bytes]]:
    """An open temp file without a name under ``parent`` (the system's temp folder by default):
    nothing to remove, and nothing left behind however the process ends. A failure that came
    from the disk under it is raised as :class:`TempSpaceUnavailable`, as :func:`job_folder` does."""
    with _space_errors_named(parent):
        file = tempfile.TemporaryFile(dir=parent)  # noqa: SIM115 - closed below, after the look
    # The file closes last: a failure is looked at while what the job wrote still fills the disk.
    with file, _space_errors_named(parent):
        yield file


@contextmanager
def _space_errors_named(parent: str | None, folder: Path | None = None) -> Iterator[None]:
    """Raise a failure that came from the temp disk (full, over quota, read-only) as
    :class:`TempSpaceUnavailable`: it passes when space is freed, so the job is retried."""
    try:
        yield
    except Exception as error:
        where = parent or tempfile.gettempdir()
        fault = None if isinstance(error, TtsfarmError) else _space_error(where, error, folder)
        if fault is None:
            raise
        raise fault from error


def _space_error(where: str, error: Exception, folder: Path | None = None) -> TempSpaceUnavailable | None:
    """The :class:`TempSpaceUnavailable` to raise for ``error`` if the temp disk caused it."""
    code = error.errno if isinstance(error, OSError) else None
    full, read_only = code in (errno.ENOSPC, errno.EDQUOT), code == errno.EROFS
    if code is None or not (full or read_only):
        try:
            stats = os.statvfs(folder or where)
        except OSError:
            return None
        read_only = bool(stats.f_flag & os.ST_RDONLY)
        full = stats.f_bavail * stats.f_frsize < LOW_SPACE_BYTES
    if read_only:
        state = "read-only"
    elif full:
        state = "full"
    else:
        return None
    return TempSpaceUnavailable(
        f"the temp folder {where} is {state} (TTSFARM_TEMP_DIR), so the job could not be written "
        f"there ({type(error).__name__}: {error}): free space on that disk or point TTSFARM_TEMP_DIR "
        "at a larger one; the job is retried"
    )


def sweep(parent: str | None = None) -> int:
    """Remove the job folders under ``parent`` whose process is gone; returns how many."""
    removed = 0
    for lock in Path(parent or tempfile.gettempdir()).glob(f"{TEMP_PREFIX}*{LOCK_SUFFIX}"):
        try:
            fd = os.open(lock, os.O_RDWR)
        except OSError:
            continue  # removed meanwhile by its owner, or not ours to open
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its process is alive
            if not _still_at(fd, str(lock)):
                continue  # its owner finished and removed it meanwhile
            shutil.rmtree(lock.with_name(lock.name.removesuffix(LOCK_SUFFIX)), ignore_errors=True)
            lock.unlink(missing_ok=True)
            removed += 1
        finally:
            os.close(fd)
    if removed:
        log.info("removed %d temp folders left by processes that died", removed)
    return removed


def _locked_file(parent: str | None) -> tuple[int, str]:
    """A new lock file, locked. A sweep may take a file between its creation and the lock and
    remove it: then it is made again."""
    while True:
        fd, path = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=LOCK_SUFFIX, dir=parent)
        fcntl.flock(fd, fcntl.LOCK_EX)
        if _still_at(fd, path):
            return fd, path
        os.close(fd)


def _still_at(fd: int, path: str) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (not removed, not replaced)."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False
