"""Real parts for farm tests: Redis, an S3 endpoint over HTTP (moto's server), Celery worker
processes started here, Flower, and the HTTP gateway (`ttsfarm serve`) with its API keys."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
import redis
from celery import Celery
from kombu.transport.redis import PRIORITY_STEPS, Channel

from bench.farm import CREDENTIALS, free_port, start_s3, start_worker, stop_workers
from bench.farm import farm_env as bench_farm_env
from gateway.keys import KeyStore
from producer import Client
from tests.conftest import redis_server
from ttsfarm.core.settings import Settings
from ttsfarm.core.voices import resolve_voice

REDIS_SERVER = redis_server()
REDIS_URL = f"{REDIS_SERVER}/11"
BUCKET = "ttsfarm-test"
PREFIX = "jobs"
HEALTHCHECK = Path(__file__).parents[2] / "docker" / "healthcheck.py"
EXAMPLE = (Path(__file__).parents[2] / "examples" / "ellery.txt").read_text()
"""About 150 s of speech (75 s at a length scale of 0.5)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test in this folder is a farm test (``-m "not farm"``: ``scripts/test --quick``)."""
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.farm)


def healthcheck(env: dict[str, str], name: str) -> subprocess.CompletedProcess[str]:
    """``ttsfarm-healthcheck worker NAME``, as the container runs it."""
    return subprocess.run(
        [sys.executable, str(HEALTHCHECK), "worker", name],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def broken_voice(folder: Path) -> str:
    """A voice that passes every check at submit (its files exist, its config is Piper's) but that
    no worker can load: a job with it fails on the worker, permanently, without a retry."""
    (folder / "garbage.onnx").write_bytes(b"not a model")
    shutil.copy(resolve_voice("joe").config_path, folder / "garbage.onnx.json")
    return str(folder / "garbage.onnx")


def queue_lists(queue: str) -> list[str]:
    """The Redis lists of ``queue``, one per priority step, in the order a worker pops them:
    kombu keeps a message of priority p in ``queue`` (p = 0) or ``queue<sep>p``."""
    return [queue + (f"{Channel.sep}{step}" if step else "") for step in PRIORITY_STEPS]


def waiting(broker: redis.Redis, queue: str) -> list[bytes]:
    """The messages that wait in ``queue``, of every priority: the next a worker takes last."""
    return [message for name in reversed(queue_lists(queue)) for message in broker.lrange(name, 0, -1)]


def wait_for(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise TimeoutError(f"timed out waiting for {what}")


@pytest.fixture(scope="session")
def redis_url() -> str:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.exceptions.ConnectionError:
        pytest.fail(f"Redis is not running at {REDIS_SERVER}: run scripts/services")
    client.flushdb()
    return REDIS_URL


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    server, endpoint = start_s3()
    boto3.client("s3", endpoint_url=endpoint, **_boto_credentials()).create_bucket(Bucket=BUCKET)
    yield endpoint
    server.stop()


def _boto_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": CREDENTIALS["AWS_DEFAULT_REGION"],
    }


@pytest.fixture(scope="session")
def s3(s3_endpoint: str):  # type: ignore[no-untyped-def]
    return boto3.client("s3", endpoint_url=s3_endpoint, **_boto_credentials())


def farm_env(redis_url: str, s3_endpoint: str, **extra: str) -> dict[str, str]:
    defaults = {
        "TTSFARM_PROVIDER": "cpu",
        "TTSFARM_RETRY_BACKOFF_SECONDS": "0.2",
        "TTSFARM_MAX_BATCH": "8",  # CPU workers default to 1; these tests check batching across jobs
        # and the host side of a GPU worker: runner threads and a process pool segmenting text
        "TTSFARM_BATCH_RUNNERS": "2",
        "TTSFARM_TEXT_PROCESSES": "1",
        "TTSFARM_METRICS_PORT": "0",  # a test that scrapes gives its worker a free port
    }
    return bench_farm_env(redis_url, s3_endpoint, f"s3://{BUCKET}/{PREFIX}", **{**defaults, **extra})


class WorkerProcess:
    """A real ``ttsfarm worker`` in its own process."""

    def __init__(self, env: dict[str, str], log_path: Path, name: str, concurrency: int = 8) -> None:
        self.log_path = log_path
        port = int(env.get("TTSFARM_METRICS_PORT", "0"))
        self.metrics_url = f"http://127.0.0.1:{port}/metrics" if port else None
        self.process = start_worker(["-c", str(concurrency), "-n", f"{name}@%h"], env, log_path, timeout=120)

    def stop(self) -> None:
        stop_workers([self.process], grace=30)


@pytest.fixture(scope="session")
def worker(
    redis_url: str, s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerProcess]:
    process = WorkerProcess(
        farm_env(redis_url, s3_endpoint, TTSFARM_METRICS_PORT=str(free_port())),
        tmp_path_factory.mktemp("worker") / "worker.log",
        "test-cpu",
    )
    yield process
    process.stop()


@pytest.fixture(scope="session")
def flower(redis_url: str, s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Flower with basic auth, started before the jobs so it sees their events."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("flower") / "flower.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "worker.app",
                "flower",
                f"--port={port}",
                "--address=127.0.0.1",
                "--basic-auth=ops:secret",
            ],
            env=farm_env(redis_url, s3_endpoint),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            return False

    wait_for(up, 60, "Flower to listen")
    yield url
    process.terminate()
    process.wait(30)


class GatewayProcess:
    """A real ``ttsfarm serve`` (uvicorn) in its own process."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._log = log_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ttsfarm", "serve", "--port", str(self.port), "--log-level", "warning"],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        wait_for(self.up, 60, f"the gateway to answer (log: {log_path})")

    def up(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"gateway exited early:\n{self.log_path.read_text()[-3000:]}")
        try:
            return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)
        self._log.close()


def start_gateway(tmp: pytest.TempPathFactory, env: dict[str, str]) -> Iterator[GatewayProcess]:
    process = GatewayProcess(env, tmp.mktemp("gateway") / "gateway.log")
    yield process
    process.stop()


@pytest.fixture(scope="session")
def gateway(redis_url: str, s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from (g.url for g in start_gateway(tmp_path_factory, farm_env(redis_url, s3_endpoint)))


def new_key(redis_url: str) -> str:
    return KeyStore(redis_url).add(f"test-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def client(redis_url: str, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    settings = Settings(
        broker_url=redis_url, storage_url=f"s3://{BUCKET}/{PREFIX}", s3_endpoint_url=s3_endpoint
    )
    with Client(settings) as farm_client:
        yield farm_client


@contextmanager
def task_events(redis_url: str) -> Iterator[list[dict[str, Any]]]:
    """The farm's events as a monitor (Flower) receives them, from every worker on this Redis."""
    seen: list[dict[str, Any]] = []
    app = Celery(broker=redis_url)
    stopped = threading.Event()

    def receive() -> None:
        with app.connection() as connection:
            receiver = app.events.Receiver(connection, handlers={"*": seen.append})
            receiver.should_stop = False
            for _ in receiver.consume(limit=None, timeout=None, safety_interval=0.2):
                if stopped.is_set():
                    return

    thread = threading.Thread(target=receive, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stopped.set()
        thread.join(10)
