"""Text to Piper phoneme ids with piper-tts's bundled espeak-ng.

Text is read aloud first (:mod:`synthesis.normalize`: numbers, dates, abbreviations written out
in words, for English voices), then phonemized. Phonemes written inline as piper takes them,
``[[ həlˈoʊ ]]``, go to the model as written: each character one phoneme (after Unicode NFD,
as espeak-ng's are), a space a gap between words. See ``docs/reading.md``.
"""

from __future__ import annotations

import unicodedata
from typing import Final

from piper.phoneme_ids import phonemes_to_ids

from synthesis.normalize import Reader, reader_for
from ttsfarm.core.errors import InvalidInput
from ttsfarm.core.espeak import phonemize
from ttsfarm.core.voices import Voice

SENTENCE_JOIN: Final = " "
"""Placed between espeak's sentences when one segment holds more than one."""
WORD_GAP: Final = " "
"""The phoneme between words, as espeak-ng and piper write it."""
PHONEMES_OPEN: Final = "[["
PHONEMES_CLOSE: Final = "]]"


def split_inline(text: str) -> list[tuple[bool, str]]:
    """``text`` as ``(is_phonemes, part)`` pairs, in order: the parts between ``[[`` and ``]]``
    are phonemes. A block cut in two by the segmenter (a very long sentence split at words)
    still counts: a ``]]`` before any ``[[`` closes a block begun before the text, and a ``[[``
    never closed runs to its end."""
    parts: list[tuple[bool, str]] = []
    close, opening = text.find(PHONEMES_CLOSE), text.find(PHONEMES_OPEN)
    if close != -1 and (opening == -1 or close < opening):
        parts.append((True, text[:close]))
        text = text[close + len(PHONEMES_CLOSE) :]
    while text:
        start = text.find(PHONEMES_OPEN)
        if start == -1:
            parts.append((False, text))
            break
        parts.append((False, text[:start]))
        end = text.find(PHONEMES_CLOSE, start)
        if end == -1:
            parts.append((True, text[start + len(PHONEMES_OPEN) :]))
            break
        parts.append((True, text[start + len(PHONEMES_OPEN) : end]))
        text = text[end + len(PHONEMES_CLOSE) :]
    return [(is_phonemes, part) for is_phonemes, part in parts if part or is_phonemes]


class Phonemizer:
    """Phoneme ids for one voice. Safe to share between threads (espeak-ng is not: we lock).

    ``normalize_text`` reads numbers, dates and abbreviations out in words first where the voice is
    English (:func:`synthesis.normalize.reader_for`); off, the text goes to espeak-ng as written.
    """

    def __init__(self, voice: Voice, normalize_text: bool = True) -> None:
        self.voice = voice
        self.reader: Reader | None = reader_for(voice.espeak_voice) if normalize_text else None
        self._id_map = voice.phoneme_id_map
        self._empty_length = len(phonemes_to_ids([], self._id_map))

    def spoken(self, text: str) -> str:
        """``text`` as it goes to espeak-ng: read aloud for English voices, else unchanged."""
        return self.reader(text) if self.reader is not None else text

    def phonemes(self, text: str) -> list[str]:
        """All phonemes of ``text`` as one utterance."""
        joined: list[str] = []
        parts = split_inline(text)
        for n, (is_phonemes, part) in enumerate(parts):
            if is_phonemes:
                self._add_inline(joined, part, parts, n)
            elif any(c.isalnum() for c in part):
                for sentence in phonemize(self.voice.espeak_voice, self.spoken(part)):
                    if joined and sentence and joined[-1] != WORD_GAP:
                        joined.append(SENTENCE_JOIN)
                    joined.extend(sentence)
            else:  # only punctuation next to a block: espeak-ng would read "!" as "exclamation"
                joined.extend(c for c in part if c in self._id_map and not c.isspace())
        return joined

    def _add_inline(self, joined: list[str], block: str, parts: list[tuple[bool, str]], n: int) -> None:
        # Spaces around the block are word gaps, as in piper's PiperVoice.phonemize.
        if n > 0 and parts[n - 1][1][-1:].isspace() and joined and joined[-1] != WORD_GAP:
            joined.append(WORD_GAP)
        phonemes = list(unicodedata.normalize("NFD", " ".join(block.split())))
        unknown = sorted({p for p in phonemes if p not in self._id_map})
        if unknown:
            raise InvalidInput(
                f"[[{block}]]: voice {self.voice.name!r} has no phoneme {', '.join(map(repr, unknown))};"
                " write the phonemes as espeak-ng does (IPA, stress marks ˈ ˌ, length ː)"
            )
        joined.extend(phonemes)
        if n + 1 < len(parts) and parts[n + 1][1][:1].isspace():
            joined.append(WORD_GAP)

    def ids(self, text: str) -> list[int]:
        """Phoneme ids of ``text`` with BOS, EOS and padding, ready for the model."""
        return phonemes_to_ids(self.phonemes(text), self._id_map)

    def is_silent(self, ids: list[int]) -> bool:
        """True when ``ids`` hold no phoneme at all (text of only symbols, say)."""
        return len(ids) <= self._empty_length
