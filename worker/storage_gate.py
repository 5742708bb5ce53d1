"""No jobs taken while the storage cannot be written.

A worker whose storage refuses writes (a read-only folder, a bucket it may not write to, an
endpoint that is down) would fail every job it takes, draining a shared queue into failures.
Instead it stops consuming its queues, says it is not ready, probes the storage every
:data:`RECHECK_SECONDS` and consumes again once a probe passes. The probe writes and removes a
small object, as a job would store its audio.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

from ttsfarm.core.errors import StorageRejected, StorageUnavailable, TransientError, TtsfarmError
from ttsfarm.storage import Storage

T = TypeVar("T")

log = logging.getLogger(__name__)

PROBE_PREFIX: Final = ".ttsfarm-probe/"
RECHECK_SECONDS: Final = 5.0
"""How often a worker that stopped taking jobs looks at its storage again."""
LOG_EVERY_SECONDS: Final = 60.0
"""How often it says so in its log meanwhile."""


class StorageDown(TransientError):
    """A job's audio could not be stored and a probe says the storage cannot be written at all:
    the job goes back to the queue (not one of its retries) and the worker takes no jobs."""

    PUBLIC = "the worker could not store the audio: the job went back to the queue"


def probe(storage: Storage, prepare: Callable[[], None] | None = None) -> str | None:
    """Why a small object cannot be written to and removed from ``storage``; ``None`` if it can.
    ``prepare`` runs first (making the bucket, where the worker is to make it)."""
    key = f"{PROBE_PREFIX}{uuid.uuid4().hex}"
    try:
        if prepare is not None:
            prepare()
        storage.put_bytes(b"ttsfarm storage probe\n", key, "text/plain")
        storage.delete(key)
    except TtsfarmError as error:
        return str(error)
    return None


class StorageGate:
    """Whether this worker takes jobs, as far as its storage goes.

    Closed, it stops consuming ``queues`` (through the consumer's event loop, which owns them)
    and a thread probes until the storage can be written again, then opens it."""

    def __init__(
        self, storage: Callable[[], Storage], queues: Sequence[str], prepare: Callable[[], None] | None = None
    ) -> None:
        self._storage = storage
        self._prepare = prepare
        self.queues = tuple(queues)
        self._consumer: Any = None
        self._lock = threading.Lock()
        self.problem: str | None = None
        """Why the storage cannot be written, while the gate is closed."""

    def attach(self, consumer: Any) -> None:
        """Called once the worker's consumer is ready: probe, and close at once if it fails."""
        self._consumer = consumer
        problem = probe(self._storage(), self._prepare)
        if problem is not None:
            self.close(problem)

    def guard(self, job: Callable[[], T]) -> T:
        """Run ``job``; if its storage failed and a probe fails too, close the gate and raise
        :class:`StorageDown`. When the probe passes, the job's own error is raised: it failed
        on something of its own."""
        try:
            return job()
        except (StorageRejected, StorageUnavailable) as error:
            problem = probe(self._storage(), self._prepare)
            if problem is None:
                raise
            self.close(problem)
            raise StorageDown(f"its audio could not be stored: {error}") from error

    def close(self, problem: str) -> None:
        with self._lock:
            was_open, self.problem = self.problem is None, problem
        if not was_open:
            return
        log.error("storage cannot be written: taking no jobs until it can (%s)", problem)
        self._call(self._consumer.cancel_task_queue)
        threading.Thread(target=self._recheck, name="storage-gate", daemon=True).start()

    def _recheck(self) -> None:
        said = time.monotonic()
        while True:
            time.sleep(RECHECK_SECONDS)
            problem = probe(self._storage(), self._prepare)
            if problem is None:
                break
            with self._lock:
                self.problem = problem
            if time.monotonic() - said >= LOG_EVERY_SECONDS:
                log.error("storage still cannot be written: taking no jobs (%s)", problem)
                said = time.monotonic()
        with self._lock:
            self.problem = None
        log.warning("storage can be written again: taking jobs")
        self._call(self._consumer.add_task_queue)

    def _call(self, change: Callable[[str], None]) -> None:
        if self._consumer is None:  # not consuming yet: nothing to stop or start
            return
        for queue in self.queues:
            self._consumer.call_soon(change, queue)
