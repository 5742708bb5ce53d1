"""Shape buckets for the GPU: every batch is padded up to one of a few fixed shapes.

ONNX Runtime's CUDA convolutions keep the cuDNN plan of the last input shape they saw and build a
new one whenever the shape changes: over a millisecond per convolution, and a Piper voice has
over a hundred of them (232 ms against 12 ms per run on an H200,
docs/decisions/0001-shape-buckets.md). Real text
gives a new shape on almost every batch. The engine therefore keeps one session per bucket
(rows, phoneme ids, frames), and a session only ever sees its own shape. The price is the
padding, which stays small because the buckets are close together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

ROW_BUCKETS: Final = (1, 2, 4, 8, 16, 32, 64)
"""Batch sizes a batch is padded up to; past the last, multiples of it."""
ID_BUCKETS: Final = (32, 48, 64, 80, 96, 128, 160, 192, 256, 320, 400)
"""Phoneme-id lengths a batch is padded up to (400 is the segmenter's default cap)."""
ID_STEP_PAST_BUCKETS: Final = 128
"""Past the last id bucket, lengths round up to a multiple of this."""
FRAMES_PER_ID: Final = 3.0
"""Decoder frames reserved per phoneme id at length scale 1. A Piper voice speaks 1.9 to 2.7
frames per id (joe, medium, noise on, 66 segments); the rare batch that needs more runs at its
own length, rounded up to :data:`FRAME_STEP`, and costs two re-plans (its own and the next run's):
at 2.8, 25 of about 1,800 batches on the H200 did."""
FRAME_STEP: Final = 32
"""Granularity of the decoder length in frames."""
MIN_FRAMES_INPUT: Final = "min_frames"
"""The int64 scalar input that ``synthesis.graph.add_frame_floor`` adds to the graph, through which a
bucket's frames are fed; 0 leaves the length as the model set it."""


@dataclass(frozen=True)
class Bucket:
    """The padded shape of a batch: one session per distinct bucket."""

    rows: int
    ids: int
    frames: int
    """The decoder length floor, fed as ``min_frames``."""


def round_up(value: int, step: int) -> int:
    return -(-value // step) * step


def first_at_least(value: int, buckets: tuple[int, ...], step: int) -> int:
    """The smallest of ``buckets`` holding ``value``; past the largest, ``value`` rounded up to ``step``."""
    for size in buckets:
        if size >= value:
            return size
    return round_up(value, step)


def row_bucket(rows: int) -> int:
    """The rows a batch of ``rows`` items is padded to."""
    return first_at_least(rows, ROW_BUCKETS, ROW_BUCKETS[-1])


def bucket_for(rows: int, longest_ids: int, length_scale: float) -> Bucket:
    """The bucket of a batch of ``rows`` items whose longest has ``longest_ids`` phoneme ids."""
    if rows < 1 or longest_ids < 1:
        raise ValueError("a batch needs at least one item of at least one phoneme id")
    padded_rows = row_bucket(rows)
    padded_ids = first_at_least(longest_ids, ID_BUCKETS, ID_STEP_PAST_BUCKETS)
    frames = round_up(math.ceil(padded_ids * FRAMES_PER_ID * max(length_scale, 0.0)), FRAME_STEP)
    return Bucket(padded_rows, padded_ids, max(frames, FRAME_STEP))
