"""Job temp folders that a killed worker does not leak.

Each job's folder ``ttsfarm-XXXX`` has a lock file ``ttsfarm-XXXX.lock`` beside it, locked
(``flock``) by the process that uses the folder. The kernel drops the lock when that process
ends, however it ends, so a folder whose lock can be taken belongs to no live process: a worker
removes such folders when it starts. Workers that share a temp folder (on one host, or in
containers sharing a volume) never remove each other's live folders.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

log = logging.getLogger(__name__)

TEMP_PREFIX: Final = "ttsfarm-"
LOCK_SUFFIX: Final = ".lock"


@contextmanager
def job_folder(parent: str | None = None) -> Iterator[Path]:
    """A fresh temp folder under ``parent`` (the system's temp folder by default), locked to
    this process while it is in use, and removed with its lock file afterwards."""
    fd, lock = _locked_file(parent)
    folder = Path(lock.removesuffix(LOCK_SUFFIX))
    try:
        folder.mkdir()
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        Path(lock).unlink(missing_ok=True)
        os.close(fd)  # last: the lock guards the folder until it is gone


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
