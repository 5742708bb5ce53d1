"""Whole-book files: subtitles (``.srt``) from segment times, and the ``.m4b`` with chapter
markers plus the ``.mp3``, both encoded in one run of the ffmpeg binary that the
imageio-ffmpeg wheel ships (no system ffmpeg needed)."""

from __future__ import annotations

import logging
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import imageio_ffmpeg

from ttsfarm.errors import PermanentError
from ttsfarm.files import atomic_target
from ttsfarm.jobs import SegmentTiming

log = logging.getLogger(__name__)

M4B_BITRATE: Final = "64k"
"""AAC bitrate of the ``.m4b``: plenty for one voice in mono."""
MP3_BITRATE: Final = "64k"
ENCODE_TIMEOUT_SECONDS: Final = 6 * 3600
GENRE: Final = "Audiobook"
_METADATA_SPECIALS: Final = ("\\", "=", ";", "#", "\n")


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


def ffmetadata(title: str, chapters: Sequence[ChapterMark]) -> str:
    """ffmpeg's metadata file: book tags and one ``[CHAPTER]`` block per chapter (in ms)."""
    lines = [";FFMETADATA1", f"title={_escape(title)}", f"album={_escape(title)}", f"genre={GENRE}"]
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


def encode_book(title: str, chapters: Sequence[ChapterMark], m4b: Path, mp3: Path) -> None:
    """Join the chapter files into ``m4b`` (AAC, chapter markers) and ``mp3`` (ID3 chapters).

    Both appear whole or not at all."""
    with (
        tempfile.TemporaryDirectory(prefix="ttsfarm-book-") as folder,
        atomic_target(m4b) as m4b_temp,
        atomic_target(mp3) as mp3_temp,
    ):
        listing, metadata = Path(folder) / "chapters.ffconcat", Path(folder) / "metadata.txt"
        listing.write_text(_concat_list(chapters), encoding="utf-8")
        metadata.write_text(ffmetadata(title, chapters), encoding="utf-8")
        tags = ["-map", "0:a", "-map_metadata", "1", "-map_chapters", "1", "-fflags", "+bitexact"]
        command = [
            imageio_ffmpeg.get_ffmpeg_exe(),
            *("-nostdin", "-hide_banner", "-loglevel", "error", "-y"),
            *("-f", "concat", "-safe", "0", "-i", str(listing)),
            *("-f", "ffmetadata", "-i", str(metadata)),
            *tags,
            *("-c:a", "aac", "-b:a", M4B_BITRATE, "-flags:a", "+bitexact", "-movflags", "+faststart"),
            *("-f", "ipod", str(m4b_temp)),
            *tags,
            *("-c:a", "libmp3lame", "-b:a", MP3_BITRATE, "-id3v2_version", "3", "-f", "mp3", str(mp3_temp)),
        ]
        log.debug("encoding the book: %s", command)
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=ENCODE_TIMEOUT_SECONDS)
        except OSError as error:
            raise PermanentError(f"cannot run ffmpeg to encode the book: {error.strerror}") from None
        except subprocess.TimeoutExpired:
            raise PermanentError(
                f"ffmpeg did not finish encoding the book in {ENCODE_TIMEOUT_SECONDS} s"
            ) from None
        if run.returncode != 0:
            detail = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else f"status {run.returncode}"
            raise PermanentError(f"ffmpeg could not encode the book: {detail}")
