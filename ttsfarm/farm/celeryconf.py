"""The Celery app shared by producers and workers, with its reliability settings.

Each setting below is deliberate:

- JSON only, never pickle: messages and results are plain data anyone can read.
- Late acknowledgement + reject on worker lost: a job is removed from the queue only after
  it finished; if the worker dies mid-job the message goes back to the queue.
- Visibility timeout (Redis): an unacknowledged message is handed out again after this long.
  A worker renews the messages it holds every quarter of it (``worker/leases.py``), so a live
  worker's job is never handed out twice however long it runs; the timeout (default 15 minutes,
  ``Settings.visibility_timeout_seconds``) is how soon the job of a worker killed outright
  (power loss, SIGKILL, a frozen host) comes back.
- Prefetch multiplier 1: a worker running N jobs at a time holds at most N messages, enough
  to keep its batches full without hoarding work another worker could start.
- Events on (task sent/started/succeeded...), so Flower shows every job and its runtime.
- Priorities: kombu keeps one Redis list per step of its ``priority_steps`` (0, 3, 6, 9), and
  a worker pops them lowest step first, so an interactive job is taken before any bulk job that
  waits (:data:`MESSAGE_PRIORITIES`).
"""

from __future__ import annotations

from typing import Final

from celery import Celery
from kombu.exceptions import ChannelError, OperationalError

from ttsfarm.core.errors import SettingsError
from ttsfarm.core.settings import NO_BROKER_MESSAGE, Settings

TASK_NAME: Final = "ttsfarm.synthesize"
FINISH_TASK_NAME: Final = "ttsfarm.finish"
"""A book's chapter: its parts joined, mastered and encoded (``ttsfarm.core.finishing``)."""
FINISH_QUEUE_SUFFIX: Final = ".finish"
MESSAGE_PRIORITIES: Final = {"interactive": 0, "bulk": 6}
"""The Celery message priority each job priority (``ttsfarm.core.job_limits.PRIORITIES``) is sent with:
on Redis the lower is taken first. A message sent without one (before priorities) counts as 0."""


def finish_queue(queue: str) -> str:
    """The queue of a farm's finish jobs, beside its synthesis ``queue``. Only workers that know
    the task read it: during an upgrade, older workers leave finish jobs queued for newer ones
    rather than drop a task they do not know."""
    return queue + FINISH_QUEUE_SUFFIX


MAX_RETRIES: Final = 6
"""Retries of a job after a transient error, waiting ``retry_backoff_seconds`` (2 s) then 4, 8,
16, 32, 64 s: about two minutes in all, so a storage or broker outage of a minute costs no job."""
PUBLISH_RETRIES: Final = 2
"""Publishing retries when the broker is down, before the producer reports it (no hang)."""
BROKER_CONNECT_TIMEOUT_SECONDS: Final = 3
BROKER_SOCKET_TIMEOUT_SECONDS: Final = 10
PUBLISH_RETRY_INTERVALS: Final = {"interval_start": 0.2, "interval_step": 0.5, "interval_max": 1.0}
"""Seconds before the first publish retry, added per retry, and at most: about 2 s in all."""
RESTORE_SWEEP_SECONDS: Final = 10
"""How often a worker looks for jobs whose visibility timeout ran out (one cheap Redis query).
A job of a worker that vanished comes back within visibility timeout + this."""


def worker_nodes(name: str, consumers: int) -> list[str]:
    """The Celery names a worker called ``name`` answers to: itself, or each of its consumers
    (``ttsfarm-gpu0@%h`` -> ``ttsfarm-gpu0-1@%h``, ``ttsfarm-gpu0-2@%h``, ...; ``worker/consumers.py``)."""
    if consumers <= 1:
        return [name]
    node, at, host = name.partition("@")
    return [f"{node}-{number}{at}{host}" for number in range(1, consumers + 1)]


def queued_jobs(app: Celery, queue: str) -> int:
    """Jobs waiting in ``queue``, taken by no worker yet, of every priority (the lengths of its
    Redis lists). :class:`kombu.exceptions.OperationalError` if the broker cannot be reached."""
    with app.connection_for_read() as connection:
        try:
            return int(connection.default_channel.queue_declare(queue=queue, passive=True).message_count)
        except ChannelError:  # none of its lists exists: nothing waits
            return 0
        except connection.connection_errors as error:
            raise OperationalError(str(error)) from None


def make_celery(settings: Settings) -> Celery:
    """A Celery app for these settings; the worker adds the task module to it."""
    if not settings.broker_url:
        raise SettingsError(NO_BROKER_MESSAGE)
    # No Celery result backend: the job registry (ttsfarm.farm.registry) is the one record of a job,
    # and Flower works from events. Celery results would keep the whole text again for a week.
    app = Celery("ttsfarm", broker=settings.broker_url)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        broker_transport_options={"visibility_timeout": settings.visibility_timeout_seconds},
        broker_connection_timeout=BROKER_CONNECT_TIMEOUT_SECONDS,
        broker_connection_retry_on_startup=True,
        task_publish_retry=True,
        task_publish_retry_policy={"max_retries": PUBLISH_RETRIES, **PUBLISH_RETRY_INTERVALS},
        task_default_queue=settings.queue,
        task_send_sent_event=True,
        worker_send_task_events=True,
        task_ignore_result=True,
        worker_hijack_root_logger=False,
    )
    app.conf.broker_transport_options.update(
        {
            "socket_connect_timeout": BROKER_CONNECT_TIMEOUT_SECONDS,
            "socket_timeout": BROKER_SOCKET_TIMEOUT_SECONDS,
            "unacked_restore_interval": min(
                RESTORE_SWEEP_SECONDS, max(1, settings.visibility_timeout_seconds // 4)
            ),
            "unacked_restore_throttle": 1,
        }
    )
    if settings.broker_url.startswith("rediss://"):
        # Without these kombu connects to rediss:// without checking the server's certificate.
        app.conf.broker_use_ssl = settings.redis_tls()
    return app
