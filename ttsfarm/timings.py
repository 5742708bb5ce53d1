"""Where the text sits in a job's audio: each segment, and each word of it, in seconds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple


class WordTiming(NamedTuple):
    """Where one word is spoken in the audio, in seconds. A tuple: a job holds one per word,
    made in the worker's interpreter beside the batches, so each must cost little."""

    word: str
    start: float
    end: float


@dataclass(frozen=True)
class SegmentTiming:
    """Where one piece of the source text sits in the audio, in seconds, and its words."""

    text: str
    start: float
    end: float
    words: tuple[WordTiming, ...] = ()
    """Each word read aloud, from the engine's durations (``synthesis.word_timings``); empty
    in results stored before jobs had word timings."""

    def shifted(self, seconds: float) -> SegmentTiming:
        """The same timing ``seconds`` later in the audio (a part placed in a whole book)."""
        words = tuple(WordTiming(w.word, w.start + seconds, w.end + seconds) for w in self.words)
        return SegmentTiming(self.text, self.start + seconds, self.end + seconds, words)

    def to_dict(self) -> dict[str, Any]:
        """As JSON: each word as ``[word, start, end]`` (``synthesis.word_timings`` gives times
        to the millisecond: a job's record holds every word of it)."""
        words = [list(word) for word in self.words]
        return {"text": self.text, "start": self.start, "end": self.end, "words": words}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SegmentTiming:
        words = tuple(WordTiming(str(w), float(s), float(e)) for w, s, e in data.get("words", ()))
        return cls(text=data["text"], start=float(data["start"]), end=float(data["end"]), words=words)
