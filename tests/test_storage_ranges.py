"""Byte ranges: how a ``Range`` header is read, and a local storage folder serving one."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.audio import RangeNotSatisfiable, byte_range
from ttsfarm.storage import LocalStorage


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("bytes=0-9", (0, 9)),
        ("bytes=5-", (5, 99)),
        ("bytes=-10", (90, 99)),
        ("bytes=-500", (0, 99)),
        ("bytes=90-1000", (90, 99)),
        ("bytes=0-9,20-29", None),  # several ranges: the whole file, as the RFC allows
        ("items=0-9", None),
        ("bytes=-", None),
    ],
)
def test_a_range_header_is_read(header: str | None, expected: tuple[int, int] | None) -> None:
    assert byte_range(header, 100) == expected


@pytest.mark.parametrize("header", ["bytes=100-", "bytes=50-10", "bytes=-0"])
def test_a_range_past_the_end_is_refused(header: str) -> None:
    with pytest.raises(RangeNotSatisfiable):
        byte_range(header, 100)


def test_local_storage_streams_a_byte_range(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    data = bytes(range(256)) * 1000
    storage.put_bytes(data, "audio.wav", "audio/wav")
    assert b"".join(storage.stream("audio.wav", 1000, 200_000)) == data[1000:200_001]
    assert b"".join(storage.stream("audio.wav", 255_000)) == data[255_000:]
    assert b"".join(storage.stream("audio.wav")) == data
