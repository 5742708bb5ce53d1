"""What a worker changes in kombu's Redis transport (``worker/broker.py``), against a real Redis:
one client per channel, and no second removal for a message the worker settled itself."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from kombu import Connection

from tests.conftest import emptied, redis_server
from worker.broker import SETTLED, install
from worker.leases import INDEX_KEY, Leases

URL = f"{redis_server()}/13"


@pytest.fixture
def broker() -> Iterator[redis.Redis]:
    install()
    yield from emptied(URL)


class Monitor:
    """The commands Redis runs while it watches that name ``word`` (MONITOR: every client's)."""

    def __init__(self, word: str) -> None:
        self.word, self.seen, self._stop = word, [], threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        assert self._ready.wait(5)

    def _watch(self) -> None:
        with redis.Redis.from_url(URL).monitor() as monitor:
            self._ready.set()
            for command in monitor.listen():
                if self.word in command["command"]:
                    self.seen.append(command["command"].split()[0].upper())
                if self._stop.is_set():
                    return

    def stop(self) -> list[str]:
        self._stop.set()
        redis.Redis.from_url(URL).ping()  # one more command ends the watch
        self._thread.join(5)
        return self.seen


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
            watch = [Monitor(settled.delivery_tag), Monitor(plain.delivery_tag)]
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
