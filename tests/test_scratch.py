"""Job temp space: the unnamed file a job's audio is encoded into (a full temp disk under a
real worker: tests/farm/test_disk_faults.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from synthesis import scratch
from synthesis.audio import SegmentWriter
from synthesis.scratch import job_file
from ttsfarm.core.files import sha256_and_size

RATE = 22050
SECOND = (0.3 * np.sin(np.arange(RATE) / 7)).astype(np.float32)


def test_a_job_file_has_no_name_to_leave_behind(tmp_path: Path) -> None:
    with job_file(str(tmp_path)) as file:
        writer = SegmentWriter(file, RATE, "flac")
        for _ in range(3):
            writer.append(SECOND, "a second", 0.5)
        writer.close()
        assert list(tmp_path.iterdir()) == []
        _, size = sha256_and_size(file)
        assert sf.info(file).frames == 3 * RATE + 2 * RATE // 2 + RATE // 2
        file.seek(0)
        assert len(file.read()) == size
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_is_judged_while_the_file_still_fills_the_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libsndfile reports a full disk as a bare "System error": whether the disk is full is
    read from its free space, which must still count what the job wrote."""
    looked: list[bool] = []

    def space_error(where: str, error: Exception, folder: Path | None = None) -> None:
        looked.append(opened.closed)

    monkeypatch.setattr(scratch, "_space_error", space_error)
    with pytest.raises(RuntimeError, match="System error"), job_file(str(tmp_path)) as opened:
        raise RuntimeError("System error")
    assert looked == [False]
