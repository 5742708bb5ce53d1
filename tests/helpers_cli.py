"""What the command-line tests share: the ``ttsfarm`` command run as a user runs it, in a
process of its own with none of this environment's ttsfarm settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

TIMEOUT_SECONDS = 240


def environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without ttsfarm settings, plus ``env``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TTSFARM_")}
    environ.update(env or {})
    return environ


def command(*args: str | bytes) -> list[str | bytes]:
    return [sys.executable, "-m", "ttsfarm", *args]


def ttsfarm(
    *args: str | bytes, cwd: Path, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """``ttsfarm ARGS`` with ``stdin`` piped in (nothing by default); output as bytes. An
    argument given as bytes reaches the command as those bytes."""
    return subprocess.run(
        command(*args),
        cwd=cwd,
        env=environment(env),
        input=stdin or b"",
        capture_output=True,
        timeout=TIMEOUT_SECONDS,
    )


def ttsfarm_text(
    *args: str | bytes, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """As :func:`ttsfarm`, with nothing on standard input and the output as text."""
    return subprocess.run(
        command(*args),
        cwd=cwd,
        env=environment(env),
        input="",
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
    )


def zero_runs(audio: np.ndarray) -> list[int]:
    """Lengths of the runs of digital silence (samples that are exactly 0) in ``audio``, in order."""
    silent = np.concatenate(([0], (audio == 0).astype(np.int8), [0]))
    edges = np.flatnonzero(np.diff(silent))
    return [int(n) for n in edges[1::2] - edges[::2]]
