"""One worker, several consumer processes, one engine (``ttsfarm worker --consumers N``): real
processes, Redis and S3. Jobs from every consumer are made by the host's engine; a stop reaches
every process; a consumer that dies takes the worker down, to be started again as a whole."""

from __future__ import annotations

import os
import re
import signal
import socket
import time
import uuid
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from producer import Client
from producer.client import JobSpec
from tests.farm.conftest import WorkerProcess, farm_env, wait_for
from tests.helpers_engine import waiting_connections
from ttsfarm.farm.celeryconf import worker_nodes


def consumers_of(worker: WorkerProcess) -> list[psutil.Process]:
    """The worker's consumer processes (multiprocessing's resource tracker is a child too)."""
    children = psutil.Process(worker.process.pid).children()
    return [child for child in children if "spawn_main" in " ".join(child.cmdline())]


def test_consumers_share_one_engine_and_stop_together(
    redis_url: str, s3_endpoint: str, client: Client, tmp_path: Path
) -> None:
    queue = f"consumers-{uuid.uuid4().hex[:6]}"
    env = farm_env(redis_url, s3_endpoint, TTSFARM_QUEUE=queue, TTSFARM_CONSUMERS="2")
    log = tmp_path / "consumers.log"
    worker = WorkerProcess(env, log, "shared", concurrency=4)
    try:
        children = consumers_of(worker)
        assert len(children) == 2
        with Client(replace(client.settings, queue=queue)) as c:
            ids = c.submit_many(
                [JobSpec(f"Job {n} of the shared engine test, one sentence long.") for n in range(12)]
            )
            wait_for(lambda: all(c.status(i).done for i in ids), 240, "every job to finish")
            statuses = [c.status(i) for i in ids]
            nodes = worker_nodes(f"shared@{socket.gethostname()}", 2)
            replies = c._app.control.broadcast("ttsfarm_stats", destination=nodes, reply=True, timeout=10)
        stats = {name: reply for answer in replies for name, reply in answer.items()}
        assert sorted(stats) == sorted(nodes)
        engines = {reply["engine_process"] for reply in stats.values()}
        assert engines == {worker.process.pid}, "one engine, in the worker's own process"
        assert stats[nodes[0]]["items"] == stats[nodes[1]]["items"] >= len(ids), "the same batcher's counts"
        assert [s.state for s in statuses] == ["succeeded"] * len(ids)
        assert all(s.result and s.result.duration > 1.5 for s in statuses)
        text = log.read_text()
        by_consumer = {
            name: len(re.findall(rf"INFO/ttsfarm-consumer-{name}\] Task \S+ succeeded", text))
            for name in "12"
        }
        assert sum(by_consumer.values()) == len(ids)
        assert all(by_consumer.values()), f"both consumers took jobs: {by_consumer}"
        assert "shared-1@" in text and "shared-2@" in text, "each consumer is a Celery worker of its own"

        signalled = time.monotonic()
        worker.process.send_signal(signal.SIGTERM)
        assert worker.process.wait(90) == 0
        assert not any(child.is_running() and child.status() != psutil.STATUS_ZOMBIE for child in children)
        stopped = time.monotonic() - signalled
        print(f"jobs per consumer {by_consumer}; all stopped {stopped:.1f} s after SIGTERM")
    finally:
        worker.stop()  # a no-op once it exited; a failed assertion must not leave it running


def test_a_consumer_that_dies_stops_the_worker(redis_url: str, s3_endpoint: str, tmp_path: Path) -> None:
    env = farm_env(redis_url, s3_endpoint, TTSFARM_QUEUE=f"consumers-{uuid.uuid4().hex[:6]}")
    worker = WorkerProcess({**env, "TTSFARM_CONSUMERS": "2"}, tmp_path / "dies.log", "dies", concurrency=2)
    try:
        first, second = consumers_of(worker)
        os.kill(first.pid, signal.SIGKILL)
        assert worker.process.wait(90) == 1, "the worker exits with an error, for its supervisor"
        second.wait(30)
        log = (tmp_path / "dies.log").read_text()
        assert "exited (code -9): stopping the worker's other consumers" in log
    finally:
        worker.stop()


def test_when_the_engine_process_dies_its_consumers_stop_and_the_job_is_retried(
    redis_url: str, s3_endpoint: str, client: Client, tmp_path: Path
) -> None:
    queue = f"consumers-{uuid.uuid4().hex[:6]}"
    env = farm_env(redis_url, s3_endpoint, TTSFARM_QUEUE=queue, TTSFARM_CONSUMERS="2")
    worker = WorkerProcess(env, tmp_path / "host-dies.log", "host-dies", concurrency=1)
    children = consumers_of(worker)
    try:
        with Client(replace(client.settings, queue=queue)) as c:
            job_id = c.submit(" ".join(f"Sentence {n} of a job that outlives its engine." for n in range(30)))
            wait_for(lambda: c.status(job_id).segments_done > 0, 120, "the job's first segment")
            worker.process.send_signal(signal.SIGKILL)  # the process that owns the engine
            for child in children:
                child.wait(60)  # each consumer saw its link break and stopped
            status = c.status(job_id)
            assert status.state != "failed", status.error  # a transient error: retried, not failed
            rescuer = WorkerProcess(env | {"TTSFARM_CONSUMERS": "1"}, tmp_path / "rescuer.log", "rescuer")
            try:
                wait_for(lambda: c.status(job_id).state == "succeeded", 180, "another worker to finish it")
            finally:
                rescuer.stop()
        assert "the engine process is gone" in (tmp_path / "host-dies.log").read_text()
    finally:
        worker.stop()


def test_consumers_started_beside_an_engine_that_fails_to_load_stop_with_it(
    redis_url: str, tmp_path: Path
) -> None:
    """The consumers start while the engine loads and wait on its socket; if it cannot load,
    none is left behind."""
    from synthesis.batcher import Batcher
    from synthesis.engine_host import EngineHost
    from ttsfarm.core.settings import Settings
    from worker.consumers import _supervise

    settings = Settings(broker_url=redis_url, storage_url=str(tmp_path / "out"), consumers=2, provider="cpu")
    started: list[psutil.Process] = []
    before = {child.pid for child in psutil.Process().children()}

    with Batcher(lambda voice: None) as batcher:  # type: ignore[arg-type,return-value]
        host = EngineHost(batcher, temp_dir=str(tmp_path))

        def serve() -> None:  # fails once both consumers have started and wait on the socket
            wait_for(lambda: waiting_connections(host.address) == 2, 60, "the consumers to connect")
            spawned = (c for c in psutil.Process().children() if "spawn_main" in " ".join(c.cmdline()))
            started.extend(c for c in spawned if c.pid not in before)
            raise RuntimeError("the engine could not be loaded")

        try:
            with pytest.raises(RuntimeError, match="could not be loaded"):
                _supervise(settings, "failing", "INFO", host, serve)
        finally:
            host.close()
    assert len(started) == 2
    assert not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in started)


def test_a_stop_asked_while_the_engine_loads_does_not_wait_for_the_load(
    redis_url: str, tmp_path: Path
) -> None:
    """SIGTERM while the engine loads: the consumers waiting for it stop, and so does the
    worker, as it would have before its consumers started (exit status 128 + 15)."""
    from synthesis.batcher import Batcher
    from synthesis.engine_host import EngineHost
    from ttsfarm.core.settings import Settings
    from worker.consumers import _supervise

    settings = Settings(broker_url=redis_url, storage_url=str(tmp_path / "out"), consumers=2, provider="cpu")
    before = {child.pid for child in psutil.Process().children()}

    with Batcher(lambda voice: None) as batcher:  # type: ignore[arg-type,return-value]
        host = EngineHost(batcher, temp_dir=str(tmp_path))

        def serve() -> None:  # a load that would take a minute, stopped once the consumers wait
            wait_for(lambda: waiting_connections(host.address) == 2, 60, "the consumers to connect")
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(60)

        started = time.monotonic()
        try:
            with pytest.raises(SystemExit) as stopped:
                _supervise(settings, "stopped", "INFO", host, serve)
        finally:
            host.close()
    assert stopped.value.code == 128 + signal.SIGTERM and time.monotonic() - started < 30
    spawned = [
        c
        for c in psutil.Process().children()
        if c.pid not in before and "spawn_main" in " ".join(c.cmdline())
    ]
    assert not [c for c in spawned if c.status() != psutil.STATUS_ZOMBIE]
