"""Minimal reproduction of the Celery/kombu defect that ``worker/broker.py`` works around: a
Celery worker on the Redis transport stops for good when Redis restarts under a running task.

Nothing of ttsfarm is used: a plain Celery app with one task that sleeps, a thread pool, late
acknowledgement (as ttsfarm's workers run), a redis-server of its own. The task runs, Redis is
shut down and started again 5 s later, and the script reports whether the worker lived.

    .venv/bin/python scripts/repro_kombu_redis_restart.py

With celery 5.7.0 and kombu 5.7.0 it prints "reproduced": the worker logs ``Unrecoverable
error: AttributeError("'NoneType' object has no attribute 'hostname'")`` from
``restore_unacked_once`` and exits (status 1 from ``celery worker``; 0 through
``app.worker_main``, which drops the status: ``worker/app.py`` reads it itself). Earlier
reports of the same failure family upstream: celery/kombu#582 (that AttributeError when a
channel closes after its connection is gone) and celery/kombu#970 (unacknowledged messages not
restored on a restart). Once this prints "not reproduced" with newer releases,
``worker/broker.py`` can go.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis
from celery import Celery

BROKER = os.environ.get("REPRO_BROKER", "")
app = Celery("repro", broker=BROKER)
app.conf.update(task_acks_late=True, broker_connection_retry_on_startup=True, worker_hijack_root_logger=True)


@app.task(name="repro.sleep")
def sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_redis(port: int, folder: str) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", folder, "--appendonly", "yes"],
        stdout=subprocess.DEVNULL,
    )
    for _ in range(100):
        with contextlib.suppress(redis.exceptions.ConnectionError):
            if redis.Redis(port=port).ping():
                return server
        time.sleep(0.1)
    raise RuntimeError("redis-server did not start")


def wait_for(mark: bytes, log_path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while mark not in log_path.read_bytes():
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"no {mark!r} in the worker's log:\n{log_path.read_text(errors='replace')[-2000:]}"
            )
        time.sleep(0.2)


def main() -> int:
    port = free_port()
    broker = f"redis://127.0.0.1:{port}/0"
    with tempfile.TemporaryDirectory() as folder:
        server = start_redis(port, folder)
        log_path = Path(folder) / "worker.log"
        env = {**os.environ, "REPRO_BROKER": broker, "PYTHONPATH": str(Path(__file__).parent)}
        with log_path.open("wb") as log:
            worker = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    Path(__file__).stem,
                    "worker",
                    "-P",
                    "threads",
                    "-c",
                    "2",
                    "-l",
                    "INFO",
                ],
                env=env,
                stdout=log,
                stderr=log,
            )
        try:
            wait_for(b"ready.", log_path)
            Celery(broker=broker).send_task("repro.sleep", args=[15])
            wait_for(b"received", log_path)
            time.sleep(2)
            with contextlib.suppress(redis.exceptions.ConnectionError):
                redis.Redis(port=port).shutdown(save=True)
            server.wait(10)
            time.sleep(5)
            server = start_redis(port, folder)
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.wait(30)
            text = log_path.read_text(errors="replace")
            crashed = "Unrecoverable error" in text
            state = "is alive" if worker.returncode is None else f"exited with status {worker.returncode}"
            print(f"{'reproduced' if crashed else 'not reproduced'}: the worker {state}")
            for line in text.splitlines():
                if "Unrecoverable error" in line or "Restoring" in line:
                    print("  " + line.strip())
            return 0
        finally:
            worker.kill()
            worker.wait()
            server.terminate()
            server.wait()


if __name__ == "__main__":
    sys.exit(main())
