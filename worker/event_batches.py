"""Task events for monitors (Flower) sent in batches, and none lost when the worker stops.

With ``--task-events`` a job makes three events (received, started, succeeded). Celery buffers
them and publishes what is buffered as one message, but it asks its event loop to publish
after every single event, so each event was a message of its own: the largest part of a
one-sentence job's interpreter time in a consumer on 2 CPU cores (decision 0046). This
consumer publishes at most every :data:`EVENTS_FLUSH_SECONDS`, all events buffered by then in
one message (Celery's own ``task.multi`` batches, which its event receivers and Flower read).

Events held back for a moment must not be lost where the loop stops before the moment ends:
Flower would show their jobs started for good. When the worker shuts down (every job has ended
by then) and when its broker connection is lost (before Celery drops its event dispatcher, which
keeps only what it failed to send), :class:`Consumer` sends what is buffered first; what cannot
reach the broker is kept and sent once the connection is back.
"""

from __future__ import annotations

from typing import Final

from celery.worker.consumer import Consumer as CeleryConsumer

EVENTS_FLUSH_SECONDS: Final = 0.1
"""Longest time a task event waits to be published: Flower's view is this much later at most."""


class Consumer(CeleryConsumer):  # type: ignore[misc]
    """Celery's consumer, publishing task events in batches (``worker_consumer`` setting)."""

    _flush_armed = False

    def on_send_event_buffered(self) -> None:
        """An event was buffered (in a job's thread): publish within EVENTS_FLUSH_SECONDS."""
        if self.hub is not None and not self._flush_armed:
            self._flush_armed = True
            self.hub.call_soon(self._arm_flush)  # the loop's timers belong to the loop's thread

    def _arm_flush(self) -> None:
        self.hub.call_later(EVENTS_FLUSH_SECONDS, self._flush_batch)

    def _flush_batch(self) -> None:
        self._flush_armed = False  # first: an event buffered while this publishes arms the next
        self._flush_events()

    def on_close(self) -> None:
        """The connection was lost: what is buffered goes to the dispatcher's outbound buffer,
        which Celery carries to the next one (a group buffer it would drop)."""
        try:
            self._flush_events()
        finally:
            self._flush_armed = False  # a flush armed before is not relied on across the reconnect
            super().on_close()

    def shutdown(self) -> None:
        try:
            self._flush_events()  # every job has ended by now: their last events
        finally:
            super().shutdown()
