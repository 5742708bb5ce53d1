"""16-bit PCM as ttsfarm streams it: samples converted as libsndfile converts them, and a WAV
header for a stream whose length is not known yet."""

from __future__ import annotations

import struct
from typing import Final

import numpy as np

PCM_SCALE: Final = 32768
"""Float samples to 16-bit PCM as libsndfile converts them (``floor(x * 32768)``, clipped): a
stream carries the samples of the job's stored WAV (a few differ by one step)."""
OPEN_LENGTH: Final = 0xFFFFFFFF
"""The RIFF and data sizes of a WAV header written before the length is known (as OpenAI's
streamed WAV has them): players read to the end of the stream."""


def pcm16(samples: np.ndarray) -> bytes:
    """Float samples (-1 to 1) as little-endian 16-bit PCM."""
    scaled = np.floor(samples.astype(np.float64) * PCM_SCALE)
    return bytes(np.clip(scaled, -PCM_SCALE, PCM_SCALE - 1).astype("<i2").tobytes())


def open_wav_header(sample_rate: int) -> bytes:
    """A 16-bit mono PCM WAV header with its lengths left open."""
    fmt = struct.pack("<HHIIHH", 1, 1, sample_rate, sample_rate * 2, 2, 16)
    return (
        b"RIFF" + struct.pack("<I", OPEN_LENGTH) + b"WAVE"
        + b"fmt " + struct.pack("<I", len(fmt)) + fmt
        + b"data" + struct.pack("<I", OPEN_LENGTH)
    )  # fmt: skip
