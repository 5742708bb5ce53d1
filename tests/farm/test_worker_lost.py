"""No job is lost when a worker dies mid-job: the job comes back and another worker finishes it."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path

import psutil
import redis

from producer import Client
from synthesis.scratch import LOCK_SUFFIX, TEMP_PREFIX, job_folder
from tests.farm.conftest import EXAMPLE, REDIS_SERVER, WorkerProcess, farm_env, wait_for
from ttsfarm.core.settings import Settings

LOST_REDIS_URL = f"{REDIS_SERVER}/12"  # own database: its short visibility timeout stays here
VISIBILITY_SECONDS = "8"


def test_job_of_a_killed_worker_is_finished_by_another(s3_endpoint: str, s3, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    redis.Redis.from_url(LOST_REDIS_URL).flushdb()
    temp = tmp_path / "temp"  # shared by both workers and by this test process
    temp.mkdir()
    env = farm_env(
        LOST_REDIS_URL,
        s3_endpoint,
        TTSFARM_VISIBILITY_TIMEOUT_SECONDS=VISIBILITY_SECONDS,
        TTSFARM_TEMP_DIR=str(temp),
        TTSFARM_TEXT_PROCESSES="1",
        TTSFARM_MAX_BATCH="1",  # progress after each segment: the first comes early in the job
    )
    settings = Settings(broker_url=LOST_REDIS_URL, visibility_timeout_seconds=int(VISIBILITY_SECONDS))
    doomed = WorkerProcess(env, tmp_path / "doomed.log", "doomed", concurrency=1)
    with Client(settings) as client, job_folder(str(temp)) as live, _stopped_at_the_end(doomed):
        # about 150 s of speech, made a segment at a time: a CPU worker is still on it for many
        # seconds after its first segment (the text alone, made in batches of 8, was once done
        # between two looks). Given a loudness, it is spoken into a temp folder (a finishing
        # process masters it there); a job without one leaves no named file to sweep.
        job_id = client.submit("\n\n".join([EXAMPLE] * 2), length_scale=0.5, loudness=-20)

        def running_with_a_segment_done() -> bool:
            status = client.status(job_id)  # one read: the state and the progress together
            assert status.state in ("queued", "running"), f"the job ended first: {status.state}"
            return status.state == "running" and status.segments_done > 0

        wait_for(running_with_a_segment_done, 60, "the first segment")
        left = {p.name for p in temp.glob(f"{TEMP_PREFIX}*")} - {live.name, f"{live.name}{LOCK_SUFFIX}"}
        assert len(left) == 2  # the running job's folder and its lock file
        children = psutil.Process(doomed.process.pid).children(recursive=True)
        assert children, "the worker runs its text process"
        doomed.process.send_signal(signal.SIGKILL)  # no goodbye, no requeue by the worker itself
        doomed.process.wait()
        wait_for(lambda: not any(_alive(child) for child in children), 20, "the text processes to end")
        doomed.stop()
        rescuer = WorkerProcess(env, tmp_path / "rescuer.log", "rescuer", concurrency=2)
        try:
            assert not left & {p.name for p in temp.iterdir()}, "the killed worker's temp files stayed"
            assert live.is_dir(), "the folder of a live process was removed"
            result = client.wait(job_id, timeout=120)
        finally:
            rescuer.stop()
        assert client.status(job_id).attempts >= 2
        assert result.duration > 30
        assert result.segments[0].text.startswith("The town of Ellery")


@contextlib.contextmanager
def _stopped_at_the_end(worker: WorkerProcess) -> Iterator[None]:
    """A failed check must not leave the worker running into the tests after this one."""
    try:
        yield
    finally:
        if worker.process.poll() is None:
            worker.stop()


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
