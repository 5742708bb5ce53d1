"""Captions of a job's audio as SRT, WebVTT and JSON."""

from __future__ import annotations

import json

from ttsfarm.core.captions import captions, srt, vtt
from ttsfarm.core.jobs import SegmentTiming, WordTiming

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


WORDED = (
    SegmentTiming.worded(
        "Hello there.", 0.0, 1.0, (WordTiming("Hello", 0.05, 0.4), WordTiming("there.", 0.5, 0.9))
    ),
    SegmentTiming("Stored before words.", 1.3, 2.0),
)


def test_word_cues_one_per_word_and_old_segments_whole() -> None:
    assert captions(WORDED, "srt", "word") == (
        "1\n00:00:00,050 --> 00:00:00,400\nHello\n\n"
        "2\n00:00:00,500 --> 00:00:00,900\nthere.\n\n"
        "3\n00:00:01,300 --> 00:00:02,000\nStored before words.\n"
    )
    assert captions(WORDED, "vtt", "word").count("-->") == 3
    assert captions(WORDED, "srt").count("-->") == 2


def test_json_holds_segments_and_words() -> None:
    found = json.loads(captions(WORDED, "json"))
    assert found["words"] == [
        {"word": "Hello", "start": 0.05, "end": 0.4},
        {"word": "there.", "start": 0.5, "end": 0.9},
    ]
    assert [segment["text"] for segment in found["segments"]] == ["Hello there.", "Stored before words."]
