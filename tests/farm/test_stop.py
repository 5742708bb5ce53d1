"""Stopping a worker (SIGTERM, as ``docker stop`` sends): running jobs finish within the grace, or
go back to the queue at once when it runs out; nothing waits for the visibility timeout."""

from __future__ import annotations

import json
import signal
import time
import uuid
from dataclasses import replace
from pathlib import Path

import redis

from producer import Client
from tests.farm.conftest import EXAMPLE, WorkerProcess, farm_env, queue_lists, task_events, wait_for, waiting


def stop(worker: WorkerProcess, limit: float) -> float:
    """SIGTERM the worker; seconds until it exited (with status 0)."""
    signalled = time.monotonic()
    worker.process.send_signal(signal.SIGTERM)
    assert worker.process.wait(limit) == 0
    worker.stop()
    return time.monotonic() - signalled


def test_sigterm_lets_a_running_job_finish_within_the_grace(
    redis_url: str, s3_endpoint: str, client: Client, tmp_path: Path
) -> None:
    queue = f"stop-{uuid.uuid4().hex[:6]}"
    env = farm_env(redis_url, s3_endpoint, TTSFARM_QUEUE=queue, TTSFARM_STOP_GRACE_SECONDS="120")
    worker = WorkerProcess(env, tmp_path / "finish.log", "finish", concurrency=2)
    with Client(replace(client.settings, queue=queue)) as c:
        job_id = c.submit(EXAMPLE[:600])
        wait_for(lambda: c.status(job_id).state == "running", 60, "the job to start")
        exited = stop(worker, 150)
        status = c.status(job_id)
    assert (status.state, status.attempts) == ("succeeded", 1)
    assert exited < 120, "the worker waited for its job, not for the whole grace"
    print(f"worker exited {exited:.1f} s after SIGTERM, its job finished")


def test_a_job_that_finishes_during_a_stop_is_shown_as_succeeded(
    redis_url: str, s3_endpoint: str, client: Client, tmp_path: Path
) -> None:
    """Its task's last event is sent before the worker exits, though events are sent in batches
    (``worker/event_batches.py``): else Flower would show it started for good."""
    queue = f"stop-{uuid.uuid4().hex[:6]}"
    env = farm_env(redis_url, s3_endpoint, TTSFARM_QUEUE=queue, TTSFARM_STOP_GRACE_SECONDS="120")
    worker = WorkerProcess(env, tmp_path / "events.log", "events", concurrency=2)
    with task_events(redis_url) as seen, Client(replace(client.settings, queue=queue)) as c:
        wait_for(lambda: any(e["type"] == "worker-heartbeat" for e in seen), 30, "events to arrive")
        job_id = c.submit(EXAMPLE[:600])
        wait_for(lambda: c.status(job_id).state == "running", 60, "the job to start")
        stop(worker, 150)
        assert c.status(job_id).state == "succeeded"
        time.sleep(1)  # anything sent arrives within this
    mine = [e["type"] for e in seen if e.get("uuid") == job_id]
    assert mine[-1] == "task-succeeded", mine


def test_sigterm_hands_a_job_back_when_the_grace_runs_out(
    redis_url: str, s3_endpoint: str, client: Client, tmp_path: Path
) -> None:
    queue = f"stop-{uuid.uuid4().hex[:6]}"
    grace = 1
    env = farm_env(
        redis_url,
        s3_endpoint,
        TTSFARM_QUEUE=queue,
        TTSFARM_STOP_GRACE_SECONDS=str(grace),
        TTSFARM_VISIBILITY_TIMEOUT_SECONDS="3600",  # a handed-back job must not wait for this
        TTSFARM_MAX_BATCH="1",  # audio after the first segment, not after a batch of eight
    )
    worker = WorkerProcess(env, tmp_path / "stopped.log", "stopped", concurrency=2)
    with Client(replace(client.settings, queue=queue)) as c:
        job_id = c.submit(EXAMPLE * 3)
        wait_for(lambda: c.status(job_id).segments_done > 0, 90, "the job to make audio")
        exited = stop(worker, 60)
        status = c.status(job_id)
    assert status.state == "running" and "goes back to the queue" in (status.error or "")
    assert grace <= exited < grace + 30
    print(f"worker exited {exited:.1f} s after SIGTERM (grace {grace} s), its job back in the queue")
    log = worker.log_path.read_text()
    assert f"job {job_id}: handed back to the queue" in log and "Traceback" not in log
    # Back in the queue now, for the next worker: not after the visibility timeout (an hour).
    broker = redis.Redis.from_url(redis_url)
    assert [json.loads(m)["headers"]["id"] for m in waiting(broker, queue)] == [job_id]
    broker.delete(*queue_lists(queue))
