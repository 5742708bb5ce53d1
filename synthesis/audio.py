"""Audio assembly: segments encoded in order into a temp file as they come, joined by pauses."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import IO, Final

import numpy as np
import soundfile as sf

from ttsfarm.core.errors import InvalidAudio
from ttsfarm.core.jobs import AUDIO_FORMATS, SegmentTiming
from ttsfarm.core.synth_file import Tags, write_tags

FADE_SECONDS: Final = 0.004
"""Raised-cosine fade at both ends of every segment, so no join can click."""
PEAK_LIMIT: Final = 0.98
"""Samples are clipped here: a VITS voice can overshoot full scale by a hair."""


def fade_edges(wave: np.ndarray, sample_rate: int) -> np.ndarray:
    """A copy of ``wave`` clipped to the peak limit and faded in and out."""
    out = np.clip(np.asarray(wave, dtype=np.float32), -PEAK_LIMIT, PEAK_LIMIT)
    n = min(int(FADE_SECONDS * sample_rate), len(out) // 2)
    if n > 0:
        ramp = _fade_in(n)
        out[:n] *= ramp
        out[-n:] *= ramp[::-1]
    return out


@functools.cache
def _fade_in(samples: int) -> np.ndarray:
    """The raised-cosine ramp from 0 to 1 over this many samples (read only: shared)."""
    ramp = (0.5 - 0.5 * np.cos(np.linspace(0.0, np.pi, samples, dtype=np.float32))).astype(np.float32)
    ramp.flags.writeable = False
    return ramp


AudioListener = Callable[[np.ndarray], None]
"""Takes float32 samples as they are written."""


class SegmentWriter:
    """Encodes segments and pauses into an audio file (or an open one) as they arrive, and
    records where each one sits. Encoding as the job goes spreads it over the job instead of
    leaving it all to the end, and the file on disk only ever holds the encoded audio."""

    def __init__(
        self,
        target: Path | IO[bytes],
        sample_rate: int,
        audio_format: str = "wav",
        tags: Tags | None = None,
        listener: AudioListener | None = None,
    ) -> None:
        self.listener = listener
        """Told every block of samples as it is written (a streamed job's publisher)."""
        self.sample_rate = sample_rate
        self.frames = 0
        self.timings: list[SegmentTiming] = []
        container, subtype = AUDIO_FORMATS[audio_format]
        # An open file is handed over as its descriptor, which libsndfile writes itself: as a file
        # object, each block would be a call back into Python for the interpreter's lock, and
        # with 32 jobs in flight that halved the farm (docs/decisions/0044).
        self._file = sf.SoundFile(
            target if isinstance(target, Path) else target.fileno(),
            "w",
            samplerate=sample_rate,
            channels=1,
            format=container,
            subtype=subtype,
            closefd=False,
        )
        if tags is not None:
            try:
                write_tags(self._file, tags)
            except BaseException:  # closed now: later, its descriptor may be another file's
                self._file.close()
                raise

    def append(
        self, wave: np.ndarray, text: str, pause_after: float, marks: tuple[int, ...] = ()
    ) -> SegmentTiming:
        """Write one segment's samples, then ``pause_after`` seconds of silence; ``marks`` are
        its words' (``SegmentTiming.marks``), recorded with it."""
        if not np.isfinite(wave).all():  # never store broken audio as if it were speech
            raise InvalidAudio(f"the engine returned samples that are not numbers for segment {text[:40]!r}")
        start = self.frames
        faded = fade_edges(wave, self.sample_rate)
        self._file.write(faded)
        if self.listener is not None:
            self.listener(faded)
        self.frames += len(wave)
        timing = SegmentTiming(text, start / self.sample_rate, self.frames / self.sample_rate, marks)
        self.timings.append(timing)
        pause = round(pause_after * self.sample_rate)
        if pause:
            silence = np.zeros(pause, dtype=np.float32)
            self._file.write(silence)
            if self.listener is not None:
                self.listener(silence)
            self.frames += pause
        return timing

    @property
    def duration(self) -> float:
        return self.frames / self.sample_rate

    def close(self) -> None:
        self._file.close()
