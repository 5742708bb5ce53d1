"""Text to Piper phoneme ids with piper-tts's bundled espeak-ng."""

from __future__ import annotations

from typing import Final

from piper.phoneme_ids import phonemes_to_ids

from ttsfarm.espeak import phonemize
from ttsfarm.voices import Voice

SENTENCE_JOIN: Final = " "
"""Placed between espeak's sentences when one segment holds more than one."""


class Phonemizer:
    """Phoneme ids for one voice. Safe to share between threads (espeak-ng is not: we lock)."""

    def __init__(self, voice: Voice) -> None:
        self.voice = voice
        self._id_map = voice.phoneme_id_map
        self._empty_length = len(phonemes_to_ids([], self._id_map))

    def phonemes(self, text: str) -> list[str]:
        """All phonemes of ``text`` as one utterance."""
        sentences = phonemize(self.voice.espeak_voice, text)
        joined: list[str] = []
        for sentence in sentences:
            if joined and sentence:
                joined.append(SENTENCE_JOIN)
            joined.extend(sentence)
        return joined

    def ids(self, text: str) -> list[int]:
        """Phoneme ids of ``text`` with BOS, EOS and padding, ready for the model."""
        return phonemes_to_ids(self.phonemes(text), self._id_map)

    def is_silent(self, ids: list[int]) -> bool:
        """True when ``ids`` hold no phoneme at all (text of only symbols, say)."""
        return len(ids) <= self._empty_length
