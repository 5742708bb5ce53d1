"""Whole-book files: subtitles (``.srt``) from segment times, and the ``.m4b`` with chapter
markers plus the ``.mp3``, tagged and with the cover: the chapters' lossy pieces joined by
stream copy (``ttsfarm.encoding`` made them to join without a gap), nothing encoded again."""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ttsfarm.encoding import PIECE_CODECS, run_ffmpeg
from ttsfarm.files import atomic_target
from ttsfarm.jobs import SegmentTiming

log = logging.getLogger(__name__)

GENRE: Final = "Audiobook"
_METADATA_SPECIALS: Final = ("\\", "=", ";", "#", "\n")
COPY_CHUNK_BYTES: Final = 1 << 20


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


def ffmetadata(tags: BookTags, chapters: Sequence[ChapterMark], rate: int) -> str:
    """ffmpeg's metadata file: book tags and one ``[CHAPTER]`` block per chapter (in samples at
    ``rate``: exact, as the chapters' audio is).

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
            f"TIMEBASE=1/{rate}",
            f"START={round(chapter.start * rate)}",
            f"END={round(chapter.end * rate)}",
            f"title={_escape(chapter.title)}",
        ]
    return "\n".join(lines) + "\n"


def join_book(
    tags: BookTags,
    chapters: Sequence[ChapterMark],
    pieces: Mapping[str, Sequence[Path]],
    targets: Mapping[str, Path],
    rate: int,
    cover: Path | None = None,
) -> None:
    """Write each book file in ``targets`` (codec name to path: ``aac`` makes the ``.m4b``, ``mp3``
    the ``.mp3``) from the chapters' pieces of that codec, joined by stream copy, tagged, with
    chapter markers and the cover. Nothing is encoded again. The files are written at once (each
    by an ffmpeg of its own), and they appear whole or not at all."""
    with tempfile.TemporaryDirectory(prefix="ttsfarm-book-") as folder, ExitStack() as outputs:
        metadata = Path(folder) / "metadata.txt"
        metadata.write_text(ffmetadata(tags, chapters, rate), encoding="utf-8")
        temps = {name: outputs.enter_context(atomic_target(target)) for name, target in targets.items()}
        stop = threading.Event()

        def join(codec_name: str) -> None:
            codec = PIECE_CODECS[codec_name]
            joined = Path(folder) / f"joined.{codec.name}"
            with joined.open("wb") as out:
                for piece in pieces[codec_name]:
                    with piece.open("rb") as source:
                        shutil.copyfileobj(source, out, COPY_CHUNK_BYTES)
            arguments = _join_arguments(codec.raw_input, codec.book_format, joined, metadata, cover)
            run_ffmpeg([*arguments, str(temps[codec_name])], f"write the {codec.book_format}", stop.is_set)

        with ThreadPoolExecutor(len(targets), thread_name_prefix="ttsfarm-join") as pool:
            joins = [pool.submit(join, name) for name in targets]
            try:
                done, _ = wait(joins, return_when=FIRST_EXCEPTION)
            except BaseException:  # interrupted (Ctrl-C): no file is wanted
                stop.set()
                raise
            failed = [future for future in done if future.exception() is not None]
            if failed:  # the other files are not wanted now: stop their ffmpeg instead of waiting
                stop.set()
                failed[0].result()  # raises the first failure, not the stop it caused


def _join_arguments(
    raw_input: str, book_format: str, joined: Path, metadata: Path, cover: Path | None
) -> list[str]:
    """ffmpeg's arguments but the output file: the joined pieces copied into the book's container
    with its tags, chapters and cover."""
    inputs = [*("-f", raw_input, "-i", str(joined)), *("-f", "ffmetadata", "-i", str(metadata))]
    maps = ["-map", "0:a", "-map_metadata", "1", "-map_chapters", "1", "-c:a", "copy", "-fflags", "+bitexact"]
    if cover is not None:
        inputs += ["-i", str(cover)]
        maps += ["-map", "2:v", "-c:v", "copy", "-disposition:v:0", "attached_pic"]
    if book_format == "m4b":
        container = ["-movflags", "+faststart", "-f", "ipod"]
    else:
        container = ["-id3v2_version", "3", "-f", "mp3"]
    return [*inputs, *maps, *container]
