"""The container health check against a real worker: it asks the engine, not only the consumer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.farm.conftest import WorkerProcess, farm_env

HEALTHCHECK = Path(__file__).parents[2] / "docker" / "healthcheck.py"


def healthcheck(env: dict[str, str], name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HEALTHCHECK), "worker", name],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_worker_whose_engine_runs_is_healthy(
    redis_url: str, s3_endpoint: str, worker: WorkerProcess
) -> None:
    env = farm_env(redis_url, s3_endpoint)
    passed = healthcheck(env, "test-cpu")
    assert passed.returncode == 0, passed.stderr
    missing = healthcheck(env, "no-such-worker")
    assert missing.returncode == 1
    assert missing.stderr.startswith("worker no-such-worker@") and "did not answer" in missing.stderr
