"""Where text breaks, and the pause after each kind of break: one set of rules for the synthesis
front end (``synthesis.text``), the audiobook's parts (``ttsfarm.audiobook.parts``) and the size
estimate of a job (:func:`estimate_segments`), so that a book cut into parts pauses as one text
spoken whole does."""

from __future__ import annotations

import re
from typing import Final

PAUSE_PARAGRAPH: Final = 0.60
PAUSE_SENTENCE: Final = 0.30
PAUSE_LINE: Final = 0.20
"""After a line that a :data:`LINE_BREAK` ends (a verse line), unless the line ends a sentence:
shorter than a sentence's pause, so a poem still reads as one."""
PAUSE_CLAUSE: Final = 0.12
PAUSE_WORD: Final = 0.04
"""Silence (seconds) after a segment, by the kind of boundary that ends it."""

LINE_BREAK: Final = "\u2028"
"""Unicode's LINE SEPARATOR: a line break within a paragraph, as a book's ``<br/>`` makes (the
audiobook's HTML reader writes it) and ``synthesis.text`` ends a verse line at. A plain newline is
only a space: prose hard-wrapped at 72 columns is not verse."""

PARAGRAPH_BREAK: Final = re.compile(r"\n\s*\n")
"""A blank line (spaces allowed) ends a paragraph."""
SENTENCE_BREAK: Final = re.compile(r"(?<=[.!?\u2026])[\"'\u201d\u2019)\]]*\s+")
"""A sentence end (after closing quotes and brackets) followed by space: a quick rule that needs
no sentence splitter. The front end splits sentences with pysbd; this is for cutting and
counting, where an odd abbreviation costs nothing."""


def split_paragraphs(text: str) -> list[str]:
    return PARAGRAPH_BREAK.split(text)


def split_sentences_roughly(paragraph: str) -> list[str]:
    """The paragraph cut at :data:`SENTENCE_BREAK`."""
    return SENTENCE_BREAK.split(paragraph.strip())


def estimate_segments(text: str) -> int:
    """About how many segments ``text`` makes (its sentences): enough to size a progress bar
    without phonemizing anything."""
    return sum(len(split_sentences_roughly(p)) for p in split_paragraphs(text) if p.strip()) or 1
