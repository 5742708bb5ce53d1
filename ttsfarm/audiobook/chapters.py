"""Chapters as the builder finishes them: each chapter's plan (its parts, and the finish job its
rendered parts make), and the cache of finished chapters under ``OUTDIR/.parts/chapters``.

A chapter's key is a hash of what decides its files (its parts' keys and pauses, the book's rate
and loudness, the lossy formats, the finishing version), known before any part is rendered: a
finished chapter in the cache is used as it is, and its parts are not needed at all.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from ttsfarm.audiobook.book import Chapter
from ttsfarm.audiobook.parts import Part
from ttsfarm.core.files import FILE_MODE, UMASK, sha256_file, write_atomic
from ttsfarm.core.finishing import FinishRequest, PartAudio, finishing_identity
from ttsfarm.core.jobs import JobResult

log = logging.getLogger(__name__)

CHAPTERS_CACHE: Final = "chapters"
"""The finished chapters' folder inside the part cache."""


@dataclass(frozen=True)
class ChapterPlan:
    """One chapter of the book and how it is made."""

    chapter: Chapter
    parts: tuple[Part, ...]
    sample_rate: int
    loudness: float

    @property
    def key(self) -> str:
        identity = {
            "finishing": finishing_identity(),
            "parts": [(p.key, p.pause_after) for p in self.parts],
            "sample_rate": self.sample_rate,
            "loudness": self.loudness,
        }
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()

    def request(self, results: Mapping[str, JobResult]) -> FinishRequest:
        """The finish job of this chapter, from its parts' results (by part name)."""
        parts = tuple(
            PartAudio(
                results[p.name].location, results[p.name].sha256, p.pause_after, results[p.name].segments
            )
            for p in self.parts
        )
        return FinishRequest(parts, self.sample_rate, self.loudness, self.chapter.title)


class ChapterCache:
    """Finished chapters of one book, by key: the FLAC, one file per lossy piece, and the
    result (written last, atomically: a chapter counts as finished only once all are whole)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _record(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def load(self, key: str) -> JobResult | None:
        """The finished chapter, its locations paths in the cache; ``None`` if it must be made."""
        record = self._record(key)
        if not record.is_file():
            return None
        try:
            result = JobResult.from_dict(json.loads(record.read_text(encoding="utf-8")))
        except (ValueError, KeyError, TypeError):
            log.warning("chapter %s: unreadable record, finishing it again", key[:12])
            return None
        files = [(self.root / result.location, result.sha256)]
        files += [(self.root / p.location, p.sha256) for p in result.pieces]
        if not all(path.is_file() and sha256_file(path) == digest for path, digest in files):
            log.warning("chapter %s: a file does not match its record, finishing it again", key[:12])
            return None
        return _located(result, self.root)

    def store(self, key: str, finished: JobResult) -> JobResult:
        """Move a finished chapter's files (``finished`` names them) into the cache and record it."""
        self.root.mkdir(parents=True, exist_ok=True)
        names = {finished.location: f"{key}.{finished.format}"}
        names |= {p.location: f"{key}.{p.codec}" for p in finished.pieces}
        for source, name in names.items():
            os.chmod(source, FILE_MODE & ~UMASK)
            shutil.move(source, self.root / name)
        stored = replace(
            finished,
            location=names[finished.location],
            url=None,
            pieces=tuple(replace(p, location=names[p.location]) for p in finished.pieces),
        )
        write_atomic(self._record(key), json.dumps(stored.to_dict(), ensure_ascii=False, indent=1).encode())
        return _located(stored, self.root)


def _located(result: JobResult, root: Path) -> JobResult:
    return replace(
        result,
        location=str(root / result.location),
        pieces=tuple(replace(p, location=str(root / p.location)) for p in result.pieces),
    )


def plans(
    chapters: Sequence[Chapter], parts: Sequence[Sequence[Part]], sample_rate: int, loudness: float
) -> list[ChapterPlan]:
    return [
        ChapterPlan(chapter, tuple(chapter_parts), sample_rate, loudness)
        for chapter, chapter_parts in zip(chapters, parts, strict=True)
    ]
