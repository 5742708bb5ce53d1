"""The staged engine's frame buckets, and each batch's frame plan: the durations and the frame
count its expand stage turns into which phoneme's prior every decoder frame repeats, and which
frames are real (computed by ``synthesis.stages.expand_model``, on the engine's device)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from synthesis.buckets import first_at_least

FRAME_BUCKETS: Final = (64, 96, 128, 160, 192, 256, 320, 384, 448, 512, 640, 768, 896, 1024, 1280, 1536)
"""Decoder lengths (frames) a batch is padded up to on the GPU: one captured graph each per row
bucket. A batch takes the smallest that holds its longest item's real frame count."""
FRAME_STEP_PAST_BUCKETS: Final = 256
FRAMES_PER_ID_AT_MOST: Final = 2.8
"""Frames per phoneme id that ``StagedEngine.prepare`` captures graphs for (at length scale
1): a Piper voice speaks 1.9 to 2.7 (docs/benchmarks.md). Longer batches capture on first use."""


@dataclass(frozen=True, eq=False)
class Plan:
    """What the expand stage needs to lay a batch's prior out frame by frame.

    Only these go from the host to the device; the per-frame index and mask are computed there.
    The host built them before 2026-12-01: numpy steps on ``rows * frames`` arrays, each letting
    go of the worker's GIL and waiting to win it back, 3.2-3.7 ms per batch in a worker against
    0.4 alone (docs/decisions/0025-frame-plan-on-the-device.md).
    """

    durations: np.ndarray
    """Frames per phoneme id, ``(rows, ids)``, int64, C-contiguous."""
    frames: int
    """The decoder length the batch is padded to: at least every row's total."""

    @property
    def rows(self) -> int:
        return int(self.durations.shape[0])


def frame_bucket(frames: int) -> int:
    return first_at_least(frames, FRAME_BUCKETS, FRAME_STEP_PAST_BUCKETS)
