"""Finishing a ``ttsfarm synth`` file: the spoken audio brought to a loudness (as audiobook
chapters are, true peaks under -1 dBTP) and written in its format with basic tags."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

import soundfile as sf

from ttsfarm.files import atomic_target, sha256_file
from ttsfarm.jobs import AUDIO_FORMATS, JobResult
from ttsfarm.mastering import TARGET_LUFS, master

DEFAULT_SYNTH_LUFS: Final = TARGET_LUFS
"""``ttsfarm synth`` normalises to the audiobook loudness unless told ``--loudness off``."""
TITLE_WORDS: Final = 8
SOFTWARE: Final = "ttsfarm"


@dataclass(frozen=True)
class Tags:
    """What the file says about itself."""

    title: str
    artist: str
    """The voice."""


def title_from(text: str) -> str:
    """A title from the first words of ``text``."""
    words = text.split()
    return " ".join(words[:TITLE_WORDS]) + ("..." if len(words) > TITLE_WORDS else "")


def finish(
    spoken: Path, result: JobResult, target: Path, audio_format: str, loudness: float | None, tags: Tags
) -> JobResult:
    """Write ``spoken`` (lossless) to ``target`` as ``audio_format``, normalised to ``loudness``
    LUFS (``None`` keeps the voice's own level), tagged; return the result for ``target``."""
    audio, rate = sf.read(spoken, dtype="float32", always_2d=False)
    if loudness is not None:
        audio = master(audio, rate, loudness).audio
    container, subtype = AUDIO_FORMATS[audio_format]
    with atomic_target(target) as temp:
        with sf.SoundFile(temp, "w", rate, 1, format=container, subtype=subtype) as handle:
            handle.title, handle.artist, handle.software = tags.title, tags.artist, SOFTWARE
            handle.write(audio)
        size, sha = temp.stat().st_size, sha256_file(temp)
    return replace(result, location=str(target), format=audio_format, size=size, sha256=sha)
