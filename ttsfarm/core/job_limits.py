"""What a job accepts: its text, formats, voice options, loudness and pauses, and the checks
that say what to fix when a value is wrong."""

from __future__ import annotations

import numbers
from typing import Final, Protocol

from ttsfarm.core.errors import InvalidInput, UnsupportedFormat

MAX_TEXT_CHARS: Final = 200_000
"""Longest text one job accepts (about 3.5 hours of speech). Split longer works into
chapters (``ttsfarm audiobook``); the bound keeps every job well inside the broker's
visibility timeout."""

SUMMARY_WORDS_CHARS: Final = 60
"""How much of the text a job's one-line summary shows."""

DEFAULT_VOICE: Final = "joe"
DEFAULT_FORMAT: Final = "wav"

AUDIO_FORMATS: Final[dict[str, tuple[str, str]]] = {
    "wav": ("WAV", "PCM_16"),
    "flac": ("FLAC", "PCM_16"),
    "mp3": ("MP3", "MPEG_LAYER_III"),
    "ogg": ("OGG", "VORBIS"),
}
"""Output formats: name -> (libsndfile container, subtype)."""

LENGTH_SCALE_RANGE: Final = (0.1, 10.0)
"""Speaking rates a job takes: from ten times faster to ten times slower than the voice."""
NOISE_RANGE: Final = (0.0, 2.0)
"""Noise scales a job takes (Piper voices ship 0.667 and 0.8; 0 makes output deterministic)."""
SCALES: Final = (
    ("length_scale", "length scale", LENGTH_SCALE_RANGE, "1 is normal speed, above 1 slower"),
    ("noise_scale", "noise scale", NOISE_RANGE, "0 is deterministic"),
    ("noise_w", "noise w", NOISE_RANGE, "0 gives every phoneme its predicted length"),
)

SENTENCE_SILENCE_RANGE: Final = (0.0, 2.0)
"""Seconds of silence after each sentence a job takes (piper's ``--sentence-silence``). The
ceiling keeps a job's audio, which admission estimates from its text, near that estimate."""

DEFAULT_LOUDNESS: Final = -18.0
"""The one loudness (LUFS) ttsfarm masters to unless told another: ``--loudness`` of every
command, a book's chapters, the speech endpoint. The level audiobooks are published at."""
LOUDNESS_RANGE: Final = (-40.0, -10.0)
"""Loudness targets (LUFS) a job can be mastered to: spoken word is usually published at -23 to
-16 (EBU R128 broadcast -23, audiobooks about -18, podcasts -16)."""

PRIORITIES: Final = ("interactive", "bulk")
"""Job priorities, highest first: a worker takes every interactive job that waits before any
bulk one (a job already running is never stopped for another)."""
DEFAULT_PRIORITY: Final = "bulk"

CONTENT_TYPES: Final[dict[str, str]] = {
    "wav": "audio/wav",
    "flac": "audio/flac",
    "mp3": "audio/mpeg",
    "ogg": "audio/ogg",
}


def check_format(name: str) -> str:
    """Return the canonical format name, or raise :class:`UnsupportedFormat`."""
    if not isinstance(name, str):
        raise UnsupportedFormat(f"the audio format must be a name such as wav, not {name!r}")
    canonical = name.lower().lstrip(".")
    if canonical not in AUDIO_FORMATS:
        known = ", ".join(AUDIO_FORMATS)
        raise UnsupportedFormat(f"unknown audio format {canonical!r}: use one of {known}")
    return canonical


def check_priority(name: str) -> str:
    """``name`` if it is one of :data:`PRIORITIES`, else :class:`InvalidInput` saying which are."""
    if name not in PRIORITIES:
        raise InvalidInput(f"unknown priority {name!r}: use interactive (someone waits for it) or bulk")
    return name


def check_unicode(value: str, what: str) -> str:
    """Return ``value`` if it is Unicode text, or raise :class:`InvalidInput` naming its first
    lone surrogate and where it is (counted in characters from 1). Such a string is half of a
    character cut in two, or bytes that were not UTF-8 decoded with ``surrogateescape``: no
    encoding can store it, so neither the broker nor a result could hold it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidInput(
            f"{what} has a lone surrogate (U+{ord(value[error.start]):04X}) at character {error.start + 1}, "
            "which is not Unicode text (half of a character cut in two, or a byte that was not UTF-8): "
            "remove it, or mend the text where it came from"
        ) from None
    return value


def check_text(text: str) -> str:
    """Return the text if a job can take it, or raise :class:`InvalidInput`."""
    if not isinstance(text, str):
        raise InvalidInput(f"the text must be a string, not {type(text).__name__}")
    if not text or not text.strip():
        raise InvalidInput("the text is empty: give some words to speak")
    if not any(character.isalnum() for character in text):
        raise InvalidInput(
            "the text has nothing to speak: it holds no letters or digits (only symbols, "
            "punctuation or emoji); give some words"
        )
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidInput(
            f"the text has {len(text):,} characters, over the limit of {MAX_TEXT_CHARS:,} "
            "per job: split it (for example into chapters with `ttsfarm audiobook`)"
        )
    return check_unicode(text, "the text")


def check_key(key: str) -> str:
    """Return the idempotency key if a job can be bound to it, or raise :class:`InvalidInput`."""
    if not isinstance(key, str):
        raise InvalidInput(f"the idempotency key must be a string, not {type(key).__name__}")
    return check_unicode(key, "the idempotency key")


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_loudness(value: object) -> float | None:
    """Return the loudness target as a float (``None``: the voice's own level), or raise
    :class:`InvalidInput`."""
    if value is None:
        return None
    low, high = LOUDNESS_RANGE
    if not (isinstance(value, numbers.Real) and not isinstance(value, bool) and low <= float(value) <= high):
        raise InvalidInput(
            f"the loudness must be a number of LUFS from {low:g} to {high:g} (for example -18, as "
            f"audiobooks, or -23, as broadcast), or unset for the voice's own level; not {value!r}"
        )
    return float(value)


def check_sentence_silence(value: object) -> float | None:
    """Return the seconds of silence after each sentence as a float (``None``: the pauses of
    ``ttsfarm.core.breaks``), or raise :class:`InvalidInput`."""
    if value is None:
        return None
    low, high = SENTENCE_SILENCE_RANGE
    if not (isinstance(value, numbers.Real) and not isinstance(value, bool) and low <= float(value) <= high):
        raise InvalidInput(
            f"the sentence silence must be a number of seconds from {low:g} to {high:g} (such as 0.2), "
            f"or unset for ttsfarm's own pauses; not {value!r}"
        )
    return float(value)


class VoiceChoice(Protocol):
    """What :func:`check_options` reads of a job's options (``ttsfarm.core.jobs.SynthesisOptions``)."""

    @property
    def voice(self) -> str: ...
    @property
    def speaker(self) -> int | None: ...


def check_options(options: VoiceChoice) -> None:
    """Raise :class:`InvalidInput` for options no voice can take: a voice that is not a name, a
    speaker that is not an id, a scale that is not a number in range. Whether the voice exists
    and has that speaker is checked against the farm's voices where the job is made
    (``VoiceCatalog``: ``Client.submit``, the gateway)."""
    if not isinstance(options.voice, str) or not options.voice.strip():
        raise InvalidInput(
            f"the voice must be a voice name or the path of a Piper .onnx file, not {options.voice!r}"
        )
    check_unicode(options.voice, "the voice")
    speaker = options.speaker
    if speaker is not None and not (isinstance(speaker, int) and is_number(speaker) and speaker >= 0):
        raise InvalidInput(f"the speaker must be a speaker id (a whole number from 0), not {speaker!r}")
    for name, label, (low, high), hint in SCALES:
        value = getattr(options, name)
        if value is not None and not (is_number(value) and low <= value <= high):
            raise InvalidInput(f"{label} must be between {low:g} and {high:g} ({hint}), not {value!r}")
