"""Text normalisation and segmentation: text in, ordered segments out, each short enough
for the model and each keeping the source text it speaks. Pauses and paragraph breaks follow
``ttsfarm.core.breaks``; a line break within a paragraph (:data:`LINE_BREAK`, a verse line) ends a
segment with the short :data:`PAUSE_LINE`."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

import pysbd

from synthesis.phonemes import Phonemizer
from synthesis.word_timings import WordBounds, word_bounds
from ttsfarm.core.breaks import (
    LINE_BREAK,
    PAUSE_CLAUSE,
    PAUSE_LINE,
    PAUSE_PARAGRAPH,
    PAUSE_SENTENCE,
    PAUSE_WORD,
    split_paragraphs,
)
from ttsfarm.core.settings import MIN_PHONEME_IDS

DEFAULT_MAX_PHONEME_IDS: Final = 400
"""Cap on phoneme ids per segment (about 15 s of speech). Longer sentences are split at
clauses, then words, so no input is ever too long for the model."""

_LINE_BREAKS = re.compile(r"[ \u2028]*\u2028[ \u2028]*")
_SENTENCE_END = re.compile(r"[.!?\u2026][\"'\u201d\u2019)\]]*$")
_STOPS: Final = ".!?\u2026\u3002\uff0e\uff01\uff1f\uff61\n\r"
"""Where pysbd may end an English sentence: its stops (full-width ones too), ellipses, new lines."""
_STOP_BEFORE_END = re.compile(f"[{_STOPS}](?![{_STOPS}]*$)")
"""A stop other than those that end the text: a text without one is one sentence to pysbd."""
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SPACES = re.compile(r"[ \t\f\v\u00a0]+")
_CLAUSE_END = re.compile(r"(?<=[,;:\u2013\u2014)])\s+")


@dataclass(frozen=True)
class Segment:
    """One model input: the source text it speaks and its phoneme ids."""

    index: int
    text: str
    phoneme_ids: tuple[int, ...]
    pause_after: float
    """Seconds of silence to put after this segment in the audio."""
    word_bounds: WordBounds = ()
    """The ids each word of the text spans (``synthesis.word_timings.word_bounds``)."""


def normalize(text: str) -> str:
    """Unicode NFKC, no control characters, single spaces, blank lines between paragraphs."""
    text = unicodedata.normalize("NFKC", text).replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub(" ", text)
    paragraphs = (_SPACES.sub(" ", p.replace("\n", " ")).strip() for p in split_paragraphs(text))
    paragraphs = (_LINE_BREAKS.sub(LINE_BREAK, p) for p in paragraphs)
    return "\n\n".join(p for p in paragraphs if p)


def split_sentences(paragraph: str) -> list[str]:
    text = paragraph.strip()
    if not _STOP_BEFORE_END.search(text):  # one sentence: pysbd would not split it (docs/decisions/0043)
        return [text] if text else []
    # A new splitter per call: pysbd keeps the text being split on the instance, so one shared
    # between job threads mixes their texts up. Making one costs under a microsecond; splitting
    # costs 0.26 ms of regular expressions, 0.57 ms once other code pushed them out of the cache.
    splitter = pysbd.Segmenter(language="en", clean=False)
    return [s.strip() for s in splitter.segment(paragraph) if s.strip()]


def _sentences(paragraph: str) -> list[tuple[str, bool]]:
    """The paragraph's sentences that have a letter or digit, each with whether it ends a line
    (at a :data:`LINE_BREAK`, or the paragraph's end)."""
    found: list[tuple[str, bool]] = []
    for line in paragraph.split(LINE_BREAK):
        sentences = [s for s in split_sentences(line) if any(c.isalnum() for c in s)]
        found += [(sentence, n == len(sentences) - 1) for n, sentence in enumerate(sentences)]
    return found


def _split_clauses(text: str) -> list[str]:
    return [p for p in _CLAUSE_END.split(text) if p]


def _split_words(text: str) -> list[str]:
    return text.split()


def _split_halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [text[:middle], text[middle:]] if middle else [text]


# Each level splits finer than the one before; (splitter, joiner, pause between the parts).
_LEVELS: Final[list[tuple[Callable[[str], list[str]], str, float]]] = [
    (_split_clauses, " ", PAUSE_CLAUSE),
    (_split_words, " ", PAUSE_WORD),
    (_split_halves, "", 0.0),
]


@dataclass(frozen=True)
class _Piece:
    text: str
    ids: list[int]
    pause_after: float


class Segmenter:
    """Splits text into segments of at most ``max_phoneme_ids`` for one voice."""

    def __init__(self, phonemizer: Phonemizer, max_phoneme_ids: int = DEFAULT_MAX_PHONEME_IDS):
        if max_phoneme_ids < MIN_PHONEME_IDS:
            raise ValueError(f"max_phoneme_ids must be at least {MIN_PHONEME_IDS}")
        self.phonemizer = phonemizer
        self.max_phoneme_ids = max_phoneme_ids

    def segments(self, text: str) -> Iterator[Segment]:
        """Ordered segments of ``text``. Sentences without a letter or digit (``* * *``,
        ``...``) are not read out: espeak would spell the symbols."""
        return self.paragraph_segments(split_paragraphs(normalize(text)), ends_text=True)

    def paragraph_segments(self, paragraphs: Sequence[str], ends_text: bool) -> Iterator[Segment]:
        """Segments of normalised paragraphs, numbered from 0; ``ends_text`` says whether the
        last of them ends the text (no pause after it) or more paragraphs follow."""
        index = 0
        for p_number, paragraph in enumerate(paragraphs):
            sentences = _sentences(paragraph)
            for s_number, (sentence, ends_line) in enumerate(sentences):
                pieces = self._fit(sentence, 0)
                last_sentence = s_number == len(sentences) - 1
                end_pause = PAUSE_PARAGRAPH if last_sentence else PAUSE_SENTENCE
                if ends_line and not last_sentence and not _SENTENCE_END.search(sentence):
                    end_pause = PAUSE_LINE
                if last_sentence and ends_text and p_number == len(paragraphs) - 1:
                    end_pause = 0.0
                for n, piece in enumerate(pieces):
                    if self.phonemizer.is_silent(piece.ids):
                        continue
                    pause = end_pause if n == len(pieces) - 1 else piece.pause_after
                    bounds = word_bounds(piece.text, piece.ids, self.phonemizer.voice)
                    yield Segment(index, piece.text, tuple(piece.ids), pause, bounds)
                    index += 1

    def _fit(self, text: str, level: int) -> list[_Piece]:
        ids = self.phonemizer.ids(text)
        if len(ids) <= self.max_phoneme_ids or len(text) < 2:
            return [_Piece(text, ids, PAUSE_SENTENCE)]
        split, joiner, pause = _LEVELS[level]
        finer = min(level + 1, len(_LEVELS) - 1)  # the last level (halves) repeats
        parts = split(text)
        if len(parts) < 2:
            return self._fit(text, finer)
        pieces: list[_Piece] = []
        for part in parts:
            for piece in self._fit(part, finer):
                if pieces:
                    joined = pieces[-1].text + joiner + piece.text
                    joined_ids = self.phonemizer.ids(joined)
                    if len(joined_ids) <= self.max_phoneme_ids:
                        pieces[-1] = _Piece(joined, joined_ids, pause)
                        continue
                pieces.append(_Piece(piece.text, piece.ids, pause))
        return pieces
