"""Job temp space: the encoding buffer that spills to an unnamed file, and what it does when
the temp disk cannot take the spill."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from synthesis.audio import SegmentWriter
from synthesis.scratch import job_buffer

RATE = 22050
SECOND = (0.3 * np.sin(np.arange(RATE) / 7)).astype(np.float32)


def test_small_audio_stays_in_memory_and_large_audio_spills_unnamed(tmp_path: Path) -> None:
    for seconds, spilled in ((1, False), (8, True)):
        with job_buffer(str(tmp_path), max_bytes=100_000) as buffer:
            writer = SegmentWriter(buffer, RATE, "wav")
            for _ in range(seconds):
                writer.append(SECOND, "a second", 0.0)
            writer.close()
            buffer.raise_failure()
            assert isinstance(buffer._file, io.BytesIO) is not spilled
            assert list(tmp_path.iterdir()) == []  # a spilled buffer has no name to leak
            buffer.seek(0)
            assert sf.info(buffer).frames == seconds * RATE


@pytest.mark.parametrize("audio_format", ["flac", "wav"])
def test_a_spill_that_fails_is_raised_not_stored_broken(tmp_path: Path, audio_format: str) -> None:
    """libsndfile cannot pass on a write error from a file object: FLAC would close a file cut
    short as if whole. The buffer keeps the error and raises it once the encoder is done."""
    with pytest.raises(FileNotFoundError), job_buffer(str(tmp_path / "gone"), max_bytes=10_000) as buffer:
        writer = SegmentWriter(buffer, RATE, audio_format)
        try:
            for _ in range(3):
                writer.append(SECOND, "a second", 0.0)
        finally:
            writer.close()
        buffer.raise_failure()
