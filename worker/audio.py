"""Audio assembly: segments written in order to a temp file, joined by pauses, then encoded."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import numpy as np
import soundfile as sf

from ttsfarm.jobs import AUDIO_FORMATS, SegmentTiming

FADE_SECONDS: Final = 0.004
"""Raised-cosine fade at both ends of every segment, so no join can click."""
ENCODE_BLOCK_FRAMES: Final = 1 << 16
"""Frames copied per step when encoding, so memory stays flat for any length."""
PEAK_LIMIT: Final = 0.98
"""Samples are clipped here: a VITS voice can overshoot full scale by a hair."""


def fade_edges(wave: np.ndarray, sample_rate: int) -> np.ndarray:
    """A copy of ``wave`` clipped to the peak limit and faded in and out."""
    out = np.clip(wave.astype(np.float32), -PEAK_LIMIT, PEAK_LIMIT)
    n = min(int(FADE_SECONDS * sample_rate), len(out) // 2)
    if n > 0:
        ramp = (0.5 - 0.5 * np.cos(np.linspace(0.0, np.pi, n, dtype=np.float32))).astype(np.float32)
        out[:n] *= ramp
        out[-n:] *= ramp[::-1]
    return out


class SegmentWriter:
    """Appends segments and pauses to a float WAV on disk and records where each one sits."""

    def __init__(self, path: Path, sample_rate: int) -> None:
        self.path = path
        self.sample_rate = sample_rate
        self.frames = 0
        self.timings: list[SegmentTiming] = []
        self._file = sf.SoundFile(path, "w", samplerate=sample_rate, channels=1, subtype="FLOAT")

    def append(self, wave: np.ndarray, text: str, pause_after: float) -> SegmentTiming:
        start = self.frames
        self._file.write(fade_edges(wave, self.sample_rate))
        self.frames += len(wave)
        timing = SegmentTiming(text, start / self.sample_rate, self.frames / self.sample_rate)
        self.timings.append(timing)
        pause = round(pause_after * self.sample_rate)
        if pause:
            self._file.write(np.zeros(pause, dtype=np.float32))
            self.frames += pause
        return timing

    @property
    def duration(self) -> float:
        return self.frames / self.sample_rate

    def close(self) -> None:
        self._file.close()


def encode(source: Path, target: Path, audio_format: str) -> None:
    """Encode a WAV file into ``audio_format`` block by block."""
    container, subtype = AUDIO_FORMATS[audio_format]
    with (
        sf.SoundFile(source) as src,
        sf.SoundFile(
            target, "w", samplerate=src.samplerate, channels=src.channels, format=container, subtype=subtype
        ) as dst,
    ):
        for block in src.blocks(blocksize=ENCODE_BLOCK_FRAMES, dtype="float32"):
            dst.write(block)
