"""What the engine tests share."""

from __future__ import annotations

from pathlib import Path

from synthesis.engine import Engine

SENTENCES = [
    "Hi.",
    "The town of Ellery sat at the bend of a slow brown river.",
    "Children learned to swim off the wooden dock behind the post office, and their parents "
    "pretended not to notice.",
    "Not everyone was pleased.",
]
"""Four lengths: 13, 121, 239 and 59 phoneme ids."""


class EngineWrapper:
    """The tests' real engine behind a wrapper that changes one thing about it. The engine is
    shared by the tests: closing the wrapper (as a batcher does) leaves it open."""

    def __init__(self, engine: Engine) -> None:
        self.engine, self.voice, self.provider = engine, engine.voice, engine.provider

    def stage_totals(self) -> dict[str, float]:
        return self.engine.stage_totals()

    def close(self) -> None:
        """Nothing: the engine stays open for the tests after this one."""


LISTENING_SOCKET_FLAGS = "00010000"
"""The flags of a listening socket in ``/proc/net/unix``."""


def waiting_connections(address: str) -> int:
    """Connections to the Unix socket at ``address`` that it has not accepted yet: the kernel
    lists them under its path (Linux)."""
    lines = Path("/proc/net/unix").read_text().splitlines()
    return sum(
        1 for line in lines if line.endswith(f" {address}") and line.split()[3] != LISTENING_SOCKET_FLAGS
    )
