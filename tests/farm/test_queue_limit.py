"""The queue-length limit (``TTSFARM_MAX_QUEUED_JOBS``): a full queue refuses submits from the
producer API, the CLI and the gateway, queues nothing of a refused call, and takes jobs again
once workers have taken some. Real Redis, on a database no worker listens to."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
import redis

from producer import Client
from producer.client import JobSpec
from tests.conftest import emptied
from tests.farm.conftest import REDIS_SERVER, farm_env, new_key, queue_lists, start_gateway, waiting
from ttsfarm.core.errors import QueueFull
from ttsfarm.core.settings import Settings

URL = f"{REDIS_SERVER}/13"
QUEUE = "ttsfarm"


@pytest.fixture
def queue() -> Iterator[redis.Redis]:
    yield from emptied(URL)


def limited_client(limit: int) -> Client:
    return Client(Settings(broker_url=URL, max_queued_jobs=limit))


def test_a_full_queue_refuses_and_queues_nothing(queue: redis.Redis) -> None:
    with limited_client(3) as client:
        first = client.submit_many(["One.", "Two."])
        with pytest.raises(QueueFull, match=r"2 jobs wait .* at most 3 \(TTSFARM_MAX_QUEUED_JOBS\)"):
            client.submit_many([JobSpec("Three."), JobSpec("Four.")])
        assert len(waiting(queue, QUEUE)) == 2  # the refused call queued neither of its jobs
        third = client.submit("Three.")
        with pytest.raises(QueueFull, match="another job cannot be queued now; nothing was queued"):
            client.submit("Four.", key="four")
        assert len(waiting(queue, QUEUE)) == 3
    # A worker takes a job: there is room again.
    assert any(queue.rpop(name) for name in queue_lists(QUEUE))
    with limited_client(3) as client:
        fourth = client.submit("Four.", key="four")
        assert client.status(fourth).state == "queued"
    assert len({*first, third, fourth}) == 4


def test_zero_means_no_limit(queue: redis.Redis) -> None:
    with limited_client(0) as client:
        client.submit_many(["a."] * 5)
    assert len(waiting(queue, QUEUE)) == 5


def test_the_cli_says_so_in_one_line(queue: redis.Redis) -> None:
    env = farm_env(URL, "http://127.0.0.1:9", TTSFARM_MAX_QUEUED_JOBS="1")
    submit = [sys.executable, "-m", "ttsfarm", "submit", "Hello."]
    assert subprocess.run(submit, env=env, capture_output=True, timeout=60).returncode == 0
    refused = subprocess.run(submit, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    assert refused.stderr.count("\n") == 1 and "the farm's queue is full" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert len(waiting(queue, QUEUE)) == 1


def test_the_gateway_answers_503_with_retry_after(
    queue: redis.Redis, s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env = farm_env(URL, s3_endpoint, TTSFARM_MAX_QUEUED_JOBS="1")
    for process in start_gateway(tmp_path_factory, env):
        headers = {"Authorization": f"Bearer {new_key(URL)}"}
        with httpx.Client(base_url=process.url, headers=headers, timeout=30) as api:
            assert api.post("/v1/jobs", json={"text": "First."}).status_code == 202
            refused = api.post("/v1/jobs", json={"text": "Second."})
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "30"
    error = refused.json()["error"]
    assert error["code"] == "queue_full" and "the farm's queue is full" in error["message"]
    assert len(waiting(queue, QUEUE)) == 1
