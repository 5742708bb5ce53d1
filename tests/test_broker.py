"""What a worker changes in kombu's Redis transport (``worker/broker.py``), against a real Redis:
one client per channel, and no second removal for a message the worker settled itself."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from kombu import Connection
from kombu.transport import redis as kombu_redis

from tests.conftest import emptied, redis_server
from tests.helpers_redis import Monitor
from worker.broker import SETTLED, Channel
from worker.leases import INDEX_KEY, Leases

URL = f"{redis_server()}/4"  # a database of its own: emptied around each test


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Iterator[redis.Redis]:
    monkeypatch.setattr(kombu_redis.Transport, "Channel", Channel)  # what install() does, undone after
    yield from emptied(URL)


def test_a_channel_keeps_its_client_until_its_pool_is_replaced(broker: redis.Redis) -> None:
    with Connection(URL) as connection:
        channel = connection.channel()
        kept = channel._create_client()
        assert channel._create_client() is kept
        channel._disconnect_pools()  # what kombu does when the connection is lost
        again = channel._create_client()
        assert again is not kept and again.connection_pool is channel.pool
        with channel.conn_or_acquire() as client:
            assert client.ping()


def test_a_settled_message_is_acknowledged_without_removing_it_again(broker: redis.Redis) -> None:
    queue = f"settle-{uuid.uuid4().hex[:8]}"
    leases = Leases(URL, visibility_timeout=3600)
    try:
        with Connection(URL) as connection, connection.SimpleQueue(queue) as simple:
            simple.put("settled first"), simple.put("acknowledged only")
            settled, plain = simple.get(timeout=5), simple.get(timeout=5)
            assert broker.zscore(INDEX_KEY, settled.delivery_tag) is not None  # out, unacknowledged
            leases.hold("job-settled", settled.delivery_tag)
            leases.settle("job-settled")
            assert broker.zscore(INDEX_KEY, settled.delivery_tag) is None
            assert settled.delivery_tag in SETTLED
            watch = [Monitor(URL, settled.delivery_tag), Monitor(URL, plain.delivery_tag)]
            settled.ack()
            plain.ack()
            deadline = time.monotonic() + 5
            while "ZREM" not in watch[1].seen and time.monotonic() < deadline:
                time.sleep(0.02)
            on_settled, on_plain = (m.stop() for m in watch)
    finally:
        leases.close()
    assert on_settled == [] and settled.delivery_tag not in SETTLED
    assert "ZREM" in on_plain and broker.zscore(INDEX_KEY, plain.delivery_tag) is None
