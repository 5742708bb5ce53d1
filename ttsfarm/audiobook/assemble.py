"""From finished chapters to the finished book: each chapter's files put in place, the whole-book
files joined from the chapters' pieces and, last, the manifest. Everything here is deterministic,
so the same chapters always give the same book."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import mutagen

from ttsfarm.audiobook.book import Book, Chapter
from ttsfarm.audiobook.chapters import ChapterPlan
from ttsfarm.audiobook.export import BookTags, ChapterMark, join_book
from ttsfarm.audiobook.manifest import MANIFEST_VERSION, ChapterEntry, Manifest, OutputFile
from ttsfarm.audiobook.parts import Part
from ttsfarm.core.captions import srt
from ttsfarm.core.encoding import PIECE_CODECS
from ttsfarm.core.errors import PermanentError
from ttsfarm.core.files import slug, write_atomic, write_error
from ttsfarm.core.finisher import CHAPTER_FORMAT
from ttsfarm.core.finishing import PIECE_FORMATS, finishing_identity
from ttsfarm.core.jobs import EncodedPiece, JobResult, SegmentTiming
from ttsfarm.core.mastering import LIMITER_MARGIN_DB, PEAK_CEILING_DBTP

log = logging.getLogger(__name__)

CHAPTERS_FOLDER: Final = "chapters"
BOOK_FALLBACK_NAME: Final = "book"
CHAPTER_FALLBACK_NAME: Final = "chapter"
COVER_NAME: Final = "cover"


def book_key(book: Book, parts: Sequence[Sequence[Part]], target_lufs: float) -> str:
    """A hash of everything that decides the finished book."""
    identity = {
        "version": MANIFEST_VERSION,
        "title": book.title,
        "info": [book.info.author, book.info.narrator, book.info.year],
        "cover": hashlib.sha256(book.info.cover.data).hexdigest() if book.info.cover else None,
        "chapters": [
            {"title": c.title, "parts": [(p.key, p.pause_after) for p in cp]}
            for c, cp in zip(book.chapters, parts, strict=True)
        ],
        "target_lufs": target_lufs,
        "ceiling": [PEAK_CEILING_DBTP, LIMITER_MARGIN_DB],
        "finishing": [CHAPTER_FORMAT, *finishing_identity()],
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()


def book_stem(book: Book) -> str:
    return slug(book.title, BOOK_FALLBACK_NAME)


def chapter_stem(chapter: Chapter, chapters: int) -> str:
    """``chapters/NN-title-slug``: the number keeps order and uniqueness, the slug only reads well."""
    width = max(2, len(str(chapters)))
    return f"{CHAPTERS_FOLDER}/{chapter.number:0{width}d}-{slug(chapter.title, CHAPTER_FALLBACK_NAME)}"


def assemble(
    book: Book,
    plans: Sequence[ChapterPlan],
    finished: Mapping[int, JobResult],
    outdir: Path,
    key: str,
    target_lufs: float,
    rate: int,
) -> Manifest:
    """Write every file of the book into ``outdir``, the manifest last, and return it.
    ``finished`` holds each chapter's finished files (by chapter number)."""
    entries: list[ChapterEntry] = []
    marks: list[ChapterMark] = []
    cues: list[SegmentTiming] = []
    start = 0.0
    for plan in plans:
        chapter, done = plan.chapter, finished[plan.chapter.number]
        stem = chapter_stem(chapter, len(book.chapters))
        audio_name, srt_name = f"{stem}.{CHAPTER_FORMAT}", f"{stem}.srt"
        place(Path(done.location), outdir / audio_name)
        write_atomic(outdir / srt_name, srt(done.segments).encode("utf-8"))
        entries.append(
            ChapterEntry(
                number=chapter.number,
                title=chapter.title,
                start=start,
                duration=done.duration,
                audio=OutputFile.of(outdir, audio_name, done.duration),
                subtitles=OutputFile.of(outdir, srt_name),
                loudness=round(_measured(done.measured_loudness), 2),
                true_peak=round(_measured(done.true_peak), 2),
                sentences=done.segments,
            )
        )
        marks.append(ChapterMark(chapter.title, start, start + done.duration, outdir / audio_name))
        cues += [SegmentTiming(t.text, t.start + start, t.end + start) for t in done.segments]
        start += done.duration
    chapters = [finished[plan.chapter.number] for plan in plans]
    return _finish(book, outdir, key, target_lufs, rate, start, entries, marks, cues, chapters)


def _measured(value: float | None) -> float:
    if value is None:
        raise ValueError("a finished chapter without its measured loudness and peak")
    return value


def place(source: Path, target: Path) -> None:
    """Put ``source`` at ``target`` (a hard link where the disk allows, else a copy), whole or
    not at all."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() and os.path.samefile(source, target):
        return  # there already (and renaming a link over itself would leave the temp name)
    temp = target.with_name(f".{target.name}.placing")
    temp.unlink(missing_ok=True)
    try:
        try:
            os.link(source, temp)
        except OSError:  # another disk, or links not allowed: a copy does
            shutil.copyfile(source, temp)
        os.replace(temp, target)
    except OSError as error:
        temp.unlink(missing_ok=True)
        raise write_error(target, error) from None


def _finish(
    book: Book,
    outdir: Path,
    key: str,
    target_lufs: float,
    rate: int,
    duration: float,
    entries: list[ChapterEntry],
    marks: list[ChapterMark],
    cues: list[SegmentTiming],
    chapters: list[JobResult],
) -> Manifest:
    stem = book_stem(book)
    names = {codec: f"{stem}.{PIECE_CODECS[codec].book_format}" for codec in PIECE_FORMATS}
    subtitles = f"{stem}.srt"
    write_atomic(outdir / subtitles, srt(cues).encode("utf-8"))
    info = book.info
    cover = f"{COVER_NAME}.{info.cover.extension}" if info.cover else None
    if info.cover is not None and cover is not None:
        write_atomic(outdir / cover, info.cover.data)
    tags = BookTags(book.title, info.author, info.narrator, info.year)
    pieces = {codec: [_piece(chapter, codec) for chapter in chapters] for codec in PIECE_FORMATS}
    targets = {codec: outdir / name for codec, name in names.items()}
    join_book(
        tags,
        marks,
        {c: [Path(p.location) for p in ps] for c, ps in pieces.items()},
        targets,
        rate,
        outdir / cover if cover else None,
    )
    files = {
        PIECE_CODECS[codec].book_format: OutputFile.of(
            outdir, name, _decoded_length(outdir / name), round(max(p.true_peak for p in pieces[codec]), 2)
        )
        for codec, name in names.items()
    }
    files["srt"] = OutputFile.of(outdir, subtitles)
    if cover is not None:
        files["cover"] = OutputFile.of(outdir, cover)
    manifest = Manifest(
        title=book.title,
        author=info.author,
        narrator=info.narrator,
        year=info.year,
        book_key=key,
        sample_rate=rate,
        duration=duration,
        target_lufs=target_lufs,
        peak_ceiling_dbtp=PEAK_CEILING_DBTP,
        chapters=tuple(entries),
        files=files,
    )
    manifest.write(outdir)
    return manifest


def _piece(chapter: JobResult, codec: str) -> EncodedPiece:
    for piece in chapter.pieces:
        if piece.codec == codec:
            return piece
    raise PermanentError(f"chapter {chapter.job_id} was finished without its {codec} piece: make it again")


def _decoded_length(path: Path) -> float:
    """The playing time a player reads from the file's headers."""
    info = mutagen.File(path)
    if info is None:
        raise PermanentError(f"{path.name} was written but cannot be read back as audio: run again")
    return round(float(info.info.length), 3)


def remove_leftovers(previous: Manifest | None, current: Manifest, outdir: Path) -> None:
    """Delete files an earlier version of the book wrote that this one no longer has: those its
    manifest listed, and any chapter file not in this one (an interrupted run may have removed
    the earlier manifest before writing this one)."""
    keep = {f.file for f in current.outputs()}
    root = outdir.resolve()
    listed = [outdir / output.file for output in previous.outputs()] if previous is not None else []
    chapters = outdir / CHAPTERS_FOLDER
    found = (
        [path for path in chapters.iterdir() if not path.name.startswith(".")] if chapters.is_dir() else []
    )
    for candidate in {*listed, *found}:
        path = candidate.resolve()
        name = path.relative_to(root).as_posix() if path.is_relative_to(root) else None
        if name is not None and name not in keep and path.is_file():
            log.info("removing %s, left from an earlier version of the book", name)
            path.unlink()
