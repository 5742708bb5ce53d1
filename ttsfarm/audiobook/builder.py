"""Building an audiobook: check everything, speak the parts not made yet, finish each chapter as
soon as its parts are spoken (while later parts are still spoken), then join the book.

Resuming is the normal path, not a special one: every run loads what ``OUTDIR/.parts`` already
holds (finished chapters, and the parts of the others), makes only the rest, and joins the book
from the same chapters, so an interrupted run followed by the same command gives the same book.
A book whose manifest matches the input and whose files are intact is left as it is.
"""

from __future__ import annotations

import fcntl
import logging
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ttsfarm.audiobook.assemble import assemble, book_key, remove_leftovers
from ttsfarm.audiobook.book import Book
from ttsfarm.audiobook.chapters import CHAPTERS_CACHE, ChapterCache, ChapterPlan, plans
from ttsfarm.audiobook.language import language_warning
from ttsfarm.audiobook.manifest import MANIFEST_NAME, Manifest, is_intact, read_manifest
from ttsfarm.audiobook.part_cache import PARTS_FOLDER, PartCache
from ttsfarm.audiobook.parts import PART_FORMAT, Part, book_parts
from ttsfarm.audiobook.render import PartFailed, Renderer, VoiceLookup
from ttsfarm.core.errors import InvalidInput, JobFailed, PermanentError
from ttsfarm.core.inputs import check_writable
from ttsfarm.core.jobs import JobRequest, JobResult
from ttsfarm.core.mastering import TARGET_LUFS
from ttsfarm.core.progress import BookProgress

log = logging.getLogger(__name__)

LOCK_NAME: Final = "lock"
FINISHING_PREFIX: Final = ".finishing-"
"""Folders where chapters are finished, inside the chapter cache (moved into it when done)."""


@dataclass(frozen=True)
class BuildReport:
    """What a run did."""

    manifest: Manifest
    parts_total: int
    parts_rendered: int
    """Parts made in this run; the others came from the cache."""
    already_done: bool
    """The book was finished before this run: nothing was rendered or written."""
    audio_rendered: float = 0.0
    """Seconds of speech made in this run (before mastering)."""
    audio_cached: float = 0.0
    """Seconds re-used from an earlier run: its parts, and its finished chapters."""
    chapters_finished: int = 0
    """Chapters finished in this run; the others came from the cache."""


@dataclass(frozen=True)
class _Work:
    """What a run has to do, after looking at the cache."""

    finished: dict[int, JobResult]
    """Chapters finished before, by number."""
    spoken: dict[str, JobResult]
    """Parts spoken before (of chapters not finished yet), by name."""
    missing: list[Part]
    """Parts to speak now."""


def build_audiobook(
    book: Book,
    outdir: Path,
    renderer: Renderer,
    source: str = "the book",
    target_lufs: float = TARGET_LUFS,
    progress: BookProgress | None = None,
) -> BuildReport:
    """Make (or finish) the audiobook of ``book`` in ``outdir``.

    Every input problem raises before any audio is made; ``source`` names the book file in messages.
    """
    check_writable(outdir / MANIFEST_NAME)
    parts = book_parts(book)
    flat = [part for chapter in parts for part in chapter]
    key = book_key(book, parts, target_lufs)
    progress = progress or BookProgress(disable=True)
    where = f"{source}, {book.position}"
    with _locked(outdir):
        previous = read_manifest(outdir)
        if previous is not None and previous.book_key == key and is_intact(previous, outdir):
            log.info("%s is finished already", outdir)
            return BuildReport(previous, len(flat), 0, already_done=True, audio_cached=previous.duration)
        rate = _book_rate(flat, renderer, where)
        _warn_language(book, flat, renderer, source)
        chapter_plans = plans(book.chapters, parts, rate, target_lufs)
        cache = PartCache(outdir / PARTS_FOLDER)
        chapters = ChapterCache(outdir / PARTS_FOLDER / CHAPTERS_CACHE)
        _clear_temp(cache, chapters)
        work = _look(chapter_plans, cache if renderer.keeps_parts else None, chapters)
        planned = _check(work.missing, renderer, where)
        _start(progress, chapter_plans, work, planned, renderer.finish_concurrency)
        log.info(
            "%s chapters finished before, %s parts spoken before, %s to speak",
            len(work.finished),
            len(work.spoken),
            len(work.missing),
        )
        if previous is not None:
            (outdir / MANIFEST_NAME).unlink(missing_ok=True)  # it no longer describes the files
        made, spoken = _make(
            chapter_plans,
            work,
            dict(zip((p.name for p in work.missing), planned, strict=True)),
            renderer,
            cache,
            chapters,
            progress,
            where,
        )
        progress.stage("joining")
        manifest = assemble(book, chapter_plans, {**work.finished, **made}, outdir, key, target_lufs, rate)
        remove_leftovers(previous, manifest, outdir)
    return BuildReport(
        manifest,
        len(flat),
        len(work.missing),
        already_done=False,
        audio_rendered=sum(r.duration for r in spoken.values()),
        audio_cached=sum(r.duration for r in work.spoken.values())
        + sum(r.duration for r in work.finished.values()),
        chapters_finished=len(made),
    )


def _book_rate(parts: Sequence[Part], renderer: Renderer, where: str) -> int:
    """The book's sample rate: the highest of its voices' (a voice of a lower rate is resampled)."""
    rates: dict[str, int] = {}
    for part in parts:
        voice = part.options.voice
        if voice not in rates:
            try:
                rates[voice] = renderer.sample_rate(voice)
            except PermanentError as error:
                raise type(error)(f"{where} {part.line}: {error}") from None
    return max(rates.values())


def _warn_language(book: Book, parts: Sequence[Part], renderer: Renderer, source: str) -> None:
    """Warn, one line per voice, when a voice does not speak the book's language."""
    if book.info.language is None or not isinstance(renderer, VoiceLookup):
        return
    for name in sorted({part.options.voice for part in parts}):
        message = language_warning(book.info.language, renderer.voice(name), source)
        if message is not None:
            log.warning("%s", message)


def _clear_temp(cache: PartCache, chapters: ChapterCache) -> None:
    """Remove what an interrupted run left half made (holding the book's lock)."""
    cache.clear_temp()
    if chapters.root.is_dir():
        for stale in chapters.root.glob(f"{FINISHING_PREFIX}*"):
            shutil.rmtree(stale, ignore_errors=True)


def _look(chapter_plans: Sequence[ChapterPlan], cache: PartCache | None, chapters: ChapterCache) -> _Work:
    """What is in the caches (the part cache where the renderer keeps parts), and what is left
    to make."""
    finished = {p.chapter.number: done for p in chapter_plans if (done := chapters.load(p.key)) is not None}
    needed = [part for p in chapter_plans if p.chapter.number not in finished for part in p.parts]
    loaded = {part.name: cache.load(part) for part in needed} if cache is not None else {}
    spoken = {name: result for name, result in loaded.items() if result is not None}
    return _Work(finished, spoken, [part for part in needed if part.name not in spoken])


def _start(
    progress: BookProgress, chapter_plans: Sequence[ChapterPlan], work: _Work, planned: list[int], places: int
) -> None:
    finished = sum(len(r.segments) for r in work.finished.values())
    spoken = sum(len(r.segments) for r in work.spoken.values())
    progress.start(
        sentences=finished + spoken + sum(planned),
        spoken=finished + spoken,
        finished=finished,
        chapters=len(chapter_plans),
        chapters_done=len(work.finished),
        audio=sum(r.duration for r in work.spoken.values()) + sum(r.duration for r in work.finished.values()),
        places=places,
    )


@contextmanager
def _locked(outdir: Path) -> Iterator[None]:
    """Hold ``OUTDIR/.parts/lock`` so two runs never write one book at once."""
    folder = outdir / PARTS_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / LOCK_NAME).open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InvalidInput(
                f"another `ttsfarm audiobook` is writing to {outdir}: wait for it, or give another folder"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _request(part: Part) -> JobRequest:
    # The content hash doubles as the job id: a farm sees the same part under the same id
    # on every run, so a resubmitted part can be recognised there.
    return JobRequest(part.text, part.options, PART_FORMAT, job_id=part.key)


def _check(parts: Sequence[Part], renderer: Renderer, where: str) -> list[int]:
    """Segments per part; raises the first problem, naming where in the book it is (``where`` is
    the file and what its positions count, e.g. ``book.csv, line``)."""
    counts: list[int] = []
    for part in parts:
        try:
            counts.append(renderer.check(_request(part)))
        except PermanentError as error:
            raise type(error)(f"{where} {part.line}: {error}") from None
    return counts


def _make(
    chapter_plans: Sequence[ChapterPlan],
    work: _Work,
    estimates: Mapping[str, int],
    renderer: Renderer,
    cache: PartCache,
    chapters: ChapterCache,
    progress: BookProgress,
    where: str,
) -> tuple[dict[int, JobResult], dict[str, JobResult]]:
    """Speak the missing parts and finish every chapter not finished yet, each as soon as its
    last part is spoken; the chapters finished and the parts spoken in this run.

    On an error or an interrupt everything in progress is told to stop; finished parts and
    chapters stay cached for the next run."""
    stop = threading.Event()
    results = dict(work.spoken)
    spoken: dict[str, JobResult] = {}
    left = {
        p.chapter.number: {part.name for part in p.parts if part.name not in results}
        for p in chapter_plans
        if p.chapter.number not in work.finished
    }
    by_number = {p.chapter.number: p for p in chapter_plans}

    def finish(plan: ChapterPlan) -> JobResult:
        chapters.root.mkdir(parents=True, exist_ok=True)
        request = plan.request(results)
        number, sentences = plan.chapter.number, sum(len(part.segments) for part in request.parts)
        progress.chapter_started(number, sentences)
        with tempfile.TemporaryDirectory(prefix=FINISHING_PREFIX, dir=chapters.root) as folder:
            try:
                done = renderer.finish(request, Path(folder), stop.is_set)
            except PermanentError as error:
                raise type(error)(f"chapter {number} ({plan.chapter.title}): {error}") from None
            stored = chapters.store(plan.key, done)
        progress.chapter_done(number, sentences)
        return stored

    pool = ThreadPoolExecutor(max(1, renderer.finish_concurrency), thread_name_prefix="ttsfarm-chapter")
    finishing: dict[Future[JobResult], ChapterPlan] = {}

    def start(number: int) -> None:
        finishing[pool.submit(finish, by_number[number])] = by_number[number]

    try:
        for number in [n for n, names in left.items() if not names]:
            start(number)
        requests = [(part, _request(part)) for part in work.missing]
        try:
            for part, result in renderer.render(requests, cache, progress.spoken, stop):
                results[part.name] = spoken[part.name] = result
                progress.part_done(part.name, estimates[part.name], len(result.segments), result.duration)
                left[part.chapter].discard(part.name)
                if not left[part.chapter]:
                    start(part.chapter)
                _raise_failed(finishing)
        except PartFailed as error:  # the part's own kind of error where it has one
            kind = type(error.__cause__) if isinstance(error.__cause__, PermanentError) else JobFailed
            raise kind(f"{where} {error.part.line}: {error}") from None
        made = {finishing[future].chapter.number: future.result() for future in as_completed(finishing)}
    except BaseException:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()
    return made, spoken


def _raise_failed(finishing: Mapping[Future[JobResult], ChapterPlan]) -> None:
    """A chapter that could not be finished stops the book at once, not after every part."""
    for future in finishing:
        if future.done() and future.exception() is not None:
            future.result()


def cached_so_far(book: Book, outdir: Path) -> tuple[int, int, float]:
    """Parts of ``book`` finished in ``outdir``'s cache, parts in all, and their seconds of
    speech: what an interrupted run leaves for the next one."""
    cache = PartCache(outdir / PARTS_FOLDER)
    flat = [part for chapter in book_parts(book) for part in chapter]
    found = [result for part in flat if (result := cache.load(part)) is not None]
    return len(found), len(flat), sum(r.duration for r in found)
