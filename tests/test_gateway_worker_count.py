"""The gateway's worker count: a request never waits for a ping while workers were seen."""

from __future__ import annotations

import threading
import time

import pytest

from gateway import farm
from gateway.farm import WorkerCount


class SlowPings:
    """Celery's broadcast ping, the outer edge here: it answers after ``seconds`` with the
    workers of the moment, and counts how often it was asked."""

    def __init__(self, workers: int, seconds: float) -> None:
        self.workers_now, self.seconds, self.pings = workers, seconds, 0
        self.answered = threading.Event()

    def ping(self) -> None:
        pass

    def workers(self, timeout: float) -> list[str]:
        self.pings += 1
        time.sleep(self.seconds)
        self.answered.set()
        return [f"worker{n}" for n in range(self.workers_now)]


def timed(count: WorkerCount) -> tuple[int, float]:
    started = time.monotonic()
    return count(), time.monotonic() - started


def test_an_old_count_is_answered_at_once_and_renewed_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(farm, "READY_CACHE_SECONDS", 0.2)
    pings = SlowPings(workers=2, seconds=0.5)
    count = WorkerCount(pings)  # type: ignore[arg-type]
    assert timed(count)[0] == 2 and pings.pings == 1  # the first look waits for its ping
    assert timed(count)[1] < 0.05 and pings.pings == 1  # then the count is kept
    time.sleep(0.25)
    pings.workers_now, pings.answered = 3, threading.Event()
    seen, took = timed(count)
    assert (seen, took < 0.05) == (2, True)  # stale: the old count, at once
    assert pings.answered.wait(5)
    time.sleep(0.05)
    assert count() == 3 and pings.pings == 2  # renewed behind the request, once


def test_with_no_worker_seen_a_request_waits_for_the_ping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(farm, "NONE_SEEN_CACHE_SECONDS", 0.1)
    pings = SlowPings(workers=0, seconds=0.2)
    count = WorkerCount(pings)  # type: ignore[arg-type]
    assert count() == 0
    pings.workers_now = 1
    seen, took = timed(count)
    assert (seen, took < 0.05) == (0, True)  # none was seen just now: answered at once
    time.sleep(0.15)  # well within READY_CACHE_SECONDS of the look that saw none
    assert timed(count)[0] == 1  # a worker that has just come up is seen by this request


def test_requests_that_wait_together_share_one_ping() -> None:
    pings = SlowPings(workers=0, seconds=0.3)
    count = WorkerCount(pings)  # type: ignore[arg-type]
    answers: list[int] = []
    waiting = [threading.Thread(target=lambda: answers.append(count())) for _ in range(5)]
    for thread in waiting:
        thread.start()
    for thread in waiting:
        thread.join()
    assert answers == [0] * 5 and pings.pings <= 2  # the first ping, and one for those behind it
