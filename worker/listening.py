"""A worker that says it is ready answers pings: its broadcast subscription is made before it says so.

Celery says "ready" (the ``worker_ready`` signal, then the log line) just before its event loop
first runs. On Redis, kombu subscribes a worker to its broadcasts (pings, ``inspect``, the
gateway's worker count) in that loop's first tick, so a ping sent as soon as a worker said ready
was published to nobody and lost whenever the loop started late (decision 0045).
:func:`listen_now` runs the loop's tick callbacks at once, from the ``worker_ready`` handler, in
the thread that runs the loop: the same calls its first tick makes (subscribe, start polling the
job queues, register the sockets), made before the line is written.
"""

from __future__ import annotations

from typing import Any


def listen_now(consumer: Any) -> None:
    """Make the first tick's subscriptions of ``consumer``'s event loop now. A consumer without
    an event loop (a transport that is not asynchronous) listens from its start already."""
    hub = getattr(consumer, "hub", None)
    if hub is None:
        return
    for tick in list(hub.on_tick):  # each is idempotent: the loop calls them on every tick
        tick()
