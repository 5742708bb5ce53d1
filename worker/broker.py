"""What a worker changes in kombu's Redis transport: it outlives a Redis restart, it keeps one
Redis client per channel, and it acknowledges a message it removed itself without asking Redis.

The defect (celery 5.7, kombu 5.7): when the connection to the broker is lost while jobs run,
Celery's consumer first collects the connection (kombu drops the transport's client) and then
closes it. Closing the channel restores its unacknowledged messages through a client built from
the transport's client, which is gone: ``AttributeError: 'NoneType' object has no attribute
'hostname'``. That is not one of the errors Celery ignores while closing, so the worker logs
"Unrecoverable error" and stops. ``scripts/repro_kombu_redis_restart.py`` reproduces it with a
plain Celery app and nothing of ttsfarm; ``tests/farm/test_faults.py`` restarts Redis under a
running ttsfarm job and shows the workaround. Upstream, the same failure family was reported as
celery/kombu#582 (this AttributeError when a channel closes after its connection is gone) and
celery/kombu#970 (unacknowledged messages not restored on a restart).

The job that was running then ends, and Celery acknowledges its message on the channel of the
lost connection: the same missing client, and a second "Unrecoverable error".

Here the channel's QoS touches Redis no more once its transport's client is gone: restoring,
acknowledging and rejecting then only forget the message on the channel, and it stays in Redis's
unacknowledged set. The worker removes the message of a job that ended itself
(``worker/leases.py``); a message that was only reserved is no longer renewed, so Redis hands it
out again after the visibility timeout.

**One client per channel.** kombu builds a new ``redis.Redis`` client (over the channel's pool)
for every command it sends outside its event loop's own client: each message's entry in the
unacknowledged set, each acknowledgement, and each event published to monitors (three a job,
with ``--task-events``). Building one costs tens of microseconds, its table of response callbacks
filled anew, and it was about a tenth of a one-sentence job's interpreter time in a consumer.
:class:`Channel` keeps the client it built and builds another only when the channel's pool was
replaced (kombu drops its pools when the connection is lost). A ``redis.Redis`` is safe to share
between threads: each command takes a connection of the pool.

**Settled messages.** A job's message leaves Redis when the job ends (``Leases.settle``, before
Celery acknowledges it), so that a lost acknowledgement cannot bring it back. Its
acknowledgement then sends the same two removals again; :data:`SETTLED` lets :class:`QoS` skip
that round trip.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

log = logging.getLogger(__name__)

SETTLED: Final[set[str]] = set()
"""Delivery tags of messages this process removed from Redis itself: acknowledging one only
forgets it on its channel."""


class QoS(kombu_redis.QoS):
    """kombu's QoS for Redis, which leaves its messages in Redis when its connection is gone."""

    def _connected(self) -> bool:
        return getattr(getattr(self.channel, "connection", None), "client", None) is not None

    def ack(self, delivery_tag: str) -> None:
        if delivery_tag in SETTLED:  # removed from Redis when its job ended
            SETTLED.discard(delivery_tag)
            virtual.QoS.ack(self, delivery_tag)
        elif self._connected():
            super().ack(delivery_tag)
        else:  # an acknowledgement on a channel of a lost connection: the worker settles it
            virtual.QoS.ack(self, delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        SETTLED.discard(delivery_tag)  # not one that ended (those are acknowledged), but never kept
        if self._connected():
            super().reject(delivery_tag, requeue)
        else:  # it stays in Redis and is handed out again after the visibility timeout
            virtual.QoS.ack(self, delivery_tag)

    def restore_unacked(self, client: Any = None) -> None:
        if client is None and not self._connected():
            if self._delivered:
                log.warning(
                    "the broker connection is gone: %d message(s) stay in Redis, settled when their "
                    "jobs end or handed out again after the visibility timeout",
                    len(self._delivered),
                )
            self._delivered.clear()
            return
        super().restore_unacked(client)


class Channel(kombu_redis.Channel):
    """kombu's channel for Redis with :class:`QoS`, which keeps the client it sends commands with."""

    QoS = QoS
    _kept_client: Any = None

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:  # the event loop's client, which kombu keeps itself
            return super()._create_client(asynchronous=True)
        kept = self._kept_client
        if kept is None or kept.connection_pool is not self.pool:
            kept = self._kept_client = super()._create_client()
        return kept


def install() -> None:
    """Use :class:`Channel` for every Redis connection of this process (a worker's)."""
    kombu_redis.Transport.Channel = Channel
