"""The staged engine's frame buckets, and each batch's frame plan: which phoneme's prior every
decoder frame repeats, and which frames are real (``synthesis.staged`` feeds both to expand)."""

from __future__ import annotations

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
Plan = tuple[np.ndarray, np.ndarray]
"""Each frame's row-major index into the ``(rows * ids)`` prior, and the frame mask."""


def frame_plan(durations: np.ndarray, frames: int) -> Plan:
    """Each of ``frames`` frames' row-major index into the ``(rows * ids)`` prior, and the frame
    mask, for integer ``durations`` of ``(rows, ids)`` that sum to at most ``frames`` per row.
    A frame past its row's length points at the row's first id and is masked out. In a few
    whole-array steps, not a loop over rows: it runs in a batcher runner, and every step holds
    the worker's GIL (docs/benchmarks.md, run 31)."""
    rows, width = durations.shape
    spoken = np.arange(frames) < durations.sum(axis=1)[:, None]
    index = np.repeat(np.arange(0, rows * width, width, dtype=np.int64)[:, None], frames, axis=1)
    index[spoken] = np.repeat(np.arange(rows * width, dtype=np.int64), durations.ravel())
    return index, spoken[:, None, :].astype(np.float32)


def frame_bucket(frames: int) -> int:
    return first_at_least(frames, FRAME_BUCKETS, FRAME_STEP_PAST_BUCKETS)
