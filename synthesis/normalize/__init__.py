"""Text normalisation: text written for the eye rewritten as it is read aloud, before espeak-ng
turns it into phonemes. English only for now: other languages pass through unchanged.

The segment keeps the text as written (subtitles and timings show it); only the phonemes are
made from the normalised text (:class:`synthesis.phonemes.Phonemizer`). What is read and how,
the limits, and why num2words with rules of our own rather than NeMo's grammars:
``docs/reading.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from synthesis.normalize.english import EnglishReader

Reader = Callable[[str], str]
"""Text in, the same text as it is read aloud out."""

__all__ = ["EnglishReader", "Reader", "reader_for"]


@cache
def reader_for(language: str) -> Reader | None:
    """The reader of a voice language (its espeak-ng voice, ``en-us``, or its language code,
    ``en_GB``), or ``None`` where text goes to espeak-ng as written."""
    code = language.lower().replace("_", "-")
    if code != "en" and not code.startswith("en-"):
        return None
    return EnglishReader(american=code.startswith("en-us"))
