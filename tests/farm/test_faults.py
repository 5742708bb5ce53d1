"""Faults injected into a real farm: Redis restarted under running jobs, a bucket that is not back
yet, a job longer than the visibility timeout. Each test states the fault, injects it, and checks
that no job is lost, duplicated or left stuck."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
import redis

from producer import Client
from tests.farm.conftest import (
    BUCKET,
    CREDENTIALS,
    EXAMPLE,
    PREFIX,
    WorkerProcess,
    farm_env,
    free_port,
    task_events,
    wait_for,
)
from ttsfarm.core.settings import Settings
from ttsfarm.farm.celeryconf import MAX_RETRIES


def stored(s3, key: str) -> bool:  # type: ignore[no-untyped-def]
    return "Contents" in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}/{key}")


class RedisServer:
    """A redis-server of this test's own, that it can stop: persistent (an append-only file), or
    keeping nothing, as a cache-only Redis does."""

    def __init__(self, folder: Path, persistent: bool = True) -> None:
        """``persistent``: an append-only file; otherwise only what ``SHUTDOWN SAVE`` snapshots."""
        self.folder, self.port, self.persistent = folder, free_port(), persistent
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                *("redis-server", "--bind", "127.0.0.1", "--port", str(self.port)),
                *("--dir", str(self.folder), "--appendonly", "yes" if self.persistent else "no"),
                *("--save", ""),
            ],
            stdout=subprocess.DEVNULL,
        )
        wait_for(self.up, 10, "redis-server to start")

    def up(self) -> bool:
        try:
            return bool(redis.Redis(port=self.port).ping())
        except redis.exceptions.ConnectionError:
            return False

    def crash(self) -> None:
        """Stop at once, without a final save (what the append-only file has survives)."""
        with contextlib.suppress(redis.exceptions.ConnectionError):  # it closes the connection
            redis.Redis(port=self.port).shutdown(nosave=True)
        self.process.wait(10)

    def shut_down(self, save: bool) -> None:
        """``SHUTDOWN SAVE`` or ``NOSAVE``, as an operator restarting Redis does."""
        with contextlib.suppress(redis.exceptions.ConnectionError):
            redis.Redis(port=self.port).shutdown(save=save, nosave=not save)
        self.process.wait(10)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    yield server
    server.stop()


def test_jobs_running_when_redis_restarts_finish(
    own_redis: RedisServer, s3_endpoint: str, s3, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    env = farm_env(own_redis.url, s3_endpoint)
    worker = WorkerProcess(env, tmp_path / "worker.log", "restart", concurrency=2)
    try:
        with Client(Settings(broker_url=own_redis.url)) as client:
            ids = client.submit_many([EXAMPLE[:900], EXAMPLE[900:1800]])
            wait_for(lambda: all(client.status(i).state == "running" for i in ids), 60, "both jobs to run")
            own_redis.crash()
            # Both finish while Redis is down: their audio and result reach S3, their state cannot.
            wait_for(lambda: all(stored(s3, f"{i}.json") for i in ids), 120, "both jobs to store audio")
            own_redis.start()
            back = time.monotonic()
            results = [client.wait(job_id, timeout=120) for job_id in ids]
            recovered = time.monotonic() - back
            for job_id, result in zip(ids, results, strict=True):
                head = s3.head_object(Bucket=BUCKET, Key=f"{PREFIX}/{job_id}.wav")
                assert head["ContentLength"] == result.size
                status = client.status(job_id)
                assert (status.state, status.attempts) == ("succeeded", 1)
            print(f"both jobs recorded {recovered:.1f} s after Redis came back")
    finally:
        worker.stop()


@pytest.mark.parametrize(
    ("persistent", "save"),
    [(True, True), (True, False), (False, True), (False, False)],
    ids=["append-only, shutdown save", "append-only, shutdown nosave", "snapshot only", "nothing kept"],
)
def test_a_worker_lives_through_a_redis_restart_and_takes_new_jobs(
    s3_endpoint: str, s3, tmp_path: Path, persistent: bool, save: bool
) -> None:  # type: ignore[no-untyped-def]
    """Redis shut down under a running job and started again 4 s later: the job is recorded once,
    the worker goes on, and the jobs submitted then are done, each delivered once. Without an
    append-only file, ``SHUTDOWN SAVE`` writes a snapshot; a Redis that keeps nothing forgets the
    job's record and message, and the worker records its end anew."""
    own_redis = RedisServer(tmp_path, persistent)
    worker = None
    try:
        worker = WorkerProcess(farm_env(own_redis.url, s3_endpoint), tmp_path / "worker.log", "restart", 2)
        with Client(Settings(broker_url=own_redis.url)) as client:
            (running,) = client.submit_many([EXAMPLE[:2500]])
            wait_for(lambda: client.status(running).state == "running", 60, "the job to run")
            own_redis.shut_down(save)
            time.sleep(4)  # the worker's connections see the outage; it retries meanwhile
            own_redis.start()
            if not (persistent or save):  # the record is gone with Redis until the worker records the end
                wait_for(lambda: client.status(running).state != "unknown", 180, "the job's end recorded")
            first = client.wait(running, timeout=180)
            with task_events(own_redis.url) as seen:  # monitors see the jobs after the restart too
                wait_for(lambda: any(e["type"] == "worker-heartbeat" for e in seen), 30, "events")
                later = client.submit_many(["After the restart, one.", "After the restart, two."])
                results = [client.wait(job_id, timeout=120) for job_id in later]
                succeeded = lambda: {e.get("uuid") for e in seen if e["type"] == "task-succeeded"}  # noqa: E731
                wait_for(lambda: set(later) <= succeeded(), 5, "their events")
            assert worker.process.poll() is None, worker.log_path.read_text()[-3000:]
            for job_id in [running, *later]:
                assert client.status(job_id).state == "succeeded"
            log = worker.log_path.read_text()
            assert all(log.count(f"{job_id}] received") == 1 for job_id in later)
            assert "Unrecoverable error" not in log
            unacked = redis.Redis.from_url(own_redis.url).zcard("unacked_index")
            assert unacked == 0  # every message acknowledged: none comes back later
    finally:
        if worker is not None:
            worker.stop()
        own_redis.stop()  # also when the worker did not start: no redis-server outlives its test
    assert first.duration > 100 and all(r.duration > 0 for r in results)


def test_a_bucket_not_there_yet_is_waited_for(
    redis_url: str, s3_endpoint: str, s3, client: Client, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """S3 is back but the bucket is not (a restarted store, a volume being restored): the worker
    takes no jobs until it can store them, then runs them once."""
    bucket = f"late-{uuid.uuid4().hex[:8]}"
    env = farm_env(
        redis_url, s3_endpoint, TTSFARM_QUEUE="late-bucket", TTSFARM_STORAGE_URL=f"s3://{bucket}/a"
    )
    worker = WorkerProcess(env, tmp_path / "late.log", "late-bucket", concurrency=1)
    try:
        with Client(replace(client.settings, queue="late-bucket")) as late:
            job_id = late.submit("Stored once the bucket is back.")
            found_none = lambda: "NoSuchBucket" in worker.log_path.read_text()  # noqa: E731
            wait_for(found_none, 60, "the worker to find no bucket")
            time.sleep(3)
            assert (late.status(job_id).state, late.status(job_id).attempts) == ("queued", 0)
            s3.create_bucket(Bucket=bucket)
            back = time.monotonic()
            result = late.wait(job_id, timeout=60)
            print(f"stored {time.monotonic() - back:.1f} s after the bucket came back")
            assert late.status(job_id).attempts == 1
    finally:
        worker.stop()
    assert result.location == f"s3://{bucket}/a/{job_id}.wav"
    assert s3.head_object(Bucket=bucket, Key=f"a/{job_id}.wav")["ContentLength"] == result.size


def test_retries_outlast_a_minute_of_outage() -> None:
    """The default backoff (2 s, doubling) spans two minutes before a job fails."""
    waits = [Settings().retry_backoff_seconds * 2**n for n in range(MAX_RETRIES)]
    assert sum(waits) >= 120


def test_a_job_longer_than_the_visibility_timeout_runs_once(
    redis_url: str, s3_endpoint: str, client: Client, tmp_path: Path
) -> None:
    """Each worker renews the messages of its running jobs: a 2 s visibility timeout and a job
    of many seconds, with a second worker waiting for anything handed out again."""
    queue = f"lease-{uuid.uuid4().hex[:6]}"
    env = farm_env(redis_url, s3_endpoint, TTSFARM_QUEUE=queue, TTSFARM_VISIBILITY_TIMEOUT_SECONDS="2")
    with ThreadPoolExecutor(2) as pool:  # both start at once: a CPU worker's start is mostly waiting
        starts = [pool.submit(WorkerProcess, env, tmp_path / f"{n}.log", f"lease-{n}", 1) for n in range(2)]
    workers = [start.result() for start in starts if start.exception() is None]
    try:
        for start in starts:
            start.result()  # a worker that did not start fails the test, once the other is stopped
        with Client(replace(client.settings, queue=queue)) as leased:
            job_id = leased.submit("\n\n".join([EXAMPLE] * 2))  # about 10 s on a 2-core CPU
            result = leased.wait(job_id, timeout=180)
            status = leased.status(job_id)
    finally:
        for worker in workers:
            worker.stop()
    assert status.submitted_at and status.finished_at
    took = status.finished_at - status.submitted_at
    assert took > 3 * 2, f"the job ran {took:.1f} s: too short to outlive the visibility timeout"
    assert status.attempts == 1
    ran = [w for w in workers if f"{job_id}] received" in w.log_path.read_text()]
    assert len(ran) == 1, "handed to both workers"
    assert result.duration > 200


def test_a_bucket_is_created_in_any_region(s3_endpoint: str, s3, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Outside us-east-1, S3 wants the region named when a bucket is made (a worker with
    TTSFARM_S3_CREATE_BUCKET in eu-west-1 failed before)."""
    from ttsfarm.storage.s3 import S3Storage, make_client

    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    bucket = f"eu-{uuid.uuid4().hex[:8]}"
    S3Storage(make_client(s3_endpoint, "eu-west-1"), bucket).ensure_bucket()
    assert s3.get_bucket_location(Bucket=bucket)["LocationConstraint"] == "eu-west-1"


def test_a_worker_that_cannot_go_on_exits_non_zero_saying_why(own_redis: RedisServer, tmp_path: Path) -> None:
    """Redis refuses the worker a command it needs (an ACL without BRPOP): Celery gives up with an
    unrecoverable error. The worker exits non-zero with one line saying so, not with 0 as if it
    had been asked to stop (a supervisor restarting on failure would leave the farm without it)."""
    redis.Redis(port=own_redis.port).acl_setuser(
        "worker",
        enabled=True,
        passwords=["+secret"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", "-brpop"],
    )
    broker = f"redis://worker:secret@127.0.0.1:{own_redis.port}/0"
    env = farm_env(broker, "http://127.0.0.1:1", TTSFARM_STORAGE_URL=str(tmp_path / "audio"))
    ended = subprocess.run(
        [sys.executable, "-m", "ttsfarm", "worker", "-n", "refused@%h"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ended.returncode == 1
    output = ended.stdout + ended.stderr
    assert "Unrecoverable error" in output
    assert "ttsfarm: the worker stopped on an unrecoverable error (exit status 1)" in output, output[-2000:]
