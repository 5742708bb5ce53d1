"""The cache of finished parts under ``OUTDIR/.parts``: what makes a run resumable.

Each part is two files named by its position and content hash: the audio, then a JSON record
of its result (duration, checksum, segment times). The record is written last, atomically,
so a part counts as finished only once both are whole; a part whose audio no longer matches
its record is made again.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Final

from ttsfarm.audiobook.parts import PART_FORMAT, Part
from ttsfarm.core.files import FILE_MODE, UMASK, sha256_file, write_atomic
from ttsfarm.core.jobs import JobResult

log = logging.getLogger(__name__)

PARTS_FOLDER: Final = ".parts"


class PartCache:
    """Finished parts of one book, kept in one folder."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def audio_path(self, part: Part) -> Path:
        return self.root / f"{part.name}.{PART_FORMAT}"

    def record_path(self, part: Part) -> Path:
        return self.root / f"{part.name}.json"

    def temp_path(self, part: Part) -> Path:
        """Where a renderer writes the part; :meth:`store` moves it into the cache."""
        self.root.mkdir(parents=True, exist_ok=True)
        return self.root / f".{part.name}.rendering.{PART_FORMAT}"

    def load(self, part: Part) -> JobResult | None:
        """The finished part's result, or ``None`` if it must be made (again)."""
        record, audio = self.record_path(part), self.audio_path(part)
        if not record.is_file() or not audio.is_file():
            return None
        try:
            result = JobResult.from_dict(json.loads(record.read_text(encoding="utf-8")))
        except (ValueError, KeyError, TypeError):
            log.warning("part %s: unreadable record, making it again", part.name)
            return None
        if result.sha256 != sha256_file(audio):
            log.warning("part %s: audio does not match its record, making it again", part.name)
            return None
        return replace(result, location=str(audio))

    def store(self, part: Part, rendered: Path, result: JobResult) -> JobResult:
        """Move a freshly rendered part into the cache and record it. ``result`` describes
        ``rendered`` (its SHA-256 was checked when it was fetched or written)."""
        audio = self.audio_path(part)
        os.chmod(rendered, FILE_MODE & ~UMASK)
        os.replace(rendered, audio)
        stored = replace(result, location=audio.name, url=None, size=audio.stat().st_size)
        data = json.dumps(stored.to_dict(), ensure_ascii=False, indent=1).encode("utf-8")
        write_atomic(self.record_path(part), data)
        return replace(stored, location=str(audio))

    def clear_temp(self) -> None:
        """Remove what an interrupted run left half-rendered (call it holding the book's lock)."""
        if self.root.is_dir():
            for stale in self.root.glob(".*.rendering.*"):
                stale.unlink(missing_ok=True)
