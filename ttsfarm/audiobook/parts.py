"""Cutting chapters into parts: the units that are rendered, cached and (on the farm) spread.

A part is a run of rows with one voice, at most :data:`PART_MAX_CHARS` long. Rows are never
cut unless one row alone is too long; then it is cut at paragraph, then sentence breaks.
A part's key is a hash of everything that decides its audio, so a cached part is re-used
exactly when it would come out the same.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Final

from ttsfarm.audiobook.book import Book, Chapter, Row
from ttsfarm.core.breaks import PAUSE_PARAGRAPH, PAUSE_SENTENCE, split_paragraphs, split_sentences_roughly
from ttsfarm.core.jobs import SynthesisOptions

PART_MAX_CHARS: Final = 1_000
"""Longest part, in characters: about a minute of speech, so an interrupt loses at most that
much per part in progress, and a chapter spreads over many workers; still a dozen sentences,
enough for the batcher to fill batches."""
PART_FORMAT: Final = "flac"
"""Parts are kept lossless; only the finished book is encoded lossily."""
CACHE_VERSION: Final = 1
"""Part of every key: bump it when a change makes old parts wrong."""


@dataclass(frozen=True)
class Part:
    """One piece of one chapter to render as one job."""

    chapter: int
    """The chapter's number in the book."""
    index: int
    """0-based position in the chapter."""
    line: int
    """Line of the CSV where the part's text starts (for error messages)."""
    text: str
    options: SynthesisOptions
    pause_after: float
    """Silence to put after this part when it is not the last of its chapter."""

    @property
    def key(self) -> str:
        """A hash of the text, the voice and its settings, and the part format."""
        identity = {
            "version": CACHE_VERSION,
            "text": self.text,
            "options": self.options.to_dict(),
            "format": PART_FORMAT,
        }
        blob = json.dumps(identity, sort_keys=True, ensure_ascii=False).encode("utf-8")
        return hashlib.sha256(blob).hexdigest()

    @property
    def name(self) -> str:
        """The file stem the part is cached under: position, then content hash."""
        return f"{self.chapter:04d}-{self.index:03d}-{self.key[:24]}"


def book_parts(book: Book, max_chars: int = PART_MAX_CHARS) -> list[list[Part]]:
    """Each chapter's parts, in order."""
    return [chapter_parts(chapter, max_chars) for chapter in book.chapters]


def chapter_parts(chapter: Chapter, max_chars: int = PART_MAX_CHARS) -> list[Part]:
    pieces: list[tuple[Row, str, float]] = []
    for row in chapter.rows:
        pieces.extend((row, text, pause) for text, pause in _cut(row.text, max_chars))
    parts: list[Part] = []
    run: list[tuple[Row, str, float]] = []

    def close() -> None:
        text = "\n\n".join(piece for _, piece, _ in run)
        first = run[0][0]
        parts.append(Part(chapter.number, len(parts), first.line, text, first.options, run[-1][2]))
        run.clear()

    for piece in pieces:
        if run and (
            piece[0].options != run[0][0].options
            or sum(len(t) + 2 for _, t, _ in run) + len(piece[1]) > max_chars
            or run[-1][2] != PAUSE_PARAGRAPH
        ):
            close()
        run.append(piece)
    close()
    return parts


def _cut(text: str, max_chars: int) -> list[tuple[str, float]]:
    """``text`` in pieces of at most ``max_chars`` where it can be, with the pause after each."""
    if len(text) <= max_chars:
        return [(text, PAUSE_PARAGRAPH)]
    pieces: list[tuple[str, float]] = []
    for paragraph in split_paragraphs(text):
        if not paragraph.strip():
            continue
        sentences = _pack(split_sentences_roughly(paragraph), max_chars, " ")
        pieces.extend((s, PAUSE_SENTENCE) for s in sentences[:-1])
        pieces.append((sentences[-1], PAUSE_PARAGRAPH))
    return pieces


def _pack(units: list[str], max_chars: int, joiner: str) -> list[str]:
    """Join neighbouring units while the result stays within ``max_chars``; a longer unit is
    cut at spaces (or anywhere, as a last resort)."""
    packed: list[str] = []
    for unit in units:
        for chunk in _split_long(unit, max_chars):
            if packed and len(packed[-1]) + len(joiner) + len(chunk) <= max_chars:
                packed[-1] += joiner + chunk
            else:
                packed.append(chunk)
    return packed


def _split_long(unit: str, max_chars: int) -> list[str]:
    chunks: list[str] = []
    while len(unit) > max_chars:
        cut = unit.rfind(" ", 0, max_chars)
        cut = cut if cut > 0 else max_chars
        chunks.append(unit[:cut])
        unit = unit[cut:].lstrip()
    return [*chunks, unit] if unit else chunks
