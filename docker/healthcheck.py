#!/usr/bin/env python3
"""Container health checks for the ttsfarm image (installed as ``ttsfarm-healthcheck``).

    ttsfarm-healthcheck worker ttsfarm-gpu0   # that worker, on this host, can run a batch
    ttsfarm-healthcheck flower [PORT]         # Flower answers on /healthcheck (no login needed)
    ttsfarm-healthcheck gateway [PORT]        # the HTTP gateway answers on /healthz (no key needed)

Exit status 0 is healthy, 1 is not (the reason goes to stderr, which ``docker inspect`` shows).
The worker check imports neither onnxruntime nor the model: it asks the worker, through the
broker, whether its engine ran a batch in the last 30 s or can run a one-word batch now
(``worker/health.py``). A worker whose consumer answers but whose engine cannot run fails it.
"""

from __future__ import annotations

import socket
import sys
import urllib.request
from typing import Final

PING_TIMEOUT_SECONDS: Final = 5.0
"""The worker's probe batch may take this long; the reply gets a few seconds more."""
FLOWER_DEFAULT_PORT: Final = 5555
GATEWAY_DEFAULT_PORT: Final = 8000


def check_worker(name: str) -> str | None:
    """None if the worker ``name@<this host>`` says its engine runs, else why not. A worker with
    consumers (``TTSFARM_CONSUMERS``) is healthy when every consumer answers so."""
    from ttsfarm.core.settings import PROBE_TIMEOUT_SECONDS, Settings
    from ttsfarm.farm.celeryconf import make_celery, worker_nodes

    settings = Settings.load()
    nodes = worker_nodes(name if "@" in name else f"{name}@{socket.gethostname()}", settings.consumers)
    app = make_celery(settings)
    wait = PROBE_TIMEOUT_SECONDS + PING_TIMEOUT_SECONDS
    try:
        replies = app.control.broadcast(
            "ttsfarm_health",
            arguments={"timeout": PROBE_TIMEOUT_SECONDS},
            destination=nodes,
            reply=True,
            timeout=wait,
            limit=len(nodes),
        )
    except Exception as error:  # any broker failure means unhealthy
        return f"broker unreachable: {error}"
    for node in nodes:
        report = next((reply[node] for reply in replies if node in reply), None)
        if report is None:
            return f"worker {node} did not answer within {wait:.0f} s"
        if not isinstance(report, dict):
            return f"worker {node} answered {report!r}"
        if not report.get("ok"):
            return f"worker {node}: its engine cannot run: {report.get('error')}"
    return None


def _get(url: str, healthy: str) -> str | None:
    """None if ``url`` answers ``healthy``, else why not."""
    try:
        with urllib.request.urlopen(url, timeout=PING_TIMEOUT_SECONDS) as response:
            body = response.read().decode()
    except OSError as error:
        return f"{url}: {error}"
    return None if body.strip() == healthy else f"{url} answered {body[:80]!r}"


def check_flower(port: int) -> str | None:
    """None if Flower on this host answers its health endpoint, else why not."""
    return _get(f"http://127.0.0.1:{port}/healthcheck", "OK")


def check_gateway(port: int) -> str | None:
    """None if the gateway on this host answers /healthz, else why not."""
    return _get(f"http://127.0.0.1:{port}/healthz", '{"status":"ok"}')


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "worker":
        problem = check_worker(argv[1])
    elif argv and argv[0] == "flower":
        problem = check_flower(int(argv[1]) if len(argv) > 1 else FLOWER_DEFAULT_PORT)
    elif argv and argv[0] == "gateway":
        problem = check_gateway(int(argv[1]) if len(argv) > 1 else GATEWAY_DEFAULT_PORT)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    if problem:
        print(problem, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
