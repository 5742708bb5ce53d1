"""Which engine runs a voice: the staged engine (v2) on a GPU, the single session elsewhere."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final, TypeAlias

from synthesis.engine import Engine, EngineOptions
from synthesis.sessions import wants_cuda
from ttsfarm.core.settings import EngineName
from ttsfarm.core.voices import Voice

if TYPE_CHECKING:
    from synthesis.staged import StagedEngine

log = logging.getLogger(__name__)


STAGED_FROM_BATCH: Final = 8
"""``auto`` runs a GPU voice staged for batches of at least this many segments: at 8 it is ahead
of the single session engine alone and through the farm, and ready sooner. Below 8 it has not
been measured: its waveform graphs run one at a time, which small batches leave the GPU idle
for (docs/decisions/0012-staged-engine-cuda-graphs.md)."""
VoiceEngine: TypeAlias = "Engine | StagedEngine"
"""What the batcher drives: both have the same methods (``run``, ``prepare``, ...)."""


def wants_staged(kind: EngineName, on_gpu: bool, max_batch: int) -> bool:
    """Whether to run a voice staged (engine v2): asked for, or ``auto`` on a GPU with batches
    of at least :data:`STAGED_FROM_BATCH`.

    The evidence, audio quality included, is in docs/decisions/0012-staged-engine-cuda-graphs.md;
    a segment that is not finite is never written in any case (``InvalidAudio``).
    """
    if kind == "auto":
        return on_gpu and max_batch >= STAGED_FROM_BATCH
    return kind == "staged"


def load_engine(
    voice: Voice, options: EngineOptions, kind: EngineName = "auto", max_batch: int = STAGED_FROM_BATCH
) -> VoiceEngine:
    """The engine for ``voice`` (see :func:`wants_staged`).

    A voice whose graph cannot be cut into stages runs in the single-session engine, with a log
    line saying why; ``staged`` asked for explicitly then does the same.
    """
    log.info("loading voice %s (provider %s, device %d)", voice.name, options.provider, options.device_id)
    if wants_staged(kind, wants_cuda(options.provider), max_batch):
        from synthesis.staged import StagedEngine  # not imported for the CPU's single session
        from synthesis.stages import UnsupportedGraph

        try:
            return StagedEngine(voice, options)
        except UnsupportedGraph as error:
            log.warning("voice %s does not split into stages (%s): single-session engine", voice.name, error)
    return Engine.load(voice, options)
