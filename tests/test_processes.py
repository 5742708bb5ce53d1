"""Helper process pools: their priority, a process that dies, and a task that waits its turn."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from ttsfarm.core.errors import Cancelled, TransientError
from ttsfarm.core.processes import LOW_NICENESS, HelperPool


@pytest.mark.parametrize(
    ("priority", "policy", "niceness"),
    [
        ("normal", os.SCHED_OTHER, 0),
        ("low", os.SCHED_OTHER, LOW_NICENESS),
        ("idle", os.SCHED_IDLE, LOW_NICENESS),
    ],
)
def test_a_pool_runs_at_its_priority(priority: str, policy: int, niceness: int) -> None:
    pool = HelperPool(1, priority)  # type: ignore[arg-type]
    try:
        assert pool.run(os.sched_getscheduler, 0) == policy
        assert pool.run(os.nice, 0) == os.nice(0) + niceness
    finally:
        pool.close()


def test_a_killed_process_fails_its_task_as_transient_then_the_pool_recovers() -> None:
    pool = HelperPool(1, what="finishing")
    try:
        pool.start()
        (pid,) = list(pool.pool._processes)
        with pytest.raises(TransientError, match="finishing process stopped"):
            killer = threading.Timer(0.5, os.kill, (pid, signal.SIGKILL))
            killer.start()
            pool.run(time.sleep, 5)
        assert pool.restarts == 1
        assert pool.run(os.getpid) != pid
    finally:
        pool.close()


def test_a_task_waiting_for_a_process_is_cancelled_at_once() -> None:
    pool = HelperPool(1)
    try:
        busy = threading.Thread(target=pool.run, args=(time.sleep, 3))
        busy.start()
        time.sleep(0.3)
        started = time.monotonic()
        with pytest.raises(Cancelled):
            pool.run(os.getpid, cancelled=lambda: True)
        assert time.monotonic() - started < 1
        busy.join()
    finally:
        pool.close()


def test_tasks_wait_for_the_memory_they_hold() -> None:
    """Two tasks that would hold more than the pool's memory together run one after the other;
    one larger than all of it runs alone rather than never."""
    pool = HelperPool(2, memory=100)
    try:
        pool.start()
        ends: list[float] = []

        def task(holds: int) -> None:
            pool.run(time.sleep, 0.5, holds=holds)
            ends.append(time.monotonic())

        started = time.monotonic()
        runs = [threading.Thread(target=task, args=(holds,)) for holds in (80, 80)]
        for run in runs:
            run.start()
        for run in runs:
            run.join()
        assert max(ends) - started >= 1.0  # one after the other, though two processes were free
        started = time.monotonic()
        pool.run(time.sleep, 0.1, holds=500)
        assert time.monotonic() - started < 1.0
    finally:
        pool.close()
