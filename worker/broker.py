"""A workaround we own for Celery and kombu's Redis transport: a worker that outlives a Redis
restart.

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
"""

from __future__ import annotations

import logging
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

log = logging.getLogger(__name__)


class QoS(kombu_redis.QoS):
    """kombu's QoS for Redis, which leaves its messages in Redis when its connection is gone."""

    def _connected(self) -> bool:
        return getattr(getattr(self.channel, "connection", None), "client", None) is not None

    def ack(self, delivery_tag: str) -> None:
        if self._connected():
            super().ack(delivery_tag)
        else:  # an acknowledgement on a channel of a lost connection: the worker settles it
            virtual.QoS.ack(self, delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
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


def install() -> None:
    """Use :class:`QoS` in every Redis channel of this process (a worker's)."""
    kombu_redis.Channel.QoS = QoS
