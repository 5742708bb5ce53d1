"""The worker's Celery app, built from settings passed in: :func:`run_worker` (what ``ttsfarm
worker`` calls) or :func:`make_app`. Importing this module builds nothing.

``celery -A worker.app ...`` (Flower, ``celery inspect``) asks this module for ``app``; that
one attribute is built on first use from the environment and ``configs/``, the edge for
Celery's own command. The synthesizer (model, batcher) is built once per worker process when
the worker starts, so the first job is warm.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final, cast

from celery import Celery, states
from celery.concurrency import get_implementation
from celery.exceptions import Reject
from celery.signals import (
    task_postrun,
    task_received,
    worker_init,
    worker_ready,
    worker_shutdown,
    worker_shutting_down,
)
from celery.worker.control import inspect_command

from synthesis.build import worker_concurrency
from synthesis.pipeline import Synthesizer
from ttsfarm.core.errors import SettingsError
from ttsfarm.core.settings import NO_BROKER_MESSAGE, PROBE_TIMEOUT_SECONDS, Settings
from ttsfarm.farm.celeryconf import finish_queue, make_celery
from worker.broker import install as install_broker_workaround
from worker.listening import listen_now
from worker.resources import WorkerResources
from worker.tasks import register_tasks

log = logging.getLogger(__name__)


SynthesizerFactory = Callable[[Settings], Synthesizer]
"""Makes a worker's synthesizer; by default (``None``) the engine runs in the worker's process
and is prepared in the background once the worker takes jobs."""
ENDED: Final = frozenset({states.SUCCESS, states.FAILURE, states.IGNORED, states.RETRY})
"""How a task ends when its job's outcome is recorded: its message is settled (a retry is a new
message; a job handed back, ``REJECTED``, is not among them)."""


def make_app(settings: Settings, build: SynthesizerFactory | None = None) -> Celery:
    """The Celery app of a farm worker for ``settings``: its task registered and its signals
    tied to one :class:`WorkerResources` (``resources_of(app)``), whose synthesizer ``build`` makes."""
    if not settings.farm_mode:
        raise SettingsError(NO_BROKER_MESSAGE)
    settings = prewarmed(settings)
    install_broker_workaround()
    app = make_celery(settings)
    app.conf.worker_consumer = "worker.event_batches:Consumer"  # task events sent in batches
    resources = WorkerResources(settings, app, build)
    app.ttsfarm_resources = resources
    register_tasks(app, resources)
    _connect_signals(resources)
    _register_inspect_commands()
    trace_log = logging.getLogger("celery.app.trace")
    if not any(isinstance(f, _HandBackInOneLine) for f in trace_log.filters):
        trace_log.addFilter(_HandBackInOneLine())
    return app


def prewarmed(settings: Settings) -> Settings:
    """A farm worker's settings: unless set otherwise, it builds its GPU sessions and graphs
    before the first job comes."""
    return replace(settings, prewarm=True) if settings.prewarm is None else settings


def resources_of(app: Celery) -> WorkerResources:
    """What the tasks of an app from :func:`make_app` share."""
    return cast(WorkerResources, app.ttsfarm_resources)


def run_worker(
    settings: Settings,
    hostname: str | None = None,
    loglevel: str = "INFO",
    build: SynthesizerFactory | None = None,
) -> None:
    """Start a farm worker in this process and serve jobs until it is stopped (as arq's
    ``run_worker(settings)``). A worker that must stop on its own exits non-zero, saying why."""
    app = make_app(settings, build)
    resources = resources_of(app)
    # Built here, not only when Celery says it is ready: Celery logs and swallows errors in its
    # signal handlers, and a worker that cannot load its model or storage would then fail every
    # job it takes. A setup error (bad setting, missing voice, no storage) stops it instead.
    resources.storage  # noqa: B018 - building them is the point
    engines = resources.synthesizer.batcher.engines
    on_gpu = any(engine.on_gpu for engine in engines.values())
    name = hostname or default_hostname(resources.settings)
    app.worker_main(
        [
            "worker",
            "--pool=threads",
            f"--concurrency={worker_concurrency(resources.settings, on_gpu)}",
            f"--queues={resources.settings.queue},{finish_queue(resources.settings.queue)}",
            f"--hostname={name}",
            f"--loglevel={loglevel}",
            "--task-events",
            # Mingle asks the other workers for revoked task ids and their clocks, and waits a
            # second for answers at every start; ttsfarm revokes nothing and orders nothing by them.
            "--without-mingle",
        ]
    )
    # Celery's worker_main drops its worker's exit status: it is read when the worker shuts down.
    status = resources.exit_status
    if status and not resources.stop_asked:  # not Ctrl-C (1, as Celery ends then): its own failure
        raise SystemExit(
            f"ttsfarm: the worker stopped on an unrecoverable error (exit status {status}); "
            "the CRITICAL line above says which"
        )
    if status:
        raise SystemExit(status)


def default_hostname(settings: Settings) -> str:
    return "ttsfarm-cpu@%h" if settings.provider == "cpu" else f"ttsfarm-gpu{settings.gpu}@%h"


def _connect_signals(resources: WorkerResources) -> None:
    """Celery's signals are process-wide: a worker process makes one app, and these handlers
    serve its resources (held strongly: the closures have no other owner)."""

    def check_pool(sender: Any = None, **_: Any) -> None:
        """One engine, its batches and its metrics live in one process: jobs must run as its threads."""
        pool = get_implementation(getattr(sender, "pool_cls", "threads")).__module__
        if not pool.endswith((".thread", ".solo")):
            log.error(
                "this worker runs jobs in a %s pool: ttsfarm workers need --pool threads (as `ttsfarm "
                "worker` starts them), else each child process loads its own engine and /metrics sees "
                "none of its jobs",
                pool.rsplit(".", 1)[-1] or "unknown",
            )

    def lease(request: Any = None, **_: Any) -> None:
        """From receipt to the end of the task, the message stays ours (``worker/leases.py``)."""
        resources.leases.hold(request.id, request.message.delivery_tag)

    def end_lease(task_id: str = "", state: str | None = None, **_: Any) -> None:
        if state in ENDED:  # recorded: its message must not come back
            resources.leases.settle(task_id)
        else:  # handed back to the queue (the worker is stopping): the message goes back
            resources.leases.release(task_id)

    def stop_with_grace(**_: Any) -> None:
        """SIGTERM (``docker stop``): Celery's warm shutdown takes no new jobs and waits for the
        running ones; past the grace they stop at their next segment and are handed back at once."""
        resources.stop_asked = True
        resources.stop_after(resources.settings.stop_grace_seconds)

    def close(sender: Any = None, **_: Any) -> None:
        resources.exit_status = getattr(sender, "exitcode", None)
        resources.close()

    def load_model_at_start(sender: Any = None, **_: Any) -> None:
        """Load and warm the default voice before the first job arrives, take jobs only while
        the storage can be written, and begin the engine's preparation (``synthesis.background``)."""
        resources.storage  # noqa: B018 - building them is the point
        resources.synthesizer  # noqa: B018
        resources.gate.attach(sender)
        resources.taking_jobs.set()
        listen_now(sender)  # a ping sent when the worker says ready must be heard

    worker_init.connect(check_pool, weak=False)
    task_received.connect(lease, weak=False)
    task_postrun.connect(end_lease, weak=False)
    worker_shutting_down.connect(stop_with_grace, weak=False)
    worker_shutdown.connect(close, weak=False)
    worker_ready.connect(load_model_at_start, weak=False)


def _register_inspect_commands() -> None:
    """``celery inspect ttsfarm_stats`` and ``ttsfarm_health``, answered by the app's resources."""

    def ttsfarm_stats(state: Any) -> dict[str, Any]:
        """What this worker's batcher has done."""
        synthesizer = resources_of(state.consumer.app).synthesizer
        stats = synthesizer.batcher.stats
        engines = synthesizer.batcher.engines
        return {
            "provider": next(iter(engines.values())).provider if engines else None,
            "max_batch": synthesizer.batcher.max_batch,
            "runners": synthesizer.batcher.runners,
            "text_processes": synthesizer.frontend.processes,
            "batches": stats.batches,
            "items": stats.items,
            "mean_batch_size": round(stats.mean_batch_size, 3),
            "padding_ratio": round(stats.padding_ratio, 4),
            "busy_seconds": round(stats.busy_seconds, 3),
            "run_seconds": round(stats.run_seconds, 3),
            "stage_seconds": {stage: round(seconds, 3) for stage, seconds in stats.stage_seconds.items()},
            # the counts are the engine's: the consumers of one engine (same host and process)
            # each answer with all of them
            "engine_process": synthesizer.batcher.engine_process,
        }

    def ttsfarm_health(state: Any, timeout: float = PROBE_TIMEOUT_SECONDS) -> dict[str, Any]:
        """``ttsfarm-healthcheck worker NAME``: ok if the storage can be written and the engine ran
        a batch lately or runs one now."""
        resources = resources_of(state.consumer.app)
        resources.synthesizer  # noqa: B018 - built (and with it the health probe) if it was not yet
        assert resources.health is not None
        if resources.gate.problem is not None:
            return {
                "ok": False,
                "error": f"storage cannot be written, no jobs taken: {resources.gate.problem}",
            }
        return resources.health.check(timeout)

    inspect_command()(ttsfarm_stats)
    inspect_command(args=[("timeout", float)])(ttsfarm_health)


class _HandBackInOneLine(logging.Filter):
    """A job handed back to the queue is expected: Celery's line says so, without a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, Reject) and error.requeue:
            record.exc_info, record.exc_text = None, None
        return True


def __getattr__(name: str) -> Any:
    """``celery -A worker.app`` looks up ``app`` here: built on first use from the environment,
    with a one-line error (not Celery's traceback of a failed app import) when it cannot be."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        app = make_app(Settings.load())
    except SettingsError as error:
        raise SystemExit(f"ttsfarm: {error}") from None
    globals()["app"] = app
    return app
