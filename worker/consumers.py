"""One worker in several processes: one owns the engine, the consumers take the jobs.

``ttsfarm worker --consumers N`` (``TTSFARM_CONSUMERS``). Short jobs cost the host more per
audio second than long ones (Celery's message handling, the registry, encoding, storage), and in
one process that work shares one interpreter lock: one H200 worker stored about 150
one-sentence jobs a second while its engine could make 1,000. Several workers on one GPU would
each hold their own engine (about 23 GB each) and batch only their own jobs. Here this process
loads the engine once and serves its batcher (``synthesis.engine_host``); each consumer is a
Celery worker of its own (``NAME-1@host``, ``NAME-2@host``, ...; each with ``concurrency``
jobs and metrics on ``TTSFARM_METRICS_PORT`` + its number - 1) whose jobs send their segments
to that one batcher. Batches still mix the segments of every job in flight, and each job keeps
the farm's guarantees (acks late, leases, retries, status by id): a consumer is a whole worker
but for its engine.

Stopping: SIGTERM or SIGINT here is passed to every consumer, which stops as any worker does (no
new jobs; running ones finish within ``TTSFARM_STOP_GRACE_SECONDS``); the engine closes after
the last consumer. A consumer that exits by itself stops the others and this process exits 1,
for Docker's restart policy or systemd to start the worker again; unacknowledged jobs go back
to the queue. If this process dies, each consumer's link to the engine breaks: its running jobs
fail as transient errors (retried later) and the consumer stops.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from multiprocessing.connection import wait
from types import FrameType
from typing import Final

from synthesis.build import build_synthesizer, consumer_synthesizer
from synthesis.engine_host import EngineHost
from ttsfarm.core.settings import Settings
from ttsfarm.farm.celeryconf import worker_nodes
from worker.app import default_hostname, prewarmed, run_worker

log = logging.getLogger(__name__)

CONSUMER_STOP_SECONDS: Final = 10.0
"""How long a consumer still starting is given to stop when the engine cannot be loaded."""


def run_consumers(settings: Settings, hostname: str | None = None, loglevel: str = "INFO") -> int:
    """Load the engine here, serve it to ``settings.consumers`` consumer processes until they
    stop; the exit status for the command (0 after a requested stop, 1 if a consumer failed)."""
    settings = prewarmed(settings)
    synthesizer = build_synthesizer(settings)
    try:
        host = EngineHost(synthesizer.batcher, settings.temp_dir)

        def serve() -> None:  # while the consumers start: they wait on the socket for it
            engine = synthesizer.batcher.engine(synthesizer.voice(settings.voice))
            host.serve(engine.on_gpu)
            log.info(
                "engine ready for %d consumers: voice %s on %s, %s, %s; batches of up to %d",
                settings.consumers,
                engine.voice.name,
                engine.provider,
                engine.precision,
                engine.kind,
                synthesizer.batcher.max_batch,
            )

        try:
            return _supervise(settings, hostname or default_hostname(settings), loglevel, host, serve)
        finally:
            host.close()
    finally:
        synthesizer.close()


def consumer_settings(settings: Settings, number: int) -> Settings:
    """Consumer ``number`` (from 1) serves metrics on a port of its own."""
    port = settings.metrics_port + number - 1 if settings.metrics_port else 0
    return replace(settings, metrics_port=port)


def _supervise(
    settings: Settings, name: str, loglevel: str, host: EngineHost, serve: Callable[[], None]
) -> int:
    """Start the consumers, then ``serve`` (the engine loads meanwhile: a consumer's start, its
    imports and Celery's, is a few seconds of its own), then wait for them to stop."""
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no CUDA state forked
    link = (host.address, host.authkey)
    consumers = [
        context.Process(
            target=_consume,
            args=(consumer_settings(settings, n), node, loglevel, *link),
            name=f"ttsfarm-consumer-{n}",
        )
        for n, node in enumerate(worker_nodes(name, settings.consumers), start=1)
    ]
    stopping = loading = False

    def stop_all(signum: int) -> None:
        nonlocal stopping
        stopping = True
        for consumer in consumers:
            if consumer.pid is not None and consumer.exitcode is None:
                os.kill(consumer.pid, signum)

    def on_signal(signum: int, _: FrameType | None) -> None:
        stop_all(signum)
        if loading:  # the engine is still loading: no waiting for it
            raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    failed = False
    try:
        for consumer in consumers:
            if stopping:  # told to stop while starting: the rest never start
                break
            consumer.start()
        if stopping:  # a signal that came while one was starting found no pid to send to
            stop_all(signal.SIGTERM)
        else:
            try:
                loading = True
                serve()
                loading = False
            except BaseException:  # no engine: the consumers waiting for it stop with this process
                loading = False
                stop_all(signal.SIGTERM)
                for consumer in consumers:
                    if consumer.pid is not None:
                        consumer.join(CONSUMER_STOP_SECONDS)
                        if consumer.exitcode is None:
                            consumer.kill()
                            consumer.join()
                raise
        running = [consumer for consumer in consumers if consumer.pid is not None]
        while running:
            ended = wait([consumer.sentinel for consumer in running])
            for consumer in [c for c in running if c.sentinel in ended]:
                consumer.join()
                running.remove(consumer)
                if not stopping:
                    failed = True
                    log.error(
                        "consumer %s exited (code %s): stopping the worker's other consumers",
                        consumer.name,
                        consumer.exitcode,
                    )
                    stop_all(signal.SIGTERM)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    # A consumer told to stop before its Celery could take the signal ends by it: that is a stop.
    stopped = (0, -signal.SIGTERM, -signal.SIGINT) if stopping else (0,)
    return 1 if failed or any(c.exitcode not in stopped for c in consumers if c.pid is not None) else 0


def _consume(settings: Settings, name: str, loglevel: str, address: str, authkey: bytes) -> None:
    """A consumer process: a farm worker whose engine is the host's."""
    os.setpgrp()  # Ctrl-C reaches the host only, which passes it on once

    def engine_lost() -> None:
        log.error("the engine process is gone: this consumer stops (its jobs are retried)")
        os.kill(os.getpid(), signal.SIGTERM)

    build = partial(consumer_synthesizer, address=address, authkey=authkey, on_lost=engine_lost)
    run_worker(settings, name, loglevel, build)
