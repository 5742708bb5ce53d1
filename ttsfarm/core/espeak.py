"""espeak-ng, as piper-tts bundles it: one phonemizer per process, made on first use, one caller
at a time."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from piper.phonemize_espeak import EspeakPhonemizer

_lock = threading.Lock()
_phonemizer: EspeakPhonemizer | None = None


def phonemize(espeak_voice: str, text: str) -> list[list[str]]:
    """The phonemes of each sentence of ``text``, in ``espeak_voice`` (espeak-ng is not
    thread-safe: calls wait for each other)."""
    global _phonemizer
    with _lock:
        if _phonemizer is None:
            # imported here: piper's package loads onnxruntime, which a producer that only
            # judges the cost of a long text (ttsfarm.core.admission) should not pay for at import
            from piper.phonemize_espeak import EspeakPhonemizer

            _phonemizer = EspeakPhonemizer()
        return _phonemizer.phonemize(espeak_voice, text)
