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

VoiceEngine: TypeAlias = "Engine | StagedEngine"
"""What the batcher drives: both have the same methods (``run``, ``prepare``, ...)."""


def load_engine(voice: Voice, options: EngineOptions, kind: EngineKind = "auto") -> VoiceEngine:
    """The engine for ``voice``: ``auto`` is staged on CUDA and single on the CPU.

    A voice whose graph cannot be cut into stages runs in the single-session engine, with a log
    line saying why; ``staged`` asked for explicitly then does the same.
    """
    staged = kind == "staged" or (kind == "auto" and wants_cuda(options.provider))
    if staged:
        from worker.staged import StagedEngine  # not imported for the CPU's single session
        from worker.stages import UnsupportedGraph

        try:
            return StagedEngine(voice, options)
        except UnsupportedGraph as error:
            log.warning("voice %s does not split into stages (%s): single-session engine", voice.name, error)
    return Engine(voice, options)
