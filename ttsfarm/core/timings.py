"""Where the text sits in a job's audio: each segment, and each word of it, in seconds."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Final, NamedTuple

_WORD: Final = re.compile(r"\S*[^\W_]\S*")
"""A word read aloud: a run of non-space characters with a letter or digit."""


def text_words(text: str) -> list[str]:
    """The words of a segment's text that are read aloud: non-space runs with a letter or digit."""
    return _WORD.findall(text)


class WordTiming(NamedTuple):
    """Where one word is spoken in the audio, in seconds."""

    word: str
    start: float
    end: float


@dataclass(frozen=True)
class SegmentTiming:
    """Where one piece of the source text sits in the audio, in seconds, and its words."""

    text: str
    start: float
    end: float
    marks: tuple[int, ...] = ()
    """Where each word read aloud (:func:`text_words`) starts and ends, in milliseconds from
    ``start``, in turn: start, end, start, end... The worker records these integers, made from
    the engine's durations (``synthesis.word_timings``), rather than an object per word
    (docs/decisions/0040-word-marks-as-integers.md); :attr:`words` makes the words from them.
    Empty in results stored before jobs had word timings."""

    @classmethod
    def worded(cls, text: str, start: float, end: float, words: Sequence[WordTiming]) -> SegmentTiming:
        """The timing of a segment whose words are known in seconds (their names must be the
        text's :func:`text_words`)."""
        marks = tuple(round((at - start) * 1000) for word in words for at in (word.start, word.end))
        return cls(text, start, end, marks)

    @cached_property
    def words(self) -> tuple[WordTiming, ...]:
        """Each word read aloud, with its start and end in the audio, to the millisecond."""
        if not self.marks:
            return ()
        names = text_words(self.text)
        starts, ends = self.marks[0::2], self.marks[1::2]
        return tuple(
            WordTiming(name, round(self.start + begin / 1000, 3), round(self.start + end / 1000, 3))
            for name, begin, end in zip(names, starts, ends, strict=False)
        )

    def shifted(self, seconds: float) -> SegmentTiming:
        """The same timing ``seconds`` later in the audio (a part placed in a whole book); the
        marks count from the segment's start, so they stay."""
        return replace(self, start=self.start + seconds, end=self.end + seconds)

    def to_dict(self) -> dict[str, Any]:
        """As JSON; the marks as a list of integers (a job's record holds every word of it)."""
        return {"text": self.text, "start": self.start, "end": self.end, "marks": list(self.marks)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SegmentTiming:
        text, start, end = data["text"], float(data["start"]), float(data["end"])
        if "words" in data:  # stored while words were kept as [word, start, end]
            words = [WordTiming(str(w), float(s), float(e)) for w, s, e in data["words"]]
            return cls.worded(text, start, end, words)
        return cls(text, start, end, tuple(int(mark) for mark in data.get("marks", ())))
