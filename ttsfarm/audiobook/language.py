"""Whether a voice speaks a book's language: an EPUB names its language (``dc:language``), a
Piper voice its own (its config's ``language.code``, else its espeak voice). A voice reading a
book in another language reads it with its own pronunciation, so the user is told, in one line;
it is not an error (a German voice may be wanted for an English book that quotes German)."""

from __future__ import annotations

import re
from typing import Final

from ttsfarm.core.voices import Voice

ALIASES: Final = {
    "eng": "en", "deu": "de", "ger": "de", "fra": "fr", "fre": "fr", "spa": "es", "ita": "it",
    "por": "pt", "nld": "nl", "dut": "nl", "rus": "ru", "pol": "pl", "ukr": "uk", "ces": "cs",
    "cze": "cs", "swe": "sv", "nor": "no", "nob": "nb", "dan": "da", "fin": "fi", "ell": "el",
    "gre": "el", "tur": "tr", "ara": "ar", "zho": "zh", "chi": "zh", "cmn": "zh", "jpn": "ja",
    "kor": "ko", "hin": "hi", "vie": "vi", "cat": "ca", "hun": "hu", "ron": "ro", "rum": "ro",
}  # fmt: skip
"""ISO 639-2 and -3 codes (some books and espeak use them) to the two-letter ISO 639-1 code."""
NORWEGIAN: Final = frozenset({"no", "nb", "nn"})

_SUBTAG = re.compile(r"[-_.]")


def primary_language(code: str) -> str:
    """The language of a tag, without region or script: ``en-GB``, ``en_US``, ``eng`` -> ``en``."""
    primary = _SUBTAG.split(code.strip().lower(), maxsplit=1)[0]
    primary = ALIASES.get(primary, primary)
    return "no" if primary in NORWEGIAN else primary


def voice_language(voice: Voice) -> str:
    """The voice's language tag as its config gives it (``en_US``), else its espeak voice's."""
    return voice.language or voice.espeak_voice


def language_warning(book_language: str | None, voice: Voice, source: str) -> str | None:
    """One line saying that ``voice`` does not speak the language of the book ``source``, or
    ``None`` when it does (or either language is unknown)."""
    spoken = voice_language(voice)
    if not book_language or not spoken:
        return None
    if primary_language(book_language) == primary_language(spoken):
        return None
    return (
        f"{source} is in {book_language} (its dc:language) but voice {voice.name!r} speaks {spoken}: "
        f"it will be read with {spoken} pronunciation; pick a voice for {book_language} with --voice"
    )
