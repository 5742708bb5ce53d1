"""A worker that says it is ready answers a ping sent then, however late its event loop starts
(``worker/listening.py``): the gateway counts workers by ping, and a probe or a script may ask
the moment the line is logged."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis

from producer import Client
from tests.conftest import emptied
from tests.farm.conftest import REDIS_SERVER, farm_env, wait_for
from tests.helpers_redis import Monitor
from ttsfarm.core.settings import Settings

DATABASE = 3
URL = f"{REDIS_SERVER}/{DATABASE}"
"""A database of its own: its broadcasts (kombu names them ``/3.``) are this test's alone."""


@pytest.fixture
def broker() -> Iterator[redis.Redis]:
    yield from emptied(URL)


def test_a_ping_sent_when_the_worker_says_ready_is_answered(
    broker: redis.Redis, s3_endpoint: str, tmp_path: Path
) -> None:
    name = f"held-{uuid.uuid4().hex[:6]}"
    hook = [sys.executable, "-m", "tests.farm.ready_hook_worker", str(tmp_path)]
    with (tmp_path / "worker.log").open("wb") as log:
        worker = subprocess.Popen(
            [*hook, "-c", "2", "-n", f"{name}@%h"], env=farm_env(URL, s3_endpoint), stdout=log, stderr=log
        )
    try:
        held = tmp_path / "ready"
        wait_for(lambda: held.exists() or worker.poll() is not None, 120, "the worker to start")
        assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
        with Client(Settings(broker_url=URL)) as client, ThreadPoolExecutor(1) as pool:
            sent = Monitor(URL, f"/{DATABASE}.")
            names = pool.submit(client.workers, 5.0)
            wait_for(lambda: "PUBLISH" in sent.seen, 10, "the ping to be sent")
            sent.stop()
            (tmp_path / "go").touch()  # the worker's loop runs only now
            answered = names.result()
    finally:
        worker.terminate()
        worker.wait(60)
    assert any(n.startswith(f"{name}@") for n in answered), f"{name} did not answer: {answered}"
