"""The container health check against a real worker: it asks the engine, not only the consumer."""

from __future__ import annotations

from pathlib import Path

from tests.farm.conftest import WorkerProcess, farm_env, healthcheck


def test_a_worker_whose_engine_runs_is_healthy(
    redis_url: str, s3_endpoint: str, worker: WorkerProcess
) -> None:
    env = farm_env(redis_url, s3_endpoint)
    passed = healthcheck(env, "test-cpu")
    assert passed.returncode == 0, passed.stderr
    missing = healthcheck(env, "no-such-worker")
    assert missing.returncode == 1
    assert missing.stderr.startswith("worker no-such-worker@") and "did not answer" in missing.stderr


def test_a_worker_with_consumers_is_healthy_when_each_consumer_is(
    redis_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    env = farm_env(redis_url, s3_endpoint, TTSFARM_CONSUMERS="2", TTSFARM_QUEUE="health-consumers")
    worker = WorkerProcess(env, tmp_path / "consumers.log", "health-shared", concurrency=2)
    try:
        passed = healthcheck(env, "health-shared")
        assert passed.returncode == 0, passed.stderr
        three = healthcheck({**env, "TTSFARM_CONSUMERS": "3"}, "health-shared")
        assert three.returncode == 1 and "health-shared-3@" in three.stderr, three.stderr
    finally:
        worker.stop()
