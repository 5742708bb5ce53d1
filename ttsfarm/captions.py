"""Captions of a job's audio: SubRip (SRT), WebVTT and JSON, one cue per segment.

A segment is a sentence, or a piece of one where it is long (``JobResult.segments``): its text and
where it sits in the audio, measured from the samples each segment really got.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from ttsfarm.jobs import SegmentTiming

CAPTION_FORMATS: Final[dict[str, str]] = {
    "srt": "application/x-subrip",
    "vtt": "text/vtt",
    "json": "application/json",
}
"""Caption formats by name, with their media types."""


def _clock(seconds: float, decimal: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{decimal}{millis:03d}"


def srt_time(seconds: float) -> str:
    return _clock(seconds, ",")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def srt(cues: Sequence[SegmentTiming], offset: float = 0.0) -> str:
    """SubRip text: one cue per segment, shifted by ``offset`` seconds."""
    blocks = [
        f"{n}\n{srt_time(c.start + offset)} --> {srt_time(c.end + offset)}\n{_one_line(c.text)}\n"
        for n, c in enumerate(cues, start=1)
    ]
    return "\n".join(blocks)


def vtt(cues: Sequence[SegmentTiming]) -> str:
    """WebVTT text: one cue per segment (``-->`` in a text would end a cue, so it is spaced out)."""
    blocks = [
        f"{_clock(c.start, '.')} --> {_clock(c.end, '.')}\n{_one_line(c.text).replace('-->', '- ->')}\n"
        for c in cues
    ]
    return "WEBVTT\n\n" + "\n".join(blocks)


def captions(cues: Sequence[SegmentTiming], caption_format: str) -> str:
    """The cues in ``caption_format`` (one of :data:`CAPTION_FORMATS`)."""
    if caption_format == "srt":
        return srt(cues)
    if caption_format == "vtt":
        return vtt(cues)
    return json.dumps({"segments": [cue.to_dict() for cue in cues]}, ensure_ascii=False)
