"""Work an engine does in a thread of its own while its batches run: its preparation (the
sessions and graphs of every bucket), then the graph captures its batches ask for, one at a
time, in the order asked. A worker takes jobs as soon as its engine is loaded; what is not
prepared yet is built by the first batch that needs it
(docs/decisions/0042-prepared-while-jobs-run.md). Closing it (a worker that stops) skips
what waits and ends the step under way at its next check."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class Background:
    """One thread, started with the first work, that runs what it is given in order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._pool: ThreadPoolExecutor | None = None
        self._asked: set[Hashable] = set()
        self._lock = threading.Lock()
        self._closed = False

    @property
    def open(self) -> bool:
        """Not closed: long work checks this between its steps, and stops once it is false."""
        return not self._closed

    def submit(self, work: Callable[[], T], what: str) -> Future[T | None]:
        """Run ``work`` after everything given before (nothing, once closed: the future comes
        back cancelled). Its error is logged (batches go on without it) and kept in the future."""

        def step() -> T | None:
            try:
                return work()
            except Exception:
                log.exception("%s failed; batches go on without it", what)
                raise

        with self._lock:
            if self._closed:
                skipped: Future[T | None] = Future()
                skipped.cancel()
                return skipped
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix=self.name)
            return self._pool.submit(step)

    def close(self) -> None:
        """Take nothing more, drop what waits, and wait for the step under way (which stops at
        its next check of :attr:`open`)."""
        with self._lock:
            self._closed = True
            pool = self._pool
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def ask(self, key: Hashable, work: Callable[[], object], what: str) -> None:
        """:meth:`submit` ``work`` unless it was asked for under ``key`` and has not succeeded
        since: one that failed is not tried again."""
        with self._lock:
            if key in self._asked:
                return
            self._asked.add(key)
        future = self.submit(work, what)
        future.add_done_callback(
            lambda done: self._succeeded(key) if not done.cancelled() and done.exception() is None else None
        )

    def _succeeded(self, key: Hashable) -> None:
        with self._lock:
            self._asked.discard(key)
