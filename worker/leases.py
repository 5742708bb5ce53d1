"""Keeping the messages of running jobs from being handed out again while their worker lives.

Celery's Redis transport hands an unacknowledged message to another worker once it has been
out for the visibility timeout. That is how the job of a killed worker comes back, and also how
a live worker's long job used to run twice. Here a thread of the worker renews each running
job's delivery time (its score in the transport's ``unacked_index``) every fraction of the
timeout, so the timeout only needs to cover a worker that stopped renewing (killed, frozen, cut
off from Redis), not the longest job: a short timeout brings a dead worker's jobs back soon.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Final

import redis
from kombu.transport.redis import Channel

from ttsfarm.farm.registry import connect
from worker.broker import SETTLED

log = logging.getLogger(__name__)

RENEWALS_PER_TIMEOUT: Final = 4
"""A lease is renewed this many times per visibility timeout: three renewals may fail (a Redis
blip) before another worker could take the job."""
MAX_RENEW_INTERVAL_SECONDS: Final = 60.0
HELD_GRACE_SECONDS: Final = 1.0
"""A message taken this recently is renewed even if Celery does not list its request yet."""
INDEX_KEY: Final[str] = Channel.unacked_index_key
MESSAGES_KEY: Final[str] = Channel.unacked_key


class Leases:
    """Renews the delivery time of the messages of the jobs running in this process."""

    def __init__(
        self,
        broker_url: str,
        visibility_timeout: float,
        tls: Mapping[str, str] | None = None,
        held: Callable[[str], bool] | None = None,
    ) -> None:
        self.interval = min(MAX_RENEW_INTERVAL_SECONDS, max(0.2, visibility_timeout / RENEWALS_PER_TIMEOUT))
        self._redis = connect(broker_url, tls)
        self._held = held
        """Whether the worker still holds a task id's request: after a lost connection it drops
        those it had not started, and their messages must then come back, not stay leased."""
        self._tags: dict[str, str] = {}
        """Delivery tags of the messages this worker holds, by task id."""
        self._since: dict[str, float] = {}
        """When each was taken: Celery records a request a moment after it says it received it."""
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ttsfarm-leases", daemon=True)
        self._thread.start()

    def hold(self, task_id: str, delivery_tag: str | None) -> None:
        """Keep this message leased from now until :meth:`release` (no tag: nothing to keep)."""
        if delivery_tag:
            with self._lock:
                self._tags[task_id] = delivery_tag
                self._since[task_id] = time.monotonic()

    def release(self, task_id: str) -> None:
        with self._lock:
            self._tags.pop(task_id, None)
            self._since.pop(task_id, None)

    def settle(self, task_id: str) -> None:
        """The job ended for good: its message leaves Redis now, as its acknowledgement would take
        it. The acknowledgement itself is lost when the connection it came on is gone (a Redis
        restart), and the message would come back after the visibility timeout."""
        with self._lock:
            tag = self._tags.pop(task_id, None)
            self._since.pop(task_id, None)
        if tag is None:
            return
        try:
            pipe = self._redis.pipeline()
            pipe.zrem(INDEX_KEY, tag)
            pipe.hdel(MESSAGES_KEY, tag)
            pipe.execute()
        except redis.exceptions.RedisError as error:  # the acknowledgement may still land
            log.warning("could not settle the message of job %s: %s", task_id, error)
        else:
            SETTLED.add(tag)  # its acknowledgement need not remove it again

    def renew(self) -> int:
        """Renew every held lease now; how many messages were still out (acknowledged ones are
        not brought back: ``XX`` only updates members that exist)."""
        with self._lock:
            if self._held is not None:
                settled_in = time.monotonic() - HELD_GRACE_SECONDS
                dropped = [t for t in self._tags if self._since[t] < settled_in and not self._held(t)]
                for task_id in dropped:  # dropped by the worker: let it come back
                    del self._tags[task_id], self._since[task_id]
            tags = list(self._tags.values())
        if not tags:
            return 0
        now = time.time()
        return int(self._redis.zadd(INDEX_KEY, dict.fromkeys(tags, now), xx=True, ch=True) or 0)

    def _loop(self) -> None:
        while not self._wake.wait(self.interval):
            try:
                self.renew()
            except redis.exceptions.RedisError as error:  # the next beat tries again
                log.warning("could not renew the leases of running jobs: %s", error)

    def close(self) -> None:
        self._wake.set()
        self._thread.join()
