"""Admission by cost: what a job will make, judged before it is queued.

A character cap alone lets through texts that cost far more than their length says: 200,000
characters of digits, Arabic or Chinese became 28 to 42 hours of audio and up to 6.7 GB of temp
WAV. A job's cost is its audio seconds and the temp bytes its WAV takes, estimated from the
phonemes espeak-ng makes of its text, and each has a limit in the settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ttsfarm.core.errors import InvalidInput
from ttsfarm.core.espeak import phonemize
from ttsfarm.core.voices import Voice

SECONDS_PER_PHONEME: Final = 0.06
"""Speech per phoneme at a length scale of 1, pauses included. The joe voice made 0.049 to
0.053 s on prose, digits and Chinese text; rounded up, so that estimates err long."""
MOST_PHONEMES_PER_CHARACTER: Final = 20
"""More than espeak-ng made per character of any text tried (prose 1.0, dates 3.1, Arabic 3.8,
emoji 4.4, Chinese 8 to 15): a text whose length times this is within the limits is admitted
without being phonemized, as nearly every job is."""
TEMP_SAMPLE_BYTES: Final = 2
"""A job's speech waits in a 16-bit WAV in the temp folder until it is encoded and stored."""


@dataclass(frozen=True)
class JobCost:
    """What a job is estimated to make."""

    phonemes: int
    audio_seconds: float
    temp_bytes: int
    """The temp space it needs at most: its WAV, and for a mastered job the mastered copy too."""


def estimate(phonemes: int, voice: Voice, length_scale: float | None, mastered: bool) -> JobCost:
    seconds = phonemes * SECONDS_PER_PHONEME * (voice.length_scale if length_scale is None else length_scale)
    copies = 2 if mastered else 1
    return JobCost(phonemes, seconds, round(seconds * voice.sample_rate * TEMP_SAMPLE_BYTES * copies))


def check_cost(
    text: str,
    voice: Voice,
    length_scale: float | None,
    mastered: bool,
    max_audio_seconds: float,
    max_temp_mb: int,
) -> JobCost | None:
    """Raise :class:`InvalidInput` when the job would make more audio than ``max_audio_seconds``
    or need more temp space than ``max_temp_mb``; return its estimated cost, or ``None`` for a
    text short enough to need no estimate. A limit of 0 is no limit."""
    max_temp_bytes = max_temp_mb * 1_000_000

    def within(cost: JobCost) -> bool:
        return (not max_audio_seconds or cost.audio_seconds <= max_audio_seconds) and (
            not max_temp_bytes or cost.temp_bytes <= max_temp_bytes
        )

    if within(estimate(len(text) * MOST_PHONEMES_PER_CHARACTER, voice, length_scale, mastered)):
        return None
    phonemes = sum(len(sentence) for sentence in phonemize(voice.espeak_voice, text))
    cost = estimate(phonemes, voice, length_scale, mastered)
    if within(cost):
        return cost
    raise InvalidInput(
        f"the text would make about {_hours(cost.audio_seconds)} of audio ({phonemes:,} phonemes) and "
        f"need about {cost.temp_bytes / 1e6:,.0f} MB of temp space, over this farm's limits of "
        f"{_hours(max_audio_seconds)} (TTSFARM_MAX_JOB_AUDIO_SECONDS) and {max_temp_mb:,} MB "
        "(TTSFARM_MAX_JOB_TEMP_MB) per job: split it into smaller jobs (for example into chapters "
        "with `ttsfarm audiobook`)"
    )


def _hours(seconds: float) -> str:
    if not seconds:
        return "no limit"
    return f"{seconds / 3600:.1f} hours" if seconds >= 3600 else f"{seconds / 60:.0f} minutes"
