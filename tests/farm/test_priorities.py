"""Priorities: a worker takes every interactive job that waits before any bulk one, the queue's
length counts both, and the gateway's speech requests are interactive. Real Redis, a real worker
started once the jobs wait, on a queue of its own."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from producer import Client
from producer.specs import JobSpec
from tests.farm.conftest import WorkerProcess, farm_env
from ttsfarm.core.errors import InvalidInput
from ttsfarm.core.settings import Settings
from ttsfarm.farm.celeryconf import make_celery, queued_jobs


def test_interactive_jobs_are_taken_before_bulk_ones(
    redis_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    queue = f"priorities-{uuid.uuid4().hex[:8]}"
    settings = Settings(broker_url=redis_url, queue=queue)
    with Client(settings) as client:
        bulk = client.submit_many([JobSpec(f"Bulk job number {n}.") for n in range(1, 4)])
        interactive = client.submit("Someone waits for this one.", priority="interactive")
        assert queued_jobs(make_celery(settings), queue) == 4  # both priorities counted
        env = farm_env(redis_url, s3_endpoint, TTSFARM_QUEUE=queue, TTSFARM_MAX_BATCH="1")
        worker = WorkerProcess(env, tmp_path / "worker.log", "priorities", concurrency=1)
        try:
            done = {job_id: client.wait(job_id, timeout=120) for job_id in [*bulk, interactive]}
            started = {job_id: client.status(job_id).started_at for job_id in done}
        finally:
            worker.stop()
    assert all(result.duration > 0 for result in done.values())
    first = min(started, key=lambda job_id: started[job_id] or 0.0)
    assert first == interactive, started  # queued last, taken first


def test_an_unknown_priority_is_refused_before_anything_is_queued(redis_url: str) -> None:
    settings = Settings(broker_url=redis_url, queue=f"refused-{uuid.uuid4().hex[:8]}")
    refused = pytest.raises(InvalidInput, match="unknown priority 'urgent': use interactive")
    with Client(settings) as client, refused:
        client.submit_many([JobSpec("Fine."), JobSpec("Not fine.", priority="urgent")])
    assert queued_jobs(make_celery(settings), settings.queue) == 0
