"""Captions of a job's audio: SubRip (SRT), WebVTT and JSON, one cue per segment or per word.

A segment is a sentence, or a piece of one where it is long (``JobResult.segments``): its text and
where it sits in the audio, measured from the samples each segment really got. Its words are timed
from the engine's durations (``synthesis.word_timings``). JSON holds both, as OpenAI's verbose
transcriptions do: ``{"segments": [{text, start, end}], "words": [{word, start, end}]}``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from ttsfarm.core.jobs import SegmentTiming

CAPTION_FORMATS: Final[dict[str, str]] = {
    "srt": "application/x-subrip",
    "vtt": "text/vtt",
    "json": "application/json",
}
"""Caption formats by name, with their media types."""

GRANULARITIES: Final = ("segment", "word")
"""What one SRT or WebVTT cue holds."""


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


def word_cues(segments: Sequence[SegmentTiming]) -> list[SegmentTiming]:
    """One cue per word; a segment without word timings (a result stored before jobs had
    them) stays one cue."""
    cues: list[SegmentTiming] = []
    for segment in segments:
        if segment.words:
            cues += [SegmentTiming(w.word, w.start, w.end) for w in segment.words]
        else:
            cues.append(segment)
    return cues


def _json(segments: Sequence[SegmentTiming]) -> str:
    def seconds(value: float) -> float:
        return round(value, 3)

    words = [w for s in segments for w in s.words]
    data = {
        "segments": [{"text": s.text, "start": seconds(s.start), "end": seconds(s.end)} for s in segments],
        "words": [{"word": w.word, "start": seconds(w.start), "end": seconds(w.end)} for w in words],
    }
    return json.dumps(data, ensure_ascii=False)


def captions(segments: Sequence[SegmentTiming], caption_format: str, granularity: str = "segment") -> str:
    """The captions in ``caption_format`` (one of :data:`CAPTION_FORMATS`), SRT and WebVTT with
    one cue per ``granularity`` (one of :data:`GRANULARITIES`); JSON holds segments and words."""
    if caption_format == "json":
        return _json(segments)
    cues = word_cues(segments) if granularity == "word" else list(segments)
    return srt(cues) if caption_format == "srt" else vtt(cues)
