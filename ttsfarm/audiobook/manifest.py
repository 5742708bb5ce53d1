"""``manifest.json``: what a finished audiobook holds, written last as the mark that it is done."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from ttsfarm.core.files import sha256_file, write_atomic
from ttsfarm.core.jobs import SegmentTiming

log = logging.getLogger(__name__)

MANIFEST_NAME: Final = "manifest.json"
MANIFEST_VERSION: Final = 1


@dataclass(frozen=True)
class OutputFile:
    """One file of the book in OUTDIR."""

    file: str
    """Name relative to OUTDIR."""
    size: int
    sha256: str
    duration: float | None = None
    """Seconds of audio, for audio files."""
    true_peak: float | None = None
    """dBTP measured on the file, for the whole-book audio files."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OutputFile:
        duration, peak = data.get("duration"), data.get("true_peak")
        return cls(
            file=str(data["file"]),
            size=int(data["size"]),
            sha256=str(data["sha256"]),
            duration=None if duration is None else float(duration),
            true_peak=None if peak is None else float(peak),
        )

    @classmethod
    def of(
        cls, outdir: Path, name: str, duration: float | None = None, true_peak: float | None = None
    ) -> OutputFile:
        path = outdir / name
        return cls(name, path.stat().st_size, sha256_file(path), duration, true_peak)


@dataclass(frozen=True)
class ChapterEntry:
    """One chapter: its audio file, where it starts in the book, and its sentences."""

    number: int
    title: str
    start: float
    """Seconds from the start of the book (the ``.m4b`` chapter marker)."""
    duration: float
    audio: OutputFile
    subtitles: OutputFile
    loudness: float
    """Integrated loudness after mastering, LUFS."""
    true_peak: float
    """dBTP after mastering."""
    sentences: tuple[SegmentTiming, ...]
    """Start and end of each spoken segment, in seconds from the start of the chapter."""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["audio"] = self.audio.to_dict()
        data["subtitles"] = self.subtitles.to_dict()
        data["sentences"] = [s.to_dict() for s in self.sentences]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChapterEntry:
        return cls(
            number=int(data["number"]),
            title=str(data["title"]),
            start=float(data["start"]),
            duration=float(data["duration"]),
            audio=OutputFile.from_dict(data["audio"]),
            subtitles=OutputFile.from_dict(data["subtitles"]),
            loudness=float(data["loudness"]),
            true_peak=float(data["true_peak"]),
            sentences=tuple(SegmentTiming.from_dict(s) for s in data["sentences"]),
        )


@dataclass(frozen=True)
class Manifest:
    """The whole book."""

    title: str
    book_key: str
    """Hash of everything that decides the output: a manifest with the same key and intact
    files means the book is finished."""
    sample_rate: int
    duration: float
    target_lufs: float
    peak_ceiling_dbtp: float
    chapters: tuple[ChapterEntry, ...]
    files: dict[str, OutputFile]
    """The whole-book files by kind: ``m4b``, ``mp3``, ``srt`` and, if the book has one, ``cover``."""
    author: str | None = None
    narrator: str | None = None
    year: str | None = None
    version: int = MANIFEST_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "title": self.title,
            "author": self.author,
            "narrator": self.narrator,
            "year": self.year,
            "book_key": self.book_key,
            "sample_rate": self.sample_rate,
            "duration": self.duration,
            "target_lufs": self.target_lufs,
            "peak_ceiling_dbtp": self.peak_ceiling_dbtp,
            "files": {kind: f.to_dict() for kind, f in self.files.items()},
            "chapters": [c.to_dict() for c in self.chapters],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Manifest:
        return cls(
            title=str(data["title"]),
            book_key=str(data["book_key"]),
            sample_rate=int(data["sample_rate"]),
            duration=float(data["duration"]),
            target_lufs=float(data["target_lufs"]),
            peak_ceiling_dbtp=float(data["peak_ceiling_dbtp"]),
            chapters=tuple(ChapterEntry.from_dict(c) for c in data["chapters"]),
            files={kind: OutputFile.from_dict(f) for kind, f in data["files"].items()},
            author=data.get("author"),
            narrator=data.get("narrator"),
            year=data.get("year"),
            version=int(data.get("version", MANIFEST_VERSION)),
        )

    def outputs(self) -> list[OutputFile]:
        """Every file the book consists of."""
        listed = [f for c in self.chapters for f in (c.audio, c.subtitles)]
        return [*listed, *self.files.values()]

    def write(self, outdir: Path) -> None:
        text = json.dumps(self.to_dict(), ensure_ascii=False, indent=2) + "\n"
        write_atomic(outdir / MANIFEST_NAME, text.encode("utf-8"))


def read_manifest(outdir: Path) -> Manifest | None:
    """The manifest in ``outdir``, or ``None`` if there is none or it cannot be read."""
    path = outdir / MANIFEST_NAME
    if not path.is_file():
        return None
    try:
        return Manifest.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, KeyError, TypeError):
        log.warning("%s cannot be read: the book will be assembled again", path)
        return None


def is_intact(manifest: Manifest, outdir: Path) -> bool:
    """Whether every file the manifest lists is in ``outdir`` with its recorded checksum."""
    for output in manifest.outputs():
        path = outdir / output.file
        if not path.is_file() or path.stat().st_size != output.size or sha256_file(path) != output.sha256:
            return False
    return True
