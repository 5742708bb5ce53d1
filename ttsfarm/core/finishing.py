"""Finish jobs: a chapter's parts in, the finished chapter out (mastered, and encoded in every
form the book needs). The request travels as JSON, as a synthesis job's does; the work itself is
``ttsfarm.core.finisher``, run in a helper process by whoever takes the job: a farm worker, or the
audiobook command's own pool.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from ttsfarm.core.errors import InvalidInput
from ttsfarm.core.jobs import SegmentTiming, check_loudness

HEAD_SILENCE: Final = 0.5
"""Seconds of silence before a chapter's first word."""
TAIL_SILENCE: Final = 1.5
"""Least seconds of silence after its last word, so chapters do not run into each other; the
chapter then ends on a whole frame of every lossy format (``ttsfarm.core.encoding``), up to 0.42 s
later."""
PIECE_FORMATS: Final = ("aac", "mp3")
"""The lossy pieces a book's chapters are encoded into: ``aac`` for the ``.m4b``, ``mp3`` for the
``.mp3``."""
FINISH_VERSION: Final = 1
"""Part of every finish job's fingerprint: bump it when finishing makes different files."""
FRAME_ALIGNMENT: Final = 9_216
"""Samples a chapter's length is a multiple of: the least common multiple of AAC's frame (1,024)
and MP3's (1,152, or 576 below 32 kHz); 0.42 s at 22,050 Hz (``ttsfarm.core.encoding``)."""
BITRATE: Final = "64k"
"""Bitrate of the lossy pieces: plenty for one voice in mono."""


def finishing_identity() -> list[object]:
    """What, besides its input, decides a finished chapter's files: a part of every key of one."""
    return [FINISH_VERSION, BITRATE, FRAME_ALIGNMENT, HEAD_SILENCE, TAIL_SILENCE, *PIECE_FORMATS]


@dataclass(frozen=True)
class PartAudio:
    """One part of a chapter: where its lossless audio is, and what follows it."""

    location: str
    """A local path, or an ``s3://bucket/key`` URI (a farm job's result)."""
    sha256: str
    pause_after: float
    """Seconds of silence after the part, unless it is the chapter's last."""
    segments: tuple[SegmentTiming, ...]
    """Where each sentence sits in the part's audio."""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["segments"] = [s.to_dict() for s in self.segments]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PartAudio:
        return cls(
            location=str(data["location"]),
            sha256=str(data["sha256"]),
            pause_after=float(data["pause_after"]),
            segments=tuple(SegmentTiming.from_dict(s) for s in data["segments"]),
        )


def _new_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class FinishRequest:
    """One chapter to finish: its parts joined with their pauses, brought to ``loudness``, and
    written as a FLAC file and one lossy piece per name in ``pieces``."""

    parts: tuple[PartAudio, ...]
    sample_rate: int
    """The book's rate: parts of another rate are resampled to it."""
    loudness: float
    title: str = ""
    """The chapter's title, for monitors."""
    pieces: tuple[str, ...] = PIECE_FORMATS
    job_id: str = field(default_factory=_new_id)

    def __post_init__(self) -> None:
        if not self.parts:
            raise InvalidInput("a chapter to finish needs at least one part")
        if not isinstance(self.sample_rate, int) or self.sample_rate <= 0:
            raise InvalidInput(f"the sample rate must be a positive whole number, not {self.sample_rate!r}")
        unknown = sorted(set(self.pieces) - set(PIECE_FORMATS))
        if unknown:
            raise InvalidInput(f"unknown piece formats {unknown}: use {', '.join(PIECE_FORMATS)}")
        loudness = check_loudness(self.loudness)
        if loudness is None:
            raise InvalidInput("a chapter is finished to a loudness: give one in LUFS, such as -18")
        object.__setattr__(self, "loudness", loudness)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "parts": [p.to_dict() for p in self.parts],
            "sample_rate": self.sample_rate,
            "loudness": self.loudness,
            "title": self.title,
            "pieces": list(self.pieces),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FinishRequest:
        return cls(
            parts=tuple(PartAudio.from_dict(p) for p in data["parts"]),
            sample_rate=int(data["sample_rate"]),
            loudness=data["loudness"],
            title=str(data.get("title", "")),
            pieces=tuple(data.get("pieces", PIECE_FORMATS)),
            job_id=str(data["job_id"]),
        )

    def summary(self) -> str:
        """One line for monitors (Flower): the job, the chapter, its parts and what it makes."""
        title = f" {self.title!r}," if self.title else ""
        return (
            f"finish {self.job_id},{title} {len(self.parts)} parts, {self.loudness:g} LUFS, "
            f"flac+{'+'.join(self.pieces)}"
        )

    def fingerprint(self) -> str:
        """A hash of what decides the finished files (the parts' audio, pauses, rate, loudness,
        pieces), not the id or the title."""
        identity = {
            "finishing": finishing_identity(),
            "parts": [(p.sha256, p.pause_after) for p in self.parts],
            "sample_rate": self.sample_rate,
            "loudness": self.loudness,
            "pieces": list(self.pieces),
        }
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()
