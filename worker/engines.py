"""Which engine runs a voice: the staged engine (v2) on a GPU, the single session elsewhere."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

from ttsfarm.voices import Voice
from worker.engine import Engine, EngineOptions

if TYPE_CHECKING:
    from worker.staged import StagedEngine

log = logging.getLogger(__name__)

EngineKind = Literal["auto", "staged", "single"]
ENGINE_KINDS: Final = ("auto", "staged", "single")

VoiceEngine: TypeAlias = "Engine | StagedEngine"
"""What the batcher drives: both have the same methods (``run``, ``prepare``, ...)."""


def wants_staged(kind: EngineKind) -> bool:
    """Whether to run a voice staged: only when asked for (``TTSFARM_ENGINE=staged``).

    ``auto`` takes the single-session engine everywhere for now. In run 11 on an H200, two
    changes tried on the staged engine made it return all-NaN segments, and both were taken out
    (docs/benchmarks.md). The code as it stands has not run the farm on a GPU since a short batch
    began taking a prepared front with more rows. Until it does, engine v2 is opt-in. It pays on
    a GPU with batches of 16 and more: at batch 8 with 3 runners it made 1,908 speech s/s
    against the single-session engine's 2,435 (run 8).
    """
    return kind == "staged"


def load_engine(voice: Voice, options: EngineOptions, kind: EngineKind = "auto") -> VoiceEngine:
    """The engine for ``voice`` (see :func:`wants_staged`).

    A voice whose graph cannot be cut into stages runs in the single-session engine, with a log
    line saying why; ``staged`` asked for explicitly then does the same.
    """
    if wants_staged(kind):
        from worker.staged import StagedEngine  # not imported for the CPU's single session
        from worker.stages import UnsupportedGraph

        try:
            return StagedEngine(voice, options)
        except UnsupportedGraph as error:
            log.warning("voice %s does not split into stages (%s): single-session engine", voice.name, error)
    return Engine(voice, options)
