"""Shared fixtures: the real joe voice on CPU, loaded once per test process, and the Redis
server that tests which need one use."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Final

import pytest
import redis

from bench.farm import free_port
from synthesis.batcher import Batcher
from synthesis.engine import Engine, EngineOptions, Scales
from synthesis.phonemes import Phonemizer
from synthesis.pipeline import Synthesizer
from ttsfarm.core.voices import Voice, resolve_voice

DETERMINISTIC = Scales(noise_scale=0.0, length_scale=1.0, noise_w=0.0)

DEFAULT_REDIS_SERVER: Final = "redis://127.0.0.1:6379"
"""Where scripts/services starts Redis. TTSFARM_TEST_REDIS names another server: two suites run
at once must not share one."""
REDIS_START_SECONDS: Final = 10.0

_own_redis: subprocess.Popen[bytes] | None = None
_own_redis_url: str | None = None


def redis_server() -> str:
    """The Redis server of this test process, without a database. Under pytest-xdist each
    process after the first starts one of its own the first time it asks (a test module or a
    conftest may ask as it is imported, before ``pytest_configure``), so that parallel tests
    never share a database, a queue or a worker's broadcasts."""
    global _own_redis, _own_redis_url
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    if _own_redis is None and worker != "gw0" and shutil.which("redis-server") is not None:
        _own_redis, _own_redis_url = _start_redis(worker)
    return _own_redis_url or os.environ.get("TTSFARM_TEST_REDIS", DEFAULT_REDIS_SERVER)


def emptied(url: str) -> Iterator[redis.Redis]:
    """The Redis database at ``url``, emptied before and after the test that uses it (a
    fixture's body: ``yield from emptied(URL)``)."""
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


def pytest_configure(config: pytest.Config) -> None:
    given = getattr(config, "workerinput", None)
    if given is not None:  # a test process of pytest-xdist
        _share_cpus(int(given["workerid"].removeprefix("gw")), int(given["workercount"]))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _own_redis is not None:
        _own_redis.terminate()
        _own_redis.wait(10)


def _share_cpus(index: int, workers: int) -> None:
    """Run this test process, and every process it starts, on its own share of the CPUs. The
    voice's onnxruntime threads follow the CPUs a process may use (``synthesis.sessions.cpu_count``):
    without shares, each process would run as many threads as there are CPUs, and threads that
    wait spinning would take the time of another process's."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= workers:
        os.sched_setaffinity(0, cpus[index % workers :: workers])


def _start_redis(worker: str) -> tuple[subprocess.Popen[bytes], str]:
    """A redis-server that keeps nothing, on a free local port: (its process, its URL)."""
    port = free_port()
    process = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    deadline = time.monotonic() + REDIS_START_SECONDS
    while not _answers(client):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the redis-server of test process {worker} did not start")
        time.sleep(0.05)
    client.close()
    return process, f"redis://127.0.0.1:{port}"


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.exceptions.ConnectionError:
        return False


@pytest.fixture(scope="session")
def voice() -> Voice:
    return resolve_voice("joe")


@pytest.fixture(scope="session")
def engine(voice: Voice) -> Engine:
    return Engine.load(voice, EngineOptions(provider="cpu"))


@pytest.fixture(scope="session")
def phonemizer(voice: Voice) -> Phonemizer:
    return Phonemizer(voice)


@pytest.fixture
def synthesizer(engine: Engine) -> Iterator[Synthesizer]:
    """A synthesizer whose batcher drives the shared CPU engine."""
    with Batcher(lambda voice: engine, max_batch=8, max_wait=0.05) as batcher:
        yield Synthesizer(batcher)
