"""From rendered parts to the finished book: chapters joined, mastered and written, then the
whole-book files and, last, the manifest. Everything here is deterministic, so the same parts
always give the same book."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import mutagen
import numpy as np
import soundfile as sf

from ttsfarm.audiobook.book import Book, Chapter
from ttsfarm.audiobook.export import M4B_BITRATE, MP3_BITRATE, BookTags, ChapterMark, encode_book, srt
from ttsfarm.audiobook.manifest import MANIFEST_VERSION, ChapterEntry, Manifest, OutputFile
from ttsfarm.audiobook.parts import Part
from ttsfarm.errors import PermanentError
from ttsfarm.files import atomic_target, slug, write_atomic
from ttsfarm.jobs import JobResult, SegmentTiming
from ttsfarm.mastering import LIMITER_MARGIN_DB, PEAK_CEILING_DBTP, master, resample

log = logging.getLogger(__name__)

CHAPTERS_FOLDER: Final = "chapters"
CHAPTER_FORMAT: Final = "flac"
"""Chapter files stay lossless; the ``.m4b`` and ``.mp3`` are the compressed copies."""
HEAD_SILENCE: Final = 0.5
"""Seconds of silence before a chapter's first word."""
TAIL_SILENCE: Final = 1.5
"""Seconds of silence after its last word, so chapters do not run into each other."""
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
        "silence": [HEAD_SILENCE, TAIL_SILENCE],
        "encoding": [CHAPTER_FORMAT, M4B_BITRATE, MP3_BITRATE],
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()


def book_stem(book: Book) -> str:
    return slug(book.title, BOOK_FALLBACK_NAME)


def chapter_stem(chapter: Chapter, chapters: int) -> str:
    """``chapters/NN-title-slug``: the number keeps order and uniqueness, the slug only reads well."""
    width = max(2, len(str(chapters)))
    return f"{CHAPTERS_FOLDER}/{chapter.number:0{width}d}-{slug(chapter.title, CHAPTER_FALLBACK_NAME)}"


def join_parts(
    parts: Sequence[Part], results: Mapping[str, JobResult], rate: int
) -> tuple[np.ndarray, list[SegmentTiming]]:
    """One chapter's audio (with its head and tail silence) and its segment times."""
    pieces: list[np.ndarray] = [np.zeros(round(HEAD_SILENCE * rate), dtype=np.float32)]
    timings: list[SegmentTiming] = []
    offset = len(pieces[0])
    for n, part in enumerate(parts):
        result = results[part.name]
        audio, part_rate = sf.read(result.location, dtype="float32", always_2d=False)
        audio = resample(audio, part_rate, rate)
        shift = offset / rate
        timings += [SegmentTiming(s.text, s.start + shift, s.end + shift) for s in result.segments]
        pause = part.pause_after if n < len(parts) - 1 else TAIL_SILENCE
        pieces += [audio, np.zeros(round(pause * rate), dtype=np.float32)]
        offset += len(audio) + len(pieces[-1])
    return np.concatenate(pieces), timings


def assemble(
    book: Book,
    parts: Sequence[Sequence[Part]],
    results: Mapping[str, JobResult],
    outdir: Path,
    key: str,
    target_lufs: float,
) -> Manifest:
    """Write every file of the book into ``outdir``, the manifest last, and return it."""
    rate = max(r.sample_rate for r in results.values())
    entries: list[ChapterEntry] = []
    marks: list[ChapterMark] = []
    cues: list[SegmentTiming] = []
    start = 0.0
    for chapter, chapter_parts in zip(book.chapters, parts, strict=True):
        audio, timings = join_parts(chapter_parts, results, rate)
        mastered = master(audio, rate, target_lufs)
        log.info(
            "chapter %s: gain %+.1f dB, %.1f LUFS, %.1f dBTP",
            chapter.number,
            mastered.gain,
            mastered.loudness,
            mastered.true_peak,
        )
        stem = chapter_stem(chapter, len(book.chapters))
        audio_name, srt_name = f"{stem}.{CHAPTER_FORMAT}", f"{stem}.srt"
        with atomic_target(outdir / audio_name) as temp:
            sf.write(temp, mastered.audio, rate, format="FLAC", subtype="PCM_16")
        write_atomic(outdir / srt_name, srt(timings).encode("utf-8"))
        duration = len(mastered.audio) / rate
        entries.append(
            ChapterEntry(
                number=chapter.number,
                title=chapter.title,
                start=start,
                duration=duration,
                audio=OutputFile.of(outdir, audio_name, duration),
                subtitles=OutputFile.of(outdir, srt_name),
                loudness=round(mastered.loudness, 2),
                true_peak=round(mastered.true_peak, 2),
                sentences=tuple(timings),
            )
        )
        marks.append(ChapterMark(chapter.title, start, start + duration, outdir / audio_name))
        cues += [SegmentTiming(t.text, t.start + start, t.end + start) for t in timings]
        start += duration
    return _finish(book, outdir, key, target_lufs, rate, start, entries, marks, cues)


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
) -> Manifest:
    stem = book_stem(book)
    m4b, mp3, subtitles = f"{stem}.m4b", f"{stem}.mp3", f"{stem}.srt"
    write_atomic(outdir / subtitles, srt(cues).encode("utf-8"))
    info = book.info
    cover = f"{COVER_NAME}.{info.cover.extension}" if info.cover else None
    if info.cover is not None and cover is not None:
        write_atomic(outdir / cover, info.cover.data)
    tags = BookTags(book.title, info.author, info.narrator, info.year)
    peaks = encode_book(tags, marks, outdir / m4b, outdir / mp3, outdir / cover if cover else None)
    files = {
        "m4b": OutputFile.of(outdir, m4b, _decoded_length(outdir / m4b), round(peaks["m4b"], 2)),
        "mp3": OutputFile.of(outdir, mp3, _decoded_length(outdir / mp3), round(peaks["mp3"], 2)),
        "srt": OutputFile.of(outdir, subtitles),
    }
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
