"""Which engine runs a voice: the staged engine (v2) on a GPU, the single session elsewhere."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

from ttsfarm.voices import Voice
from worker.engine import Engine, EngineOptions
from worker.sessions import wants_cuda

if TYPE_CHECKING:
    from worker.staged import StagedEngine

log = logging.getLogger(__name__)

EngineKind = Literal["auto", "staged", "single"]
ENGINE_KINDS: Final = ("auto", "staged", "single")

STAGED_FROM_BATCH: Final = 16
"""``auto`` takes the staged engine on a GPU for batches of at least this many segments. Its
waveform graphs run one at a time, which small batches leave the GPU idle for: at batch 8 with
3 runners it made 1,908 speech s/s against the single-session engine's 2,435; at 32, 4,289
against 3,135 (run 8, docs/benchmarks.md)."""

VoiceEngine: TypeAlias = "Engine | StagedEngine"
"""What the batcher drives: both have the same methods (``run``, ``prepare``, ...)."""


def wants_staged(kind: EngineKind, on_gpu: bool, max_batch: int) -> bool:
    """Whether to run a voice staged: asked for, or ``auto`` on a GPU with large batches."""
    return kind == "staged" or (kind == "auto" and on_gpu and max_batch >= STAGED_FROM_BATCH)


def load_engine(
    voice: Voice, options: EngineOptions, kind: EngineKind = "auto", max_batch: int = STAGED_FROM_BATCH
) -> VoiceEngine:
    """The engine for ``voice`` (see :func:`wants_staged`).

    A voice whose graph cannot be cut into stages runs in the single-session engine, with a log
    line saying why; ``staged`` asked for explicitly then does the same.
    """
    if wants_staged(kind, wants_cuda(options.provider), max_batch):
        from worker.staged import StagedEngine  # not imported for the CPU's single session
        from worker.stages import UnsupportedGraph

        try:
            return StagedEngine(voice, options)
        except UnsupportedGraph as error:
            log.warning("voice %s does not split into stages (%s): single-session engine", voice.name, error)
    return Engine(voice, options)
