"""Audiobooks end to end on the real voice: files, chapter markers, timings, loudness, resume."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import imageio_ffmpeg
import numpy as np
import psutil
import pyloudnorm
import pytest
import soundfile as sf
from mutagen.id3 import ID3
from mutagen.mp3 import MP3
from mutagen.mp4 import MP4
from scipy.signal import resample  # type: ignore[import-untyped]

from synthesis.batcher import Batcher
from synthesis.engine import Engine
from synthesis.pipeline import Synthesizer
from ttsfarm.audiobook import export
from ttsfarm.audiobook.book import Book, read_book
from ttsfarm.audiobook.builder import BuildReport, build_audiobook
from ttsfarm.audiobook.chapters import CHAPTERS_CACHE
from ttsfarm.audiobook.export import BookTags, ChapterMark, join_book
from ttsfarm.audiobook.part_cache import PartCache
from ttsfarm.audiobook.parts import Part
from ttsfarm.audiobook.render import LocalRenderer, PartProgress
from ttsfarm.core.encoding import PIECE_CODECS, decode, encode_piece
from ttsfarm.core.errors import InvalidInput, PermanentError, VoiceNotFound
from ttsfarm.core.finishing import FinishRequest
from ttsfarm.core.jobs import JobRequest, JobResult, SynthesisOptions
from ttsfarm.core.processes import HelperPool

FAST = SynthesisOptions(length_scale=0.6, noise_scale=0.0, noise_w=0.0)
TINY_BOOK = (
    "chapter,title,text,notes\n"
    "1,The Town,The mill turned.,ignored\n"
    '1,The Town,"The bakery opened at six, as always.",\n'
    "2,The Bridge,Everything changed.,\n"
    "3,The Ferry,The ferry crossed twice a day.,\n"
    "3,The Ferry,Then it stopped.,\n"
)
TITLES = ["The Town", "The Bridge", "The Ferry"]
TARGET = -18.0
Built = tuple[Path, dict[str, Any]]
"""The output folder of the shared tiny book and its manifest."""


class Interrupt(KeyboardInterrupt):
    """What Ctrl-C raises, from a chosen render call."""


@dataclass
class CountingRenderer:
    """Wraps a real renderer and counts what it is asked to do; can interrupt on a chosen part."""

    inner: LocalRenderer
    interrupt_on: int | None = None
    renders: list[str] = field(default_factory=list)
    checks: int = 0
    finishes: int = 0

    keeps_parts = True

    def sample_rate(self, voice: str) -> int:
        return self.inner.sample_rate(voice)

    def check(self, request: JobRequest) -> int:
        self.checks += 1
        return self.inner.check(request)

    def render(
        self,
        parts: Sequence[tuple[Part, JobRequest]],
        cache: PartCache,
        progress: PartProgress,
        stop: threading.Event,
    ) -> Iterator[tuple[Part, JobResult]]:
        for item in parts:  # one part at a time, so "interrupt on part N" is exact
            if self.interrupt_on is not None and len(self.renders) + 1 == self.interrupt_on:
                raise Interrupt
            self.renders.append(item[1].text)
            yield from self.inner.render([item], cache, progress, stop)

    @property
    def finish_concurrency(self) -> int:
        return self.inner.finish_concurrency

    def finish(self, request: FinishRequest, folder: Path, should_stop: Callable[[], bool]) -> JobResult:
        self.finishes += 1
        return self.inner.finish(request, folder, should_stop)


@pytest.fixture(scope="module")
def renderer(engine: Engine) -> Iterator[LocalRenderer]:
    with Batcher(lambda voice: engine, max_batch=8, max_wait=0.02) as batcher:
        finishing = HelperPool(2, what="finishing")
        try:
            yield LocalRenderer(Synthesizer(batcher), finishing)
        finally:
            finishing.close()


def tiny_book(folder: Path, content: str = TINY_BOOK) -> Book:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiny.csv").write_text(content, encoding="utf-8")
    return read_book(str(folder / "tiny.csv"), FAST, title="Tiny Book")


def build(book: Book, outdir: Path, renderer: CountingRenderer | LocalRenderer) -> BuildReport:
    return build_audiobook(book, outdir, renderer, "tiny.csv", TARGET)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, renderer: LocalRenderer) -> Built:
    folder = tmp_path_factory.mktemp("book")
    counting = CountingRenderer(renderer)
    report = build(tiny_book(folder), folder / "out", counting)
    assert not report.already_done and report.parts_rendered == report.parts_total == 3
    assert len(counting.renders) == 3
    return folder / "out", json.loads((folder / "out" / "manifest.json").read_text())


def listing(outdir: Path) -> dict[str, str]:
    """Every output file (not the part cache) with its checksum."""
    from ttsfarm.core.files import sha256_file

    return {
        str(p.relative_to(outdir)): sha256_file(p)
        for p in sorted(outdir.rglob("*"))
        if p.is_file() and ".parts" not in p.parts
    }


def test_full_output_set(built: Built) -> None:
    outdir, manifest = built
    assert sorted(listing(outdir)) == [
        "chapters/01-the-town.flac",
        "chapters/01-the-town.srt",
        "chapters/02-the-bridge.flac",
        "chapters/02-the-bridge.srt",
        "chapters/03-the-ferry.flac",
        "chapters/03-the-ferry.srt",
        "manifest.json",
        "tiny-book.m4b",
        "tiny-book.mp3",
        "tiny-book.srt",
    ]
    assert not [p for p in outdir.rglob("*partial*")] and not [p for p in outdir.rglob("*rendering*")]
    assert [c["title"] for c in manifest["chapters"]] == TITLES
    for entry in [*(c["audio"] for c in manifest["chapters"]), *manifest["files"].values()]:
        from ttsfarm.core.files import sha256_file

        path = outdir / entry["file"]
        assert path.stat().st_size == entry["size"] and sha256_file(path) == entry["sha256"]
    assert [s["text"] for s in manifest["chapters"][0]["sentences"]] == [
        "The mill turned.",
        "The bakery opened at six, as always.",
    ]


def test_chapter_durations_equal_the_audio_files(built: Built) -> None:
    outdir, manifest = built
    start = 0.0
    for chapter in manifest["chapters"]:
        info = sf.info(outdir / chapter["audio"]["file"])
        assert info.samplerate == manifest["sample_rate"] == 22050
        assert chapter["duration"] == chapter["audio"]["duration"] == info.frames / info.samplerate
        assert chapter["start"] == pytest.approx(start, abs=1e-9)
        start += chapter["duration"]
    assert manifest["duration"] == pytest.approx(start)
    # Joined from pieces that end on whole frames: the m4b is exactly as long as its chapters; the
    # mp3's length is read from its size and bitrate (it has no Xing header).
    assert manifest["files"]["m4b"]["duration"] == pytest.approx(start, abs=0.001)
    assert manifest["files"]["mp3"]["duration"] == pytest.approx(start, abs=0.01)


def test_m4b_and_mp3_have_a_marker_at_each_chapter_start(built: Built) -> None:
    outdir, manifest = built
    starts = [c["start"] for c in manifest["chapters"]]
    m4b = MP4(outdir / "tiny-book.m4b")
    assert [c.title for c in m4b.chapters] == TITLES
    assert [c.start for c in m4b.chapters] == pytest.approx(starts, abs=0.002)
    assert m4b.tags["\xa9nam"] == ["Tiny Book"]
    assert m4b.info.length == pytest.approx(manifest["duration"], abs=0.001)
    chapters = sorted(ID3(outdir / "tiny-book.mp3").getall("CHAP"), key=lambda c: c.start_time)
    assert [c.start_time / 1000 for c in chapters] == pytest.approx(starts, abs=0.002)
    assert [c.sub_frames["TIT2"].text[0] for c in chapters] == TITLES


def parse_srt(text: str) -> list[tuple[float, float, str]]:
    def seconds(stamp: str) -> float:
        h, m, rest = stamp.split(":")
        s, ms = rest.split(",")
        return int(h) * 3600 + int(m) * 60 + int(s) + int(ms) / 1000

    cues = re.findall(r"\d+\n(\S+) --> (\S+)\n(.+)\n", text)
    return [(seconds(a), seconds(b), words) for a, b, words in cues]


def test_subtitles_line_up_with_the_spoken_segments(built: Built) -> None:
    outdir, manifest = built
    book_cues = parse_srt((outdir / "tiny-book.srt").read_text(encoding="utf-8"))
    expected = [
        (c["start"] + s["start"], c["start"] + s["end"], s["text"])
        for c in manifest["chapters"]
        for s in c["sentences"]
    ]
    assert len(book_cues) == len(expected) == 5
    for (start, end, text), (want_start, want_end, want_text) in zip(book_cues, expected, strict=True):
        assert text == want_text
        assert start == pytest.approx(want_start, abs=0.0006) and end == pytest.approx(want_end, abs=0.0006)
    for chapter in manifest["chapters"]:
        audio, rate = sf.read(outdir / chapter["audio"]["file"], dtype="float32")
        cues = parse_srt((outdir / chapter["subtitles"]["file"]).read_text(encoding="utf-8"))
        edges = [0.0, *(t for start, end, _ in cues for t in (start, end)), len(audio) / rate]
        for n, (a, b) in enumerate(itertools.pairwise(edges)):
            window = audio[int((a + 0.01) * rate) : int((b - 0.01) * rate)]
            if n % 2:  # inside a cue: speech
                assert np.sqrt(np.mean(window**2)) > 0.02, (chapter["title"], a, b)
            else:  # before, between and after cues: silence
                assert len(window) > 0 and np.abs(window).max() < 0.002, (chapter["title"], a, b)


def test_each_chapter_is_at_the_target_loudness_with_peaks_below_the_ceiling(
    built: Built,
) -> None:
    outdir, manifest = built
    assert manifest["target_lufs"] == TARGET and manifest["peak_ceiling_dbtp"] == -1.0
    for chapter in manifest["chapters"]:
        audio, rate = sf.read(outdir / chapter["audio"]["file"], dtype="float64")
        loudness = pyloudnorm.Meter(rate).integrated_loudness(audio)
        assert abs(loudness - TARGET) <= 1.0, (chapter["title"], loudness)
        oversampled = resample(audio, len(audio) * 4)  # FFT resampling, not the limiter's filter
        assert 20 * np.log10(np.abs(oversampled).max()) < -1.0


def test_resume_renders_only_what_was_not_finished(tmp_path: Path, renderer: LocalRenderer) -> None:
    book = tiny_book(tmp_path)
    outdir = tmp_path / "out"
    with pytest.raises(Interrupt):
        build(book, outdir, CountingRenderer(renderer, interrupt_on=3))
    assert not (outdir / "manifest.json").exists()  # nothing presented as done
    assert len(list((outdir / ".parts").glob("*.json"))) == 2

    resumed = CountingRenderer(renderer)
    report = build(book, outdir, resumed)
    assert resumed.renders == ["The ferry crossed twice a day.\n\nThen it stopped."]
    assert resumed.checks == 1  # only the missing part is planned
    assert (report.parts_rendered, report.parts_total, report.already_done) == (1, 3, False)
    first = listing(outdir)

    again = CountingRenderer(renderer)
    assert build(book, outdir, again).already_done
    assert again.renders == [] and again.checks == 0
    assert listing(outdir) == first

    # Outputs lost, parts kept: the same book again, byte for byte, with nothing synthesized.
    shutil.rmtree(outdir / "chapters")
    (outdir / "tiny-book.m4b").unlink()
    rebuilt = CountingRenderer(renderer)
    assert not build(book, outdir, rebuilt).already_done
    assert rebuilt.renders == []
    assert listing(outdir) == first


def test_resumed_book_has_the_same_timeline_as_one_made_in_one_go(
    tmp_path: Path,
    renderer: LocalRenderer,
    built: Built,
) -> None:
    book = tiny_book(tmp_path)
    with pytest.raises(Interrupt):
        build(book, tmp_path / "out", CountingRenderer(renderer, interrupt_on=2))
    manifest = build(book, tmp_path / "out", renderer).manifest.to_dict()
    _, whole = built
    assert [c["duration"] for c in manifest["chapters"]] == [c["duration"] for c in whole["chapters"]]
    assert [c["sentences"] for c in manifest["chapters"]] == [c["sentences"] for c in whole["chapters"]]
    assert manifest["book_key"] == whole["book_key"]


def test_a_changed_chapter_is_the_only_one_made_again(tmp_path: Path, renderer: LocalRenderer) -> None:
    outdir = tmp_path / "out"
    build(tiny_book(tmp_path), outdir, renderer)
    changed = TINY_BOOK.replace("2,The Bridge,Everything changed.", "2,The New Bridge,It all changed.")
    counting = CountingRenderer(renderer)
    report = build(tiny_book(tmp_path, changed), outdir, counting)
    assert counting.renders == ["It all changed."]
    files = listing(outdir)
    assert "chapters/02-the-new-bridge.flac" in files and "chapters/02-the-bridge.flac" not in files
    assert [c.title for c in report.manifest.chapters] == ["The Town", "The New Bridge", "The Ferry"]


def test_old_chapter_files_go_even_when_the_old_manifest_is_gone(
    tmp_path: Path, renderer: LocalRenderer
) -> None:
    """A run interrupted after removing the old manifest must not leave old chapters for good."""
    outdir = tmp_path / "out"
    build(tiny_book(tmp_path), outdir, renderer)
    (outdir / "manifest.json").unlink()
    changed = TINY_BOOK.replace("2,The Bridge,Everything changed.", "2,The New Bridge,It all changed.")
    build(tiny_book(tmp_path, changed), outdir, renderer)
    chapters = sorted(name for name in listing(outdir) if name.startswith("chapters/"))
    assert chapters == [
        "chapters/01-the-town.flac",
        "chapters/01-the-town.srt",
        "chapters/02-the-new-bridge.flac",
        "chapters/02-the-new-bridge.srt",
        "chapters/03-the-ferry.flac",
        "chapters/03-the-ferry.srt",
    ]


def test_a_damaged_cached_part_is_made_again(tmp_path: Path, renderer: LocalRenderer) -> None:
    outdir = tmp_path / "out"
    build(tiny_book(tmp_path), outdir, renderer)
    part = sorted((outdir / ".parts").glob("0002-*.flac"))[0]
    part.write_bytes(part.read_bytes()[:1000])
    (outdir / "manifest.json").unlink()
    counting = CountingRenderer(renderer)
    build(tiny_book(tmp_path), outdir, counting)
    assert counting.renders == [] and counting.finishes == 0  # its chapter was finished: no part is needed
    second = json.loads((outdir / "manifest.json").read_text())["chapters"][1]["audio"]["sha256"]
    finished = next(p for p in (outdir / ".parts" / CHAPTERS_CACHE).glob("*.flac") if sha256(p) == second)
    finished.write_bytes(finished.read_bytes()[:1000])  # and now its finished chapter too
    (outdir / "manifest.json").unlink()
    build(tiny_book(tmp_path), outdir, counting)
    assert counting.renders == ["Everything changed."] and counting.finishes == 1


def test_titles_cannot_write_outside_the_folder(tmp_path: Path, renderer: LocalRenderer) -> None:
    content = 'chapter,title,text\n../../x,../../escape,Hello there.\n/etc,"/etc/passwd",Good night.\n'
    book = tiny_book(tmp_path / "in", content)
    book = Book("../../../outside", book.chapters)
    before = {p for p in tmp_path.rglob("*")}
    build(book, tmp_path / "in" / "out", renderer)
    created = {p for p in tmp_path.rglob("*")} - before
    assert created and all(p.is_relative_to(tmp_path / "in" / "out") for p in created)
    assert sorted(listing(tmp_path / "in" / "out")) == [
        "chapters/01-escape.flac",
        "chapters/01-escape.srt",
        "chapters/02-etc-passwd.flac",
        "chapters/02-etc-passwd.srt",
        "manifest.json",
        "outside.m4b",
        "outside.mp3",
        "outside.srt",
    ]


def test_unknown_voice_is_reported_with_its_line_before_any_audio(
    tmp_path: Path, renderer: LocalRenderer
) -> None:
    content = "chapter,text,voice\n1,Hello.,\n2,Who is this?,nobody\n"
    counting = CountingRenderer(renderer)
    with pytest.raises(VoiceNotFound, match=r"^tiny\.csv, line 3: unknown voice 'nobody'"):
        build(tiny_book(tmp_path, content), tmp_path / "out", counting)
    assert counting.renders == []
    assert not list((tmp_path / "out" / ".parts").glob("*.flac"))


def test_an_output_folder_that_is_a_file_is_refused(tmp_path: Path, renderer: LocalRenderer) -> None:
    (tmp_path / "taken").write_text("x")
    with pytest.raises(InvalidInput, match="cannot write to"):
        build(tiny_book(tmp_path), tmp_path / "taken", renderer)


def sha256(path: Path) -> str:
    from ttsfarm.core.files import sha256_file

    return sha256_file(path)


def _tone_pieces(folder: Path, seconds: float) -> tuple[list[ChapterMark], dict[str, list[Path]]]:
    """Two chapters of a 220 Hz tone, ``seconds`` each (to whole frames), and their pieces."""
    rate = 22050
    frames = 9216 * round(seconds * rate / 9216)
    tone = 0.25 * np.sin(2 * np.pi * 220 * np.arange(frames) / rate).astype(np.float32)
    marks: list[ChapterMark] = []
    pieces: dict[str, list[Path]] = {"aac": [], "mp3": []}
    for number in range(2):
        audio = folder / f"chapter{number}.flac"
        sf.write(audio, tone, rate)
        start = number * frames / rate
        marks.append(ChapterMark(f"Chapter {number + 1}", start, start + frames / rate, audio))
        for codec in pieces:
            target = folder / f"chapter{number}.{codec}"
            pieces[codec].append(
                Path(encode_piece(audio, frames, rate, PIECE_CODECS[codec], target).location)
            )
    return marks, pieces


def test_book_files_appear_whole_or_not_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The m4b and the mp3 are joined at once; when ffmpeg cannot make the m4b (given an encoder
    it does not have), the mp3 is not left either, nor any temporary file."""
    marks, pieces = _tone_pieces(tmp_path, 2.0)
    before = sorted(path.name for path in tmp_path.iterdir())
    targets = {"aac": tmp_path / "book.m4b", "mp3": tmp_path / "book.mp3"}
    join_book(BookTags("Tones"), marks, pieces, targets, 22050)
    assert MP3(targets["mp3"]).info.length == pytest.approx(marks[-1].end, abs=0.001)
    assert MP4(targets["aac"]).info.length == pytest.approx(marks[-1].end, abs=0.001)
    for target in targets.values():
        target.unlink()
    arguments = export._join_arguments
    monkeypatch.setattr(export, "_join_arguments", lambda *a: [*arguments(*a), "-c:a", "no-such-encoder"])
    with pytest.raises(PermanentError, match="ffmpeg could not write the m4b"):
        join_book(BookTags("Tones"), marks, pieces, targets, 22050)
    assert sorted(path.name for path in tmp_path.iterdir()) == before


def _running_ffmpegs() -> list[psutil.Process]:
    """This process's ffmpeg children still running (other children, such as text processes, are
    not counted)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.cmdline()[:1] == [imageio_ffmpeg.get_ffmpeg_exe()]:
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


def test_when_one_book_file_fails_the_other_is_stopped_not_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mp3 fails at once while the m4b is read at the pace of playback (``-re``: 40 s here).
    The failure comes back at once, the m4b's ffmpeg is killed, and nothing is left behind."""
    marks, pieces = _tone_pieces(tmp_path, 20.0)
    before = sorted(path.name for path in tmp_path.iterdir())
    arguments = export._join_arguments
    monkeypatch.setattr(export, "_join_arguments", lambda *a: ["-re", *arguments(*a)])

    def no_tag(*_: Any) -> bytes:
        raise PermanentError("the mp3's tag could not be made")

    monkeypatch.setattr(export, "mp3_tag", no_tag)
    started = time.monotonic()
    targets = {"aac": tmp_path / "b.m4b", "mp3": tmp_path / "b.mp3"}
    with pytest.raises(PermanentError, match="tag could not be made"):
        join_book(BookTags("Tones"), marks, pieces, targets, 22050)
    assert time.monotonic() - started < 20  # the m4b alone takes 40 s at the pace of playback
    assert not _running_ffmpegs()
    assert sorted(path.name for path in tmp_path.iterdir()) == before


def test_the_book_files_hold_each_chapter_where_its_marker_is_with_no_gap_or_click(built: Built) -> None:
    """The m4b and the mp3, decoded, against the chapter files: each chapter sits at its marker
    to the sample, sounds as the chapter does, and two chapters meet in silence."""
    outdir, manifest = built
    rate = manifest["sample_rate"]
    chapters = [sf.read(outdir / c["audio"]["file"], dtype="float32")[0] for c in manifest["chapters"]]
    whole = np.concatenate(chapters)
    for kind in ("m4b", "mp3"):
        decoded = decode(outdir / manifest["files"][kind]["file"], rate)
        assert len(decoded) == len(whole)  # no gap anywhere, nothing dropped
        for chapter, audio in zip(manifest["chapters"], chapters, strict=True):
            start = round(chapter["start"] * rate)
            voiced = np.flatnonzero(np.abs(audio) > 0.05)
            first, last = int(voiced[0]), int(voiced[-1])
            reference = audio[first:last]
            window = decoded[start + first - 200 : start + last + 200]
            lag = int(np.argmax(np.correlate(window, reference, "valid"))) - 200
            assert lag == 0, (kind, chapter["title"], lag)  # sample-accurate
            copy = decoded[start + first : start + last]
            error = 10 * np.log10(np.sum(reference**2) / np.sum((copy - reference) ** 2))
            assert error > 15, (kind, chapter["title"], error)
        for chapter in manifest["chapters"][1:]:  # the joins: both sides silence
            join = round(chapter["start"] * rate)
            assert np.abs(decoded[join - 2000 : join + 2000]).max() < 0.003, (kind, chapter["title"])
