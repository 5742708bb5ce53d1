"""``python -m tests.farm.ready_hook_worker FOLDER ARGUMENTS``: ``ttsfarm worker ARGUMENTS`` held
still right after it says ready, until FOLDER/go exists.

A busy machine can pause a worker between its "ready" and its event loop's first tick; here the
pause is made certain. The hold is the last ``worker_ready`` handler: it is connected when the
worker starts (``worker_init``), after the worker's own, and it runs in the thread that runs the
loop. It writes FOLDER/ready once it holds.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from celery.signals import worker_init, worker_ready

from ttsfarm.cli import main

HOLD_LIMIT_SECONDS = 30.0


def hold_at_ready(folder: Path) -> None:
    def hold(**_: Any) -> None:
        (folder / "ready").touch()
        deadline = time.monotonic() + HOLD_LIMIT_SECONDS
        while not (folder / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.01)

    def connect_hold(**_: Any) -> None:
        worker_ready.connect(hold, weak=False)

    worker_init.connect(connect_hold, weak=False)


if __name__ == "__main__":
    hold_at_ready(Path(sys.argv[1]))
    sys.exit(main(["worker", *sys.argv[2:]]))
