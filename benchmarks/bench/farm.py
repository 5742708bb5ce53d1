"""A farm on one machine, for the farm benchmarks and the farm tests alike: free ports, an S3
endpoint (moto's server, a test dependency), the workers' environment, and ``ttsfarm worker``
processes started, waited for and stopped."""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final

CREDENTIALS: Final = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
}
"""What moto's S3 server accepts; the workers and the client use the same."""
READY_MARK: Final = " ready."
"""Celery's log line once a worker consumes (after ``ttsfarm worker`` loaded its model)."""
START_TIMEOUT_SECONDS: Final = 300.0
POLL_SECONDS: Final = 0.2
LAUNCHED: Final = "# launched at "
"""The first line of a worker's log from :func:`start_worker`: when its process was started."""
START_MARKS: Final = {
    "first_line": "",
    "engine_loading": "loading voice ",
    "voice_loaded": " loaded on ",
    "engine_ready": "engine ready",
    "connected": "Connected to ",
    "ready": READY_MARK,
}
"""The steps of a worker's start, by a text of their log line: each step's first line, but the
last "ready." (with consumers, when the last of them was ready)."""
_STAMP = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_s3(port: int | None = None) -> tuple[Any, str]:
    """moto's S3 server on ``port`` (a free local one by default): (server, endpoint URL);
    ``server.stop()`` ends it."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = port or free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server, f"http://127.0.0.1:{port}"


def farm_env(redis_url: str, s3_endpoint: str, storage_url: str, **settings: str) -> dict[str, str]:
    """The environment of a worker (or a command) of this farm: this process's, without its own
    ``TTSFARM_*`` and ``AWS_*`` variables, plus the farm's and ``settings`` (``TTSFARM_*`` names)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTSFARM_", "AWS_"))}
    env.update(CREDENTIALS)
    env.update(
        TTSFARM_BROKER_URL=redis_url, TTSFARM_STORAGE_URL=storage_url, TTSFARM_S3_ENDPOINT_URL=s3_endpoint
    )
    env.update(settings)
    return env


def start_worker(
    arguments: Sequence[str],
    env: dict[str, str],
    log_path: Path,
    timeout: float = START_TIMEOUT_SECONDS,
    checkout: Path | None = None,
) -> subprocess.Popen[bytes]:
    """``ttsfarm worker ARGUMENTS`` in its own process, logging to ``log_path``; returns once it
    is ready (each of its consumers, with ``--consumers`` or ``TTSFARM_CONSUMERS``), or raises
    ``RuntimeError`` with the end of its log. With ``checkout``, the worker runs that copy of
    the source tree (started in it, so ``python -m`` imports it first, and relative paths in its
    settings are read from there): to compare two commits."""
    given = list(arguments)
    consumers = int(
        given[given.index("--consumers") + 1] if "--consumers" in given else env.get("TTSFARM_CONSUMERS", 1)
    )
    with log_path.open("wb") as log:
        log.write(f"{LAUNCHED}{datetime.now().isoformat(sep=' ', timespec='milliseconds')}\n".encode())
        log.flush()
        process = subprocess.Popen(
            [sys.executable, "-m", "ttsfarm", "worker", *arguments],
            env=env,
            stdout=log,
            stderr=log,
            cwd=checkout,
        )
    deadline = time.monotonic() + timeout
    while log_path.read_text(errors="replace").count(READY_MARK) < consumers:
        if process.poll() is not None:
            raise RuntimeError(f"worker exited early:\n{log_path.read_text(errors='replace')[-3000:]}")
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"worker not ready after {timeout:.0f} s (log: {log_path})")
        time.sleep(POLL_SECONDS)
    return process


def start_timeline(log_path: Path) -> dict[str, float]:
    """Seconds from a worker's launch (:func:`start_worker`) to each step of its start
    (:data:`START_MARKS`) that its log shows: where a start's time goes."""
    lines = log_path.read_text(errors="replace").splitlines()
    if not lines or not lines[0].startswith(LAUNCHED):
        return {}
    launched = datetime.fromisoformat(lines[0].removeprefix(LAUNCHED))
    timeline: dict[str, float] = {}
    for line in lines[1:]:
        stamp = _STAMP.search(line)
        for step, mark in START_MARKS.items():
            if stamp and (step not in timeline or step == "ready") and mark in line:
                at = datetime.fromisoformat(stamp.group(1).replace(",", "."))
                timeline[step] = round((at - launched).total_seconds(), 2)
    return timeline


def stop_workers(workers: Sequence[subprocess.Popen[bytes]], grace: float = 60.0) -> None:
    """Stop worker processes: SIGTERM, then SIGKILL for one still running after ``grace`` s."""
    for worker in workers:
        worker.terminate()
    for worker in workers:
        try:
            worker.wait(grace)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
