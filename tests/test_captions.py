"""Captions of a job's audio as SRT, WebVTT and JSON."""

from __future__ import annotations

import json

from ttsfarm.captions import captions, srt, vtt
from ttsfarm.jobs import SegmentTiming

CUES = (
    SegmentTiming("First  line,\nwrapped.", 0.0, 1.25),
    SegmentTiming("An arrow --> inside.", 1.55, 3661.5),
)


def test_srt_and_vtt_cues() -> None:
    assert srt(CUES) == (
        "1\n00:00:00,000 --> 00:00:01,250\nFirst line, wrapped.\n\n"
        "2\n00:00:01,550 --> 01:01:01,500\nAn arrow --> inside.\n"
    )
    assert vtt(CUES) == (
        "WEBVTT\n\n00:00:00.000 --> 00:00:01.250\nFirst line, wrapped.\n\n"
        "00:00:01.550 --> 01:01:01.500\nAn arrow - -> inside.\n"
    )


def test_json_cues_keep_the_text() -> None:
    found = json.loads(captions(CUES, "json"))["segments"]
    assert found[0] == {"text": "First  line,\nwrapped.", "start": 0.0, "end": 1.25}
    assert [cue["end"] for cue in found] == [1.25, 3661.5]
