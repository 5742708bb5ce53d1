"""Whole-book files: subtitles (``.srt``) from segment times, and the ``.m4b`` with chapter
markers plus the ``.mp3``, tagged and with the cover: the chapters' lossy pieces joined by
stream copy (``ttsfarm.core.encoding`` made them to join without a gap), nothing encoded again.

The ``.m4b`` is the AAC pieces put into MP4 by ffmpeg (its sample tables need a muxer). The
``.mp3`` is its ID3 tag followed by the MP3 pieces, byte for byte: a stream of MP3 frames needs
no container (ffmpeg took 4 s to copy seven hours of them). It has no Xing header: the bitrate
is constant, so players read the duration from the size, and none drops samples at the start,
so every chapter starts where its marker says."""

from __future__ import annotations

import io
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

from mutagen.id3 import (
    APIC,
    CHAP,
    CTOC,
    ID3,
    TALB,
    TCOM,
    TCON,
    TIT2,
    TPE1,
    TPE2,
    TYER,
    CTOCFlags,
    Frame,
    PictureType,
)

from ttsfarm.core.captions import srt as srt  # the book's subtitles, kept importable here
from ttsfarm.core.captions import srt_time as srt_time
from ttsfarm.core.encoding import PIECE_CODECS, run_ffmpeg
from ttsfarm.core.errors import Cancelled
from ttsfarm.core.files import atomic_target

log = logging.getLogger(__name__)

GENRE: Final = "Audiobook"
_METADATA_SPECIALS: Final = ("\\", "=", ";", "#", "\n")
COPY_CHUNK_BYTES: Final = 1 << 20
COVER_TYPES: Final = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png"}
ID3_HEADER_BYTES: Final = 10


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


def mp3_tag(tags: BookTags, chapters: Sequence[ChapterMark], cover: Path | None = None) -> bytes:
    """The ID3 tag (v2.3) that starts the book's ``.mp3``: the tags as :func:`ffmetadata` gives
    them, a ``CTOC`` listing the chapters, a ``CHAP`` frame per chapter, and the cover.

    mutagen writes each frame; the frames are put in this order here, because mutagen sorts them
    by size, and some readers (ffmpeg's among them) list chapters in the order of their frames."""
    frames: list[Frame] = []
    text = {TIT2: tags.title, TALB: tags.title, TPE1: tags.author, TPE2: tags.author, TCOM: tags.narrator}
    frames += [frame(encoding=3, text=[value]) for frame, value in text.items() if value]
    if tags.year:
        frames.append(TYER(encoding=3, text=[tags.year]))  # v2.3 has no TDRC
    frames.append(TCON(encoding=3, text=[GENRE]))
    ids = [f"chp{n}" for n in range(len(chapters))]
    frames.append(
        CTOC(element_id="toc", flags=CTOCFlags.TOP_LEVEL | CTOCFlags.ORDERED, child_element_ids=ids)
    )
    for element, chapter in zip(ids, chapters, strict=True):
        start, end = round(chapter.start * 1000), round(chapter.end * 1000)
        title = TIT2(encoding=3, text=[chapter.title])
        frames.append(CHAP(element_id=element, start_time=start, end_time=end, sub_frames=[title]))
    if cover is not None:
        mime = COVER_TYPES.get(cover.suffix.lower(), "image/jpeg")
        frames.append(
            APIC(encoding=3, mime=mime, type=PictureType.COVER_FRONT, desc="Cover", data=cover.read_bytes())
        )
    body = b"".join(_frame_bytes(frame) for frame in frames)
    size = len(body)  # ID3's "syncsafe" size: seven bits per byte
    return b"ID3\x03\x00\x00" + bytes((size >> shift) & 0x7F for shift in (21, 14, 7, 0)) + body


def _frame_bytes(frame: Frame) -> bytes:
    """One frame as ID3 v2.3 holds it (mutagen's encoding, without the tag's 10-byte header)."""
    tag = ID3()
    tag.add(frame)
    out = io.BytesIO()
    tag.save(out, v2_version=3, padding=lambda _: 0)
    return out.getvalue()[ID3_HEADER_BYTES:]


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
            if codec.book_format == "mp3":  # frames need no container: the tag, then the pieces
                _concatenate(pieces[codec_name], temps[codec_name], mp3_tag(tags, chapters, cover), stop)
                return
            joined = Path(folder) / f"joined.{codec.name}"
            _concatenate(pieces[codec_name], joined, b"", stop)
            arguments = _join_arguments(codec.raw_input, joined, metadata, cover)
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


def _concatenate(pieces: Sequence[Path], target: Path, head: bytes, stop: threading.Event) -> None:
    """``head`` and then every piece, byte for byte, into ``target``."""
    with target.open("wb") as out:
        out.write(head)
        for piece in pieces:
            if stop.is_set():
                raise Cancelled(f"{target.name} was stopped before it was whole")
            with piece.open("rb") as source:
                shutil.copyfileobj(source, out, COPY_CHUNK_BYTES)


def _join_arguments(raw_input: str, joined: Path, metadata: Path, cover: Path | None) -> list[str]:
    """ffmpeg's arguments but the output file: the joined AAC pieces copied into the ``.m4b``
    with its tags, chapters and cover."""
    inputs = [*("-f", raw_input, "-i", str(joined)), *("-f", "ffmetadata", "-i", str(metadata))]
    maps = ["-map", "0:a", "-map_metadata", "1", "-map_chapters", "1", "-c:a", "copy", "-fflags", "+bitexact"]
    if cover is not None:
        inputs += ["-i", str(cover)]
        maps += ["-map", "2:v", "-c:v", "copy", "-disposition:v:0", "attached_pic"]
    return [*inputs, *maps, "-movflags", "+faststart", "-f", "ipod"]
