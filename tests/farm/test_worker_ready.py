"""A worker that says it is ready answers a ping sent then, however late its event loop starts
(``worker/listening.py``): the gateway counts workers by ping, and a probe or a script may ask
the moment the line is logged."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from producer import Client
from tests.farm.conftest import farm_env, wait_for

PUBLISHED_SECONDS = 0.5
"""Time for the ping to be published while the worker is held (it is sent at once)."""


def test_a_ping_sent_when_the_worker_says_ready_is_answered(
    redis_url: str, s3_endpoint: str, client: Client, tmp_path: Path
) -> None:
    queue = f"ready-{uuid.uuid4().hex[:6]}"
    name = f"held-{uuid.uuid4().hex[:6]}"
    hook = [sys.executable, "-m", "tests.farm.ready_hook_worker", str(tmp_path)]
    env = farm_env(redis_url, s3_endpoint, TTSFARM_QUEUE=queue)
    with (tmp_path / "worker.log").open("wb") as log:
        worker = subprocess.Popen(
            [*hook, "-c", "2", "-n", f"{name}@%h"],
            env=env,
            stdout=log,
            stderr=log,
        )
    try:
        held = tmp_path / "ready"
        wait_for(lambda: held.exists() or worker.poll() is not None, 120, "the worker to start")
        assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
        with Client(replace(client.settings, queue=queue)) as c, ThreadPoolExecutor(1) as pool:
            names = pool.submit(c.workers, 5.0)
            time.sleep(PUBLISHED_SECONDS)  # the ping is out while the worker's loop has not run
            (tmp_path / "go").touch()
            answered = names.result()
    finally:
        worker.terminate()
        worker.wait(60)
    assert any(n.startswith(f"{name}@") for n in answered), f"{name} did not answer: {answered}"
