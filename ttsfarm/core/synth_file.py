"""Finishing a spoken file (``ttsfarm synth``, and any job given a loudness): the audio brought
to a loudness (as audiobook chapters are, true peaks under -1 dBTP) and written in its format
with basic tags.

Long audio is mastered in blocks of about ten minutes, cut in the pause between two segments,
as a book is mastered by chapter: memory stays bounded (a job may hold three hours of speech)
and each block is at the target loudness."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import soundfile as sf

from ttsfarm.core.errors import PermanentError, raise_if_cancelled
from ttsfarm.core.files import atomic_target
from ttsfarm.core.jobs import AUDIO_FORMATS, SegmentTiming

BLOCK_SECONDS: Final = 600.0
"""Longest stretch mastered at once (it is held in memory 4x oversampled for the peaks)."""
LOSSY_HEADROOM_DB: Final = {"mp3": 0.3, "ogg": 0.6}
"""How much lower than the promised ceiling a normalised file of a lossy format is mastered: its
encoder lifts true peaks (joe at -18 LUFS, under a -1.3 dBTP aim: mp3 decoded at -1.09, Vorbis
at -0.87 dBTP)."""
TITLE_WORDS: Final = 8
TITLE_CHARS: Final = 80
"""A title is also cut at this many characters: a text without spaces is one long "word"."""
SOFTWARE: Final = "ttsfarm"


@dataclass(frozen=True)
class Tags:
    """What the file says about itself."""

    title: str
    artist: str
    """The voice."""


def write_tags(handle: sf.SoundFile, tags: Tags) -> None:
    """Tag a file open for writing: its title, the voice as artist, and this software."""
    handle.title, handle.artist, handle.software = tags.title, tags.artist, SOFTWARE


def title_from(text: str) -> str:
    """A title from the first words of ``text``."""
    words = text.split()
    title = " ".join(words[:TITLE_WORDS])
    if len(title) > TITLE_CHARS:
        return title[:TITLE_CHARS].rstrip() + "..."
    return title + ("..." if len(words) > TITLE_WORDS else "")


def finish(
    spoken: Path,
    segments: Sequence[SegmentTiming],
    target: Path,
    audio_format: str,
    loudness: float | None,
    tags: Tags | None,
    block_seconds: float = BLOCK_SECONDS,
    should_stop: Callable[[], bool] | None = None,
) -> None:
    """Write ``spoken`` (lossless) to ``target`` as ``audio_format``, normalised to ``loudness``
    LUFS (``None`` keeps the voice's own level) in blocks cut between ``segments``
    (:func:`block_lengths`), tagged unless ``tags`` is ``None``. ``should_stop`` is asked
    between blocks (a block of ten minutes takes about a second): :class:`Cancelled` then, and
    ``target`` is not written. Runs in a helper process on a worker (``ttsfarm.core.processes``).

    A lossy encoder moves the peaks it is given: a normalised mp3 or ogg is mastered under a
    lower ceiling (:data:`LOSSY_HEADROOM_DB`), decoded and measured, and written again lower
    still while its true peak is over the promised ceiling, by the rule the book's pieces follow
    (:func:`ttsfarm.core.mastering.headroom_after`)."""
    from ttsfarm.core.mastering import PEAK_CEILING_DBTP, PEAK_FIX_PASSES, headroom_after

    headroom = LOSSY_HEADROOM_DB.get(audio_format, 0.0)
    for _ in range(PEAK_FIX_PASSES):
        ceiling = PEAK_CEILING_DBTP - headroom
        _write(spoken, segments, target, audio_format, loudness, tags, block_seconds, should_stop, ceiling)
        if loudness is None or audio_format not in LOSSY_HEADROOM_DB:
            return
        peak = decoded_true_peak(target)
        lower = headroom_after(peak, headroom)
        if lower is None:
            return
        headroom = lower
    target.unlink(missing_ok=True)
    raise PermanentError(
        f"the {audio_format} file keeps a true peak of {peak:.2f} dBTP, over {PEAK_CEILING_DBTP} dBTP: "
        "lower the loudness"
    )


def _write(
    spoken: Path,
    segments: Sequence[SegmentTiming],
    target: Path,
    audio_format: str,
    loudness: float | None,
    tags: Tags | None,
    block_seconds: float,
    should_stop: Callable[[], bool] | None,
    ceiling: float,
) -> None:
    container, subtype = AUDIO_FORMATS[audio_format]
    if loudness is not None:
        from ttsfarm.core.mastering import master
    with sf.SoundFile(spoken) as source, atomic_target(target) as temp:
        rate = source.samplerate
        with sf.SoundFile(temp, "w", rate, 1, format=container, subtype=subtype) as handle:
            if tags is not None:
                write_tags(handle, tags)
            for frames in block_lengths(segments, rate, source.frames, block_seconds):
                raise_if_cancelled(should_stop)
                audio = source.read(frames, dtype="float32", always_2d=False)
                handle.write(audio if loudness is None else master(audio, rate, loudness, ceiling).audio)


def decoded_true_peak(path: Path, block_seconds: float = 60.0) -> float:
    """The true peak (dBTP) of an encoded file as a player decodes it, read in blocks (memory stays
    bounded); each block's edges are read with the filter's reach around them."""
    from ttsfarm.core.loudness import TRUE_PEAK_REACH, quick_true_peak

    peak = -math.inf
    with sf.SoundFile(path) as decoded:
        block = max(1, round(block_seconds * decoded.samplerate))
        previous = np.zeros(0, dtype=np.float32)
        while True:
            audio = decoded.read(block, dtype="float32", always_2d=False)
            if not len(audio):
                return peak
            peak = max(peak, quick_true_peak(np.concatenate([previous, audio])))
            previous = audio[-TRUE_PEAK_REACH:]


def block_lengths(
    segments: Sequence[SegmentTiming], rate: int, frames: int, block_seconds: float = BLOCK_SECONDS
) -> list[int]:
    """Lengths, in samples, of the blocks ``frames`` is mastered in: each at most about
    ``block_seconds``, cut halfway through the pause between two segments."""
    cuts: list[int] = []
    last = 0.0
    for before, after in itertools.pairwise(segments):
        if after.start - last >= block_seconds:
            last = (before.end + after.start) / 2
            cuts.append(min(frames, round(last * rate)))
    edges = [0, *cuts, frames]
    return [b - a for a, b in itertools.pairwise(edges) if b > a]
