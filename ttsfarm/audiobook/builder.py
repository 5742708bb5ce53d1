"""Building an audiobook: check everything, render the parts not yet cached, assemble.

Resuming is the normal path, not a special one: every run loads what ``OUTDIR/.parts``
already holds, renders only the rest, and assembles the book from the same parts, so an
interrupted run followed by the same command gives the same book. A book whose manifest
matches the input and whose files are intact is left as it is.
"""

from __future__ import annotations

import fcntl
import logging
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ttsfarm.audiobook.assemble import assemble, book_key, remove_leftovers
from ttsfarm.audiobook.book import Book
from ttsfarm.audiobook.manifest import MANIFEST_NAME, Manifest, is_intact, read_manifest
from ttsfarm.audiobook.part_cache import PARTS_FOLDER, PartCache
from ttsfarm.audiobook.parts import PART_FORMAT, Part, book_parts
from ttsfarm.audiobook.render import Renderer
from ttsfarm.errors import InvalidInput, PermanentError
from ttsfarm.inputs import check_writable
from ttsfarm.jobs import JobRequest, JobResult
from ttsfarm.mastering import TARGET_LUFS
from ttsfarm.progress import BookProgress

log = logging.getLogger(__name__)

LOCK_NAME: Final = "lock"


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
    """Seconds of speech re-used from the cache of an earlier run."""


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
    with _locked(outdir):
        previous = read_manifest(outdir)
        if previous is not None and previous.book_key == key and is_intact(previous, outdir):
            log.info("%s is finished already", outdir)
            return BuildReport(previous, len(flat), 0, already_done=True, audio_cached=previous.duration)
        cache = PartCache(outdir / PARTS_FOLDER)
        cache.clear_temp()
        cached = {part.name: result for part in flat if (result := cache.load(part)) is not None}
        missing = [part for part in flat if part.name not in cached]
        planned = _check(missing, renderer, f"{source}, {book.position}")
        progress.start(
            parts_left={
                c.number: sum(p.name not in cached for p in cp)
                for c, cp in zip(book.chapters, parts, strict=True)
            },
            segments_total=sum(len(r.segments) for r in cached.values()) + sum(planned),
            segments_done=sum(len(r.segments) for r in cached.values()),
            audio=sum(r.duration for r in cached.values()),
        )
        log.info("%s parts: %s cached, %s to render", len(flat), len(cached), len(missing))
        rendered = _render(missing, renderer, cache, progress)
        results = {**cached, **rendered}
        if previous is not None:
            (outdir / MANIFEST_NAME).unlink(missing_ok=True)  # it no longer describes the files
        progress.stage("mastering")
        manifest = assemble(book, parts, results, outdir, key, target_lufs)
        remove_leftovers(previous, manifest, outdir)
    return BuildReport(
        manifest,
        len(flat),
        len(missing),
        already_done=False,
        audio_rendered=sum(r.duration for r in rendered.values()),
        audio_cached=sum(r.duration for r in cached.values()),
    )


def cached_so_far(book: Book, outdir: Path) -> tuple[int, int, float]:
    """Parts of ``book`` finished in ``outdir``'s cache, parts in all, and their seconds of
    speech: what an interrupted run leaves for the next one."""
    cache = PartCache(outdir / PARTS_FOLDER)
    flat = [part for chapter in book_parts(book) for part in chapter]
    found = [result for part in flat if (result := cache.load(part)) is not None]
    return len(found), len(flat), sum(r.duration for r in found)


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


def _check(parts: Sequence[Part], renderer: Renderer, source: str) -> list[int]:
    """Segments per part; raises the first problem, naming where in the book it is
    (``source`` is the file and what its positions count, e.g. ``book.csv, line``)."""
    counts: list[int] = []
    for part in parts:
        try:
            counts.append(renderer.check(_request(part)))
        except PermanentError as error:
            raise type(error)(f"{source} {part.line}: {error}") from None
    return counts


def _render(
    parts: Sequence[Part], renderer: Renderer, cache: PartCache, progress: BookProgress
) -> dict[str, JobResult]:
    """Render ``parts`` on up to ``renderer.concurrency`` threads, caching each as it finishes.

    On an error or an interrupt the parts in progress are told to stop (and are not cached);
    finished ones stay cached for the next run."""
    stop = threading.Event()

    def render_one(part: Part) -> JobResult:
        target = cache.temp_path(part)
        try:
            result = renderer.render(
                _request(part),
                target,
                lambda segments, audio: progress.advance(part.name, segments, audio),
                stop.is_set,
            )
            stored = cache.store(part, target, result)
        finally:
            target.unlink(missing_ok=True)
        progress.finished(part.chapter, part.name, len(stored.segments), stored.duration)
        return stored

    results: dict[str, JobResult] = {}
    executor = ThreadPoolExecutor(max_workers=max(1, renderer.concurrency), thread_name_prefix="ttsfarm-part")
    try:
        futures: dict[Future[JobResult], Part] = {executor.submit(render_one, p): p for p in parts}
        for future in as_completed(futures):
            results[futures[future].name] = future.result()
    except BaseException:
        stop.set()
        executor.shutdown(wait=True, cancel_futures=True)
        raise
    executor.shutdown()
    return results
