"""Disks and storage that fail under a real worker: a temp folder that fills up, a storage folder
that turns read-only, an S3 endpoint that is not up yet. The worker lives on, says what is wrong
in its log, and no job fails for good: each is retried, or waits in the queue, until it can be
stored.

The small disks are tmpfs mounts (they need root, as on the test machines; elsewhere these tests
are skipped, saying why)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bench.farm import start_s3
from producer import Client
from tests.farm.conftest import BUCKET, EXAMPLE, WorkerProcess, farm_env, free_port, healthcheck, wait_for

RECHECK_WAIT = 30.0
"""Longer than a worker's storage recheck (5 s) and a retry's backoff, with room for a slow machine."""


class SmallDisk:
    """A tmpfs of a given size at ``path``, which a test can fill, grow or make read-only."""

    def __init__(self, path: Path, size: str) -> None:
        self.path = path
        path.mkdir()
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
        )
        if mounted.returncode:
            pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.strip()}")

    def remount(self, options: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{options}", str(self.path)], check=True)

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], check=False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    disk = SmallDisk(tmp_path / "disk", "1m")
    yield disk
    disk.unmount()


def test_a_full_temp_folder_is_retried_until_space_is_freed(
    redis_url: str, s3_endpoint: str, client: Client, small_disk: SmallDisk, tmp_path: Path
) -> None:
    """A job's WAV does not fit a 1 MB temp disk: the job is retried (worded for its client), the
    worker's log names TTSFARM_TEMP_DIR, and once the disk is grown the job is stored."""
    queue = f"temp-full-{uuid.uuid4().hex[:6]}"
    env = farm_env(
        redis_url,
        s3_endpoint,
        TTSFARM_QUEUE=queue,
        TTSFARM_TEMP_DIR=str(small_disk.path),
        TTSFARM_RETRY_BACKOFF_SECONDS="2",
    )
    worker = WorkerProcess(env, tmp_path / "worker.log", queue, concurrency=1)
    try:
        with Client(replace(client.settings, queue=queue)) as farm:
            job_id = farm.submit(EXAMPLE[:700])  # about 45 s of speech: 2 MB of WAV

            def retried() -> bool:
                status = farm.status(job_id)
                return status.attempts >= 2 and "temp disk is full" in (status.error or "")

            wait_for(retried, 180, "the job to be retried on the full temp disk")
            assert str(small_disk.path) not in (farm.status(job_id).error or "")  # the path stays inside
            small_disk.remount("size=64m")
            result = farm.wait(job_id, timeout=300)
            status = farm.status(job_id)
    finally:
        worker.stop()
    log = worker.log_path.read_text()
    assert "is full (TTSFARM_TEMP_DIR)" in log and "Unrecoverable error" not in log
    assert status.state == "succeeded" and status.attempts >= 2
    assert result.duration > 30
    assert list(small_disk.path.iterdir()) == []  # nothing left, failed attempts' too


def test_a_worker_takes_no_jobs_while_its_storage_is_read_only(
    redis_url: str, s3_endpoint: str, client: Client, small_disk: SmallDisk, tmp_path: Path
) -> None:
    """A worker whose storage folder is read-only when it starts is not ready and leaves the
    queue alone; one whose folder turns read-only under it hands its job back and stops taking
    jobs. Both go on once the folder can be written, and every job is stored once."""
    queue = f"read-only-{uuid.uuid4().hex[:6]}"
    storage = small_disk.path / "audio"
    storage.mkdir()
    small_disk.remount("ro,size=64m")
    env = farm_env(redis_url, s3_endpoint, TTSFARM_QUEUE=queue, TTSFARM_STORAGE_URL=str(storage))
    worker = WorkerProcess(env, tmp_path / "worker.log", queue, concurrency=1)
    try:
        with Client(replace(client.settings, queue=queue, storage_url=str(storage))) as farm:
            waiting = farm.submit("Stored once the folder can be written.")
            time.sleep(8)
            assert (farm.status(waiting).state, farm.status(waiting).attempts) == ("queued", 0)
            unhealthy = healthcheck(env, queue)
            assert unhealthy.returncode == 1 and "storage cannot be written" in unhealthy.stderr
            small_disk.remount("rw")
            first = farm.wait(waiting, timeout=RECHECK_WAIT + 60)

            small_disk.remount("ro")
            handed_back = farm.submit("Handed back, then stored.")
            wait_for(lambda: "handed back to the queue" in worker.log_path.read_text(), 60, "the hand-back")
            time.sleep(2)
            assert farm.status(handed_back).state != "failed"
            small_disk.remount("rw")
            second = farm.wait(handed_back, timeout=RECHECK_WAIT + 60)
            assert healthcheck(env, queue).returncode == 0
    finally:
        worker.stop()
    log = worker.log_path.read_text()
    assert log.count("storage cannot be written: taking no jobs") == 2
    assert log.count("storage can be written again: taking jobs") == 2
    assert Path(first.location).is_file() and Path(second.location).is_file()
    assert not list(storage.glob(".ttsfarm-probe/*"))  # the probes leave nothing behind


@contextlib.contextmanager
def resolvable(name: str) -> Iterator[None]:
    """``name`` resolves to 127.0.0.1 (a line in /etc/hosts) within the block, and not outside it."""
    hosts = Path("/etc/hosts")
    before = hosts.read_text()
    hosts.write_text(f"{before.rstrip()}\n127.0.0.1 {name}\n")
    try:
        yield
    finally:
        hosts.write_text(before)


def test_a_worker_waits_for_its_s3_endpoint_to_resolve_and_come_up(
    redis_url: str, client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The storage endpoint's name does not resolve when the worker starts (a DNS blip), and then
    nothing answers there: the worker takes no jobs meanwhile. Once the endpoint answers, the
    worker makes its bucket (``TTSFARM_S3_CREATE_BUCKET``, as in compose, where workers do not
    wait for MinIO) and runs the job."""
    if not os.access("/etc/hosts", os.W_OK):
        pytest.skip("a DNS blip is made by editing /etc/hosts, which needs root")
    queue = f"s3-late-{uuid.uuid4().hex[:6]}"
    name, port = f"{queue}.ttsfarm-test", free_port()
    endpoint = f"http://{name}:{port}"
    monkeypatch.setenv("MOTO_S3_CUSTOM_ENDPOINTS", endpoint)  # moto: a host name, not a bucket's
    env = farm_env(redis_url, endpoint, TTSFARM_QUEUE=queue, TTSFARM_S3_CREATE_BUCKET="true")
    worker = WorkerProcess(env, tmp_path / "worker.log", queue, concurrency=1)
    server = None
    try:
        settings = replace(client.settings, queue=queue, s3_endpoint_url=endpoint)
        with Client(settings) as farm:
            job_id = farm.submit("Stored once the endpoint is up.")
            time.sleep(8)
            assert (farm.status(job_id).state, farm.status(job_id).attempts) == ("queued", 0)
            with resolvable(name):
                time.sleep(8)  # resolves, but nothing answers there yet
                assert farm.status(job_id).state == "queued"
                server, _ = start_s3(port)  # empty: the worker makes its bucket once it answers
                result = farm.wait(job_id, timeout=RECHECK_WAIT + 60)
                assert farm.status(job_id).attempts == 1
    finally:
        worker.stop()
        if server is not None:
            server.stop()
    assert result.location.startswith(f"s3://{BUCKET}/")
    assert worker.process.returncode == 0, "a stop asked for ends with status 0"
