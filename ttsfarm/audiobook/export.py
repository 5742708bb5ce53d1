"""Whole-book files: subtitles (``.srt``) from segment times, and the ``.m4b`` with chapter
markers plus the ``.mp3``, tagged and with the cover, encoded by the ffmpeg binary that the
imageio-ffmpeg wheel ships (no system ffmpeg needed), which also measures their true peaks."""

from __future__ import annotations

import logging
import math
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Final

import imageio_ffmpeg

from ttsfarm.errors import Cancelled, PermanentError
from ttsfarm.files import atomic_target
from ttsfarm.jobs import SegmentTiming
from ttsfarm.mastering import PEAK_CEILING_DBTP

log = logging.getLogger(__name__)

M4B_BITRATE: Final = "64k"
"""AAC bitrate of the ``.m4b``: plenty for one voice in mono."""
MP3_BITRATE: Final = "64k"
ENCODE_TIMEOUT_SECONDS: Final = 6 * 3600
STOP_POLL_SECONDS: Final = 0.2
"""How often a running ffmpeg is checked for a stop (the other file's encoding failed)."""
GENRE: Final = "Audiobook"
_METADATA_SPECIALS: Final = ("\\", "=", ";", "#", "\n")
PEAK_FIX_PASSES: Final = 4
"""Encodings of one file at most while its true peak is over the ceiling."""
PEAK_FIX_MARGIN_DB: Final = 0.2
"""How far under the ceiling a file encoded again aims."""
PEAK_FIX_MIN_STEP_DB: Final = 0.3
"""Least cut per new encoding: an encoder's peaks do not follow small gain changes one to one."""
METER_RESOLUTION_DB: Final = 0.1
"""ffmpeg prints the true peak to 0.1 dB, so a reading must be this far under the ceiling."""
_TRUE_PEAK = re.compile(r"True peak:\s+Peak:\s+(-inf|-?\d+(?:\.\d+)?) dBFS")


@dataclass(frozen=True)
class BookTags:
    """What the book files say about the book."""

    title: str
    author: str | None = None
    narrator: str | None = None
    year: str | None = None


@dataclass(frozen=True)
class ChapterMark:
    """One chapter of the book file: its title and where it sits."""

    title: str
    start: float
    end: float
    audio: Path
    """The chapter's lossless audio file."""


def srt_time(seconds: float) -> str:
    millis = max(0, round(seconds * 1000))
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d},{millis:03d}"


def srt(cues: Sequence[SegmentTiming], offset: float = 0.0) -> str:
    """SubRip text: one cue per segment, shifted by ``offset`` seconds."""
    blocks = [
        f"{n}\n{srt_time(c.start + offset)} --> {srt_time(c.end + offset)}\n{' '.join(c.text.split())}\n"
        for n, c in enumerate(cues, start=1)
    ]
    return "\n".join(blocks)


def _escape(value: str) -> str:
    for special in _METADATA_SPECIALS:
        value = value.replace(special, "\\" + special)
    return value


def ffmetadata(tags: BookTags, chapters: Sequence[ChapterMark]) -> str:
    """ffmpeg's metadata file: book tags and one ``[CHAPTER]`` block per chapter (in ms).

    The author goes to artist and album artist, the narrator to composer: where audiobook
    players (Apple Books, Audiobookshelf, Plex) look for them in both MP4 and ID3 tags."""
    fields = {
        "title": tags.title,
        "album": tags.title,
        "artist": tags.author,
        "album_artist": tags.author,
        "composer": tags.narrator,
        "date": tags.year,
        "genre": GENRE,
    }
    lines = [";FFMETADATA1", *(f"{key}={_escape(value)}" for key, value in fields.items() if value)]
    for chapter in chapters:
        lines += [
            "",
            "[CHAPTER]",
            "TIMEBASE=1/1000",
            f"START={round(chapter.start * 1000)}",
            f"END={round(chapter.end * 1000)}",
            f"title={_escape(chapter.title)}",
        ]
    return "\n".join(lines) + "\n"


def _concat_list(chapters: Sequence[ChapterMark]) -> str:
    def quoted(path: Path) -> str:
        return "'" + str(path.resolve()).replace("'", "'\\''") + "'"

    return "ffconcat version 1.0\n" + "".join(f"file {quoted(c.audio)}\n" for c in chapters)


def encode_book(
    tags: BookTags,
    chapters: Sequence[ChapterMark],
    m4b: Path,
    mp3: Path,
    cover: Path | None = None,
    ceiling_db: float = PEAK_CEILING_DBTP,
) -> dict[str, float]:
    """Join the chapter files into ``m4b`` (AAC, chapter markers) and ``mp3`` (ID3 chapters),
    both tagged and with the cover, and return the true peak of each, measured on the file.

    Lossy encoding can push peaks over what the chapters had, so each file is measured after
    encoding and, if a peak is over ``ceiling_db``, encoded again that much quieter. The two
    files are encoded at once, each by an ffmpeg process of its own (each encoder uses one
    core). Both appear whole or not at all: when one fails, the other's ffmpeg is stopped and
    the failure raised at once, not after the other file's encoding."""
    with (
        tempfile.TemporaryDirectory(prefix="ttsfarm-book-") as folder,
        atomic_target(m4b) as m4b_temp,
        atomic_target(mp3) as mp3_temp,
    ):
        listing, metadata = Path(folder) / "chapters.ffconcat", Path(folder) / "metadata.txt"
        listing.write_text(_concat_list(chapters), encoding="utf-8")
        metadata.write_text(ffmetadata(tags, chapters), encoding="utf-8")
        stop = threading.Event()
        encode = partial(
            _encode_under_ceiling, listing=listing, metadata=metadata, cover=cover, ceiling_db=ceiling_db
        )
        with ThreadPoolExecutor(2, thread_name_prefix="ttsfarm-encode") as pool:
            encodings = {
                kind: pool.submit(encode, kind, target, stop=stop)
                for kind, target in (("m4b", m4b_temp), ("mp3", mp3_temp))
            }
            try:
                done, _ = wait(encodings.values(), return_when=FIRST_EXCEPTION)
            except BaseException:  # interrupted (Ctrl-C): neither file is wanted
                stop.set()
                raise
            failed = [encoding for encoding in done if encoding.exception() is not None]
            if failed:  # the other file is not wanted now: stop its ffmpeg instead of waiting for it
                stop.set()
                failed[0].result()  # raises the first failure, not the stop it caused
            return {kind: encoding.result() for kind, encoding in encodings.items()}


def _encode_under_ceiling(
    kind: str,
    target: Path,
    listing: Path,
    metadata: Path,
    cover: Path | None,
    ceiling_db: float,
    stop: threading.Event | None = None,
) -> float:
    """Encode ``target`` as ``kind``, quieter each time its true peak is over the ceiling; the peak."""
    gain = 0.0
    for _ in range(PEAK_FIX_PASSES):
        _ffmpeg(
            _encode_command(kind, listing, metadata, cover, target, gain), f"encode the {kind}", stop=stop
        )
        peak = measure_true_peak(target, stop)
        if peak <= ceiling_db - METER_RESOLUTION_DB:
            return peak
        log.info("%s: true peak %.2f dBTP after encoding, encoding it again quieter", kind, peak)
        gain -= max(PEAK_FIX_MIN_STEP_DB, peak - ceiling_db + PEAK_FIX_MARGIN_DB)
    raise PermanentError(
        f"the {kind} keeps a true peak of {peak:.2f} dBTP, over {ceiling_db} dBTP: lower --target-lufs"
    )


def _encode_command(
    kind: str, listing: Path, metadata: Path, cover: Path | None, target: Path, gain: float
) -> list[str]:
    inputs = [*("-f", "concat", "-safe", "0", "-i", str(listing)), *("-f", "ffmetadata", "-i", str(metadata))]
    maps = ["-map", "0:a", "-map_metadata", "1", "-map_chapters", "1", "-fflags", "+bitexact"]
    if cover is not None:
        inputs += ["-i", str(cover)]
        maps += ["-map", "2:v", "-c:v", "copy", "-disposition:v:0", "attached_pic"]
    if gain:
        maps += ["-af", f"volume={gain:.2f}dB"]
    if kind == "m4b":
        codec = [*("-c:a", "aac", "-b:a", M4B_BITRATE, "-flags:a", "+bitexact", "-movflags", "+faststart")]
        codec += ["-f", "ipod"]
    else:
        codec = ["-c:a", "libmp3lame", "-b:a", MP3_BITRATE, "-id3v2_version", "3", "-f", "mp3"]
    return [*inputs, *maps, *codec, str(target)]


def measure_true_peak(path: Path, stop: threading.Event | None = None) -> float:
    """The true peak of an audio file in dBTP, as ffmpeg's EBU R128 meter reads it (4x
    oversampled); ``-inf`` for silence."""
    output = _ffmpeg(
        ["-nostats", "-i", str(path), "-map", "0:a", "-af", "ebur128=peak=true", "-f", "null", "-"],
        f"measure {path.name}",
        loglevel="info",
        stop=stop,
    )
    found = _TRUE_PEAK.findall(output)
    if not found:
        raise PermanentError(f"could not measure the true peak of {path.name}: ffmpeg printed no summary")
    return -math.inf if found[-1] == "-inf" else float(found[-1])


def _ffmpeg(
    arguments: list[str], what: str, loglevel: str = "error", stop: threading.Event | None = None
) -> str:
    """Run the bundled ffmpeg; its stderr, or one line saying why it failed. Once ``stop`` is
    set, ffmpeg is killed and :class:`Cancelled` raised (within :data:`STOP_POLL_SECONDS`)."""
    command = [
        imageio_ffmpeg.get_ffmpeg_exe(),
        "-nostdin",
        "-hide_banner",
        "-loglevel",
        loglevel,
        "-y",
        *arguments,
    ]
    log.debug("ffmpeg: %s", command)
    if stop is not None and stop.is_set():
        raise Cancelled(f"ffmpeg was stopped before it could {what}")
    try:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    except OSError as error:
        raise PermanentError(f"cannot run ffmpeg to {what}: {error.strerror}") from None
    deadline = time.monotonic() + ENCODE_TIMEOUT_SECONDS
    with process:
        while True:
            try:
                _, stderr = process.communicate(timeout=STOP_POLL_SECONDS)
                break
            except subprocess.TimeoutExpired:
                stopped = stop is not None and stop.is_set()
                if stopped or time.monotonic() > deadline:
                    process.kill()
                    process.communicate()
                    if stopped:
                        raise Cancelled(f"ffmpeg was stopped before it could {what}") from None
                    raise PermanentError(f"ffmpeg did not {what} in {ENCODE_TIMEOUT_SECONDS} s") from None
    if process.returncode != 0:
        detail = stderr.strip().splitlines()[-1] if stderr.strip() else f"status {process.returncode}"
        raise PermanentError(f"ffmpeg could not {what}: {detail}")
    return stderr
