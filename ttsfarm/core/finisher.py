"""The work of a finish job (``ttsfarm.core.finishing``): a chapter's part files in, the finished
chapter's files out. It runs in a helper process (``ttsfarm.core.processes``), so that mastering never
holds the interpreter of a process that feeds a GPU; its two lossy encoders run at once, as
ffmpeg processes of their own.

Files in, files out: where they are stored is the caller's business.
"""

from __future__ import annotations

import logging
import resource
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Final

import numpy as np
import soundfile as sf

from ttsfarm.core.encoding import PIECE_CODECS, PieceCodec, aligned_length, encode_piece
from ttsfarm.core.errors import Cancelled, InvalidInput, PermanentError
from ttsfarm.core.files import sha256_file
from ttsfarm.core.finishing import HEAD_SILENCE, TAIL_SILENCE, FinishRequest
from ttsfarm.core.jobs import EncodedPiece, JobResult, SegmentTiming
from ttsfarm.core.mastering import PEAK_CEILING_DBTP, PEAK_FIX_PASSES, headroom_after, limit, master, resample

log = logging.getLogger(__name__)

CHAPTER_STEM: Final = "chapter"
CHAPTER_FORMAT: Final = "flac"
"""Chapters stay lossless (16-bit FLAC)."""
BYTES_PER_SAMPLE: Final = 32
"""Memory finishing holds per sample of the chapter, with room (:func:`memory_needed`)."""


def memory_needed(request: FinishRequest) -> int:
    """Bytes finishing ``request`` holds at its peak: the chapter's samples, joined, mastered,
    and decoded from each piece (a ten-minute chapter raised a helper's peak by 358 MiB,
    28 bytes a sample)."""
    seconds = (
        HEAD_SILENCE
        + TAIL_SILENCE
        + sum((part.segments[-1].end if part.segments else 0.0) + part.pause_after for part in request.parts)
    )
    return round(seconds * request.sample_rate * BYTES_PER_SAMPLE)


def finish_chapter(
    request: FinishRequest,
    sources: Sequence[Path],
    folder: Path,
    should_stop: Callable[[], bool] | None = None,
) -> JobResult:
    """Join ``sources`` (the audio of ``request.parts``, in order) into one chapter, master it
    and write it to ``folder`` as FLAC and as each of ``request.pieces``; the result's locations
    are those files. ``should_stop`` is asked between the steps (and by the encoders):
    :class:`Cancelled` then."""

    def check() -> None:
        if should_stop is not None and should_stop():
            raise Cancelled("the chapter was stopped while it was being finished")

    rate = request.sample_rate
    clock = _Clock()
    audio, segments = join_parts(request, sources)
    frames = len(audio)
    clock.lap("join")
    check()
    mastered = master(audio, rate, request.loudness)
    del audio
    log.info(
        "chapter %s: gain %+.1f dB, %.1f LUFS, %.1f dBTP",
        request.title or request.job_id,
        mastered.gain,
        mastered.loudness,
        mastered.true_peak,
    )
    check()
    chapter = folder / f"{CHAPTER_STEM}.{CHAPTER_FORMAT}"
    sf.write(chapter, mastered.audio, rate, format="FLAC", subtype="PCM_16")
    clock.lap("master")
    check()

    def encode(name: str) -> EncodedPiece:
        return _encode(mastered.audio, chapter, rate, PIECE_CODECS[name], should_stop)

    with ThreadPoolExecutor(max(1, len(request.pieces)), thread_name_prefix="ttsfarm-encode") as encoders:
        pieces = tuple(encoders.map(encode, request.pieces))
    clock.lap("encode")
    return JobResult(
        job_id=request.job_id,
        location=str(chapter),
        url=None,
        format=CHAPTER_FORMAT,
        sample_rate=rate,
        duration=frames / rate,
        size=chapter.stat().st_size,
        sha256=sha256_file(chapter),
        segments=segments,
        loudness=request.loudness,
        measured_loudness=mastered.loudness,
        true_peak=mastered.true_peak,
        pieces=pieces,
        timings=clock.laps,
    )


class _Clock:
    """Wall seconds of each step, in order, and the CPU seconds of them all (``cpu``: this
    process's and its encoders')."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()
        self._cpu = _cpu_seconds()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(now - self._last, 4)
        self.laps["cpu"] = round(_cpu_seconds() - self._cpu, 4)
        self._last = now


def _cpu_seconds() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _encode(
    audio: np.ndarray, chapter: Path, rate: int, codec: PieceCodec, should_stop: Callable[[], bool] | None
) -> EncodedPiece:
    """The chapter (``audio``, written to ``chapter``) as a piece of ``codec``, its true peak
    under the ceiling. An encoder can raise a peak over what the chapter had: the piece is then
    encoded from the chapter limited that much lower, which costs the loudness of a few peaks,
    not of the whole chapter. A codec that always does starts lower (``codec.headroom``)."""
    target = chapter.with_suffix(f".{codec.name}")
    headroom = codec.headroom
    for _ in range(PEAK_FIX_PASSES):
        if headroom:
            lower = chapter.with_suffix(f".{codec.name}.wav")
            sf.write(lower, limit(audio, rate, PEAK_CEILING_DBTP - headroom), rate, subtype="FLOAT")
            try:
                piece = encode_piece(lower, len(audio), rate, codec, target, should_stop)
            finally:
                lower.unlink()
        else:
            piece = encode_piece(chapter, len(audio), rate, codec, target, should_stop)
        again = headroom_after(piece.true_peak, headroom)
        if again is None:
            return replace(piece, headroom=round(headroom, 2))
        headroom = again
        log.info(
            "%s: true peak %.2f dBTP, encoding it again %.2f dB lower", codec.name, piece.true_peak, headroom
        )
    raise PermanentError(
        f"the {codec.name} copy keeps a true peak of {piece.true_peak:.2f} dBTP, "
        f"over {PEAK_CEILING_DBTP} dBTP: lower the loudness"
    )


def join_parts(
    request: FinishRequest, sources: Sequence[Path]
) -> tuple[np.ndarray, tuple[SegmentTiming, ...]]:
    """The chapter's audio: silence, each part followed by its pause (the last by the tail),
    and as much more silence as ends it on a whole frame of every lossy format; and where each
    sentence sits in it."""
    if len(sources) != len(request.parts):
        raise ValueError(f"{len(request.parts)} parts but {len(sources)} files")
    rate = request.sample_rate
    pieces: list[np.ndarray] = [np.zeros(round(HEAD_SILENCE * rate), dtype=np.float32)]
    offset = len(pieces[0])
    segments: list[SegmentTiming] = []
    for n, (part, source) in enumerate(zip(request.parts, sources, strict=True)):
        audio, part_rate = sf.read(source, dtype="float32", always_2d=True)
        if audio.shape[1] != 1:
            raise InvalidInput(f"part {n + 1} of the chapter has {audio.shape[1]} channels, not one")
        audio = resample(audio[:, 0], part_rate, rate)
        shift = offset / rate
        segments += [s.shifted(shift) for s in part.segments]
        pieces.append(audio)
        offset += len(audio)
        if n < len(request.parts) - 1:
            pieces.append(np.zeros(round(part.pause_after * rate), dtype=np.float32))
            offset += len(pieces[-1])
    pieces.append(np.zeros(aligned_length(offset + round(TAIL_SILENCE * rate)) - offset, dtype=np.float32))
    return np.concatenate(pieces), tuple(segments)
