"""The leases of running jobs' messages, against a real Redis: renewed while held, settled when
a job ends, and let go when the worker no longer holds the request."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from tests.conftest import emptied, redis_server
from worker.leases import HELD_GRACE_SECONDS, INDEX_KEY, MESSAGES_KEY, Leases

URL = f"{redis_server()}/1"  # a database of its own: emptied around each test


@pytest.fixture
def broker() -> Iterator[redis.Redis]:
    yield from emptied(URL)


def deliver(broker: redis.Redis, tag: str) -> None:
    """What kombu's Redis transport writes when it hands a message out."""
    broker.zadd(INDEX_KEY, {tag: 1.0})  # delivered long ago: overdue
    broker.hset(MESSAGES_KEY, tag, "[]")


def test_a_held_message_is_renewed_and_a_settled_one_leaves_redis(broker: redis.Redis) -> None:
    leases = Leases(URL, visibility_timeout=3600)
    try:
        deliver(broker, "tag-a")
        deliver(broker, "tag-b")
        leases.hold("job-a", "tag-a")
        leases.hold("job-b", "tag-b")
        assert leases.renew() == 2 and broker.zscore(INDEX_KEY, "tag-a") > time.time() - 10
        leases.settle("job-a")  # its job ended: the message goes, as its acknowledgement takes it
        assert broker.zscore(INDEX_KEY, "tag-a") is None and not broker.hexists(MESSAGES_KEY, "tag-a")
        assert broker.zscore(INDEX_KEY, "tag-b") is not None
    finally:
        leases.close()


def test_a_request_the_worker_dropped_is_no_longer_renewed(broker: redis.Redis) -> None:
    held = {"job-a"}
    leases = Leases(URL, visibility_timeout=3600, held=held.__contains__)
    try:
        deliver(broker, "tag-a")
        deliver(broker, "tag-b")
        leases.hold("job-a", "tag-a")
        leases.hold("job-b", "tag-b")  # just received: Celery lists it a moment later
        assert leases.renew() == 2
        time.sleep(HELD_GRACE_SECONDS + 0.1)
        broker.zadd(INDEX_KEY, {"tag-b": 1.0})
        assert leases.renew() == 1  # only job-a: job-b's message is left to come back
        assert broker.zscore(INDEX_KEY, "tag-b") == 1.0 and broker.hexists(MESSAGES_KEY, "tag-b")
    finally:
        leases.close()
