"""Pools of helper processes: work that would hold a worker's interpreter lock runs in them.

The text front end segments and phonemizes in one pool (espeak-ng and pysbd hold the lock);
mastering and encoding finished audio run in another (libebur128 and NumPy hold it, ffmpeg is a
process anyway). A pool's processes are started fresh (``spawn``: the worker has threads and
may hold a GPU context), end with the process that started them however it ends, and may run at
a lower priority, so that the work feeding the GPU always comes first (:data:`Priority`).

A task is told to stop through a flag file (:class:`StopFlag`): a pool's processes share no
memory with the job thread that waits for them.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor, wait
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Final, Literal, ParamSpec, TypeVar

from ttsfarm.core.errors import TransientError, raise_if_cancelled

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

PARENT_CHECK_SECONDS: Final = 1.0
"""How often a pool process checks that the process that started it is still there."""
STOP_POLL_SECONDS: Final = 0.5
STOP_FLAG_NAME: Final = "stop"
"""The flag file in a task's folder that tells it to stop (:meth:`HelperPool.run_in`)."""
"""How often a caller waiting for a pool's task asks whether it should stop."""


Priority = Literal["normal", "low", "idle"]
"""How a pool's processes compete for the CPU: as their parent does; ``low``: a nice of
:data:`LOW_NICENESS`; ``idle``: only on CPU time nothing else wants (Linux's ``SCHED_IDLE``, so a
thread that feeds a GPU takes its core back the moment it wakes), and ``low`` where that cannot
be had."""
LOW_NICENESS: Final = 10


def new_pool(processes: int, priority: Priority = "normal") -> ProcessPoolExecutor:
    """A pool of ``processes`` fresh interpreters that end with this process, at ``priority``."""
    context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(
        processes, context, initializer=_start_helper, initargs=(os.getpid(), priority)
    )


def _start_helper(parent: int, priority: Priority) -> None:
    """Run in each pool process: put it in a process group of its own (a terminal's Ctrl-C
    reaches the parent, which stops the tasks through their flags), set its priority, and end it
    and the programs it started (encoders) once the process that started it is gone. A worker
    killed outright (SIGKILL, the OOM killer) cannot stop its pool, and the pool's processes keep
    each other's pipes open, so they would wait for work for good."""
    os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if priority != "normal":
        os.nice(LOW_NICENESS)  # also where SCHED_IDLE is accepted and ignored (some sandboxes)
    if priority == "idle":
        with contextlib.suppress(OSError, AttributeError):  # not Linux, or a sandbox without it
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        os.killpg(0, signal.SIGKILL)  # this process and its encoders, at once

    threading.Thread(target=watch, name="ttsfarm-parent-watch", daemon=True).start()


def _ready() -> bool:
    return True


class StopFlag:
    """A file whose presence tells a task in another process to stop. The task is handed
    :meth:`is_set` and asks it between its steps."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def set(self) -> None:
        self.path.touch()

    def is_set(self) -> bool:
        return self.path.exists()


CGROUP_MEMORY_LIMIT: Final = Path("/sys/fs/cgroup/memory.max")
MEMORY_SHARE: Final = 0.5
"""The share of the memory this process may use that its helpers' tasks may hold at once."""


def memory_limit() -> int:
    """Bytes this process may use: the machine's memory, and no more than its container's limit
    (``mem_limit`` in compose, cgroup v2)."""
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        return min(physical, int(CGROUP_MEMORY_LIMIT.read_text().strip()))
    except (OSError, ValueError):  # no cgroup v2 here, or no limit ("max")
        return physical


class HelperPool:
    """A pool of helper processes shared by a process's threads; a pool whose process died is
    replaced, and the task that saw it die fails as a :class:`TransientError` (retried)."""

    def __init__(
        self, processes: int, priority: Priority = "normal", what: str = "helper", memory: int | None = None
    ) -> None:
        if processes < 1:
            raise ValueError("a pool needs at least one process")
        self.processes, self.priority, self.what = processes, priority, what
        self._lock = threading.Lock()
        self._pool = new_pool(processes, priority)
        self._places = threading.BoundedSemaphore(processes)
        """Tasks of :meth:`run` in the pool at once: one per process, so a task handed over
        starts at once, and one that waits for its turn waits here, where it can be cancelled."""
        self.memory = memory if memory is not None else int(memory_limit() * MEMORY_SHARE)
        """Bytes the tasks of :meth:`run` may hold at once, as they say (``holds``)."""
        self._held = 0
        self._memory_freed = threading.Condition()
        self.restarts = 0
        """Times a process died and the pool was replaced."""

    def start(self) -> None:
        """Start every process now rather than with the first task."""
        for future in [self._pool.submit(_ready) for _ in range(self.processes)]:
            future.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def submit(self, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """Queue ``work`` for the pool (a pool found broken is replaced first)."""
        return self._submit_to(self.pool, work, *args, **kwargs)

    def _submit_to(
        self, pool: ProcessPoolExecutor, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> Future[T]:
        try:
            return pool.submit(work, *args, **kwargs)
        except BrokenProcessPool:
            self.replace_broken(pool)
            raise TransientError(f"a {self.what} process stopped: try again") from None

    def run(
        self,
        work: Callable[..., T],
        *args: object,
        stop: StopFlag | None = None,
        cancelled: Callable[[], bool] | None = None,
        holds: int = 0,
    ) -> T:
        """Run ``work(*args)`` in the pool and return what it returns, once a process and the
        ``holds`` bytes the task will hold are free (a task larger than the pool's whole
        :attr:`memory` runs alone). While it waits, it asks ``cancelled`` (which may raise a
        worker's stop too) every half second; then ``stop`` is set, and once the task has stopped
        at its next step (so that it leaves nothing behind in folders the caller removes),
        :class:`Cancelled` is raised."""
        self._take_memory(holds, cancelled)
        try:
            return self._run(work, args, stop, cancelled)
        finally:
            with self._memory_freed:
                self._held -= holds
                self._memory_freed.notify_all()

    def run_in(
        self,
        folder: Path,
        work: Callable[..., T],
        *args: object,
        cancelled: Callable[[], bool] | None = None,
        holds: int = 0,
    ) -> T:
        """:meth:`run` ``work(*args, should_stop)``, where ``should_stop`` is a :class:`StopFlag`
        in ``folder`` (the task's own) that a cancel sets."""
        flag = StopFlag(folder / STOP_FLAG_NAME)
        return self.run(work, *args, flag.is_set, stop=flag, cancelled=cancelled, holds=holds)

    def _take_memory(self, holds: int, cancelled: Callable[[], bool] | None) -> None:
        with self._memory_freed:
            while self._held and self._held + holds > self.memory:
                self._memory_freed.wait(STOP_POLL_SECONDS)
                raise_if_cancelled(cancelled)
            self._held += holds

    def _run(
        self,
        work: Callable[..., T],
        args: tuple[object, ...],
        stop: StopFlag | None,
        cancelled: Callable[[], bool] | None,
    ) -> T:
        while not self._places.acquire(timeout=STOP_POLL_SECONDS if cancelled else None):
            raise_if_cancelled(cancelled)  # waiting for a free process: nothing to stop yet
        pool = self.pool
        try:
            future = self._submit_to(pool, work, *args)
        except BaseException:
            self._places.release()
            raise
        future.add_done_callback(lambda _: self._places.release())
        try:
            while True:
                try:
                    return future.result(timeout=STOP_POLL_SECONDS if cancelled else None)
                except FutureTimeout:
                    if cancelled is not None:
                        raise_if_cancelled(cancelled)
        except (BrokenProcessPool, CancelledError):  # it died, or a task beside it killed the pool
            self.replace_broken(pool)
            raise TransientError(f"a {self.what} process stopped while working: try again") from None
        except BaseException:
            if not future.cancel():  # running: it stops at its next step
                if stop is not None:
                    stop.set()
                wait([future])
            raise

    def replace_broken(self, broken: ProcessPoolExecutor) -> None:
        """A process died (killed, out of memory): later tasks get a new pool."""
        with self._lock:
            if self._pool is broken:
                log.error("a %s process died: starting a new pool of %d", self.what, self.processes)
                broken.shutdown(wait=False, cancel_futures=True)
                self._pool = new_pool(self.processes, self.priority)
                self.restarts += 1

    @property
    def pool(self) -> ProcessPoolExecutor:
        with self._lock:
            return self._pool
