"""The job pipeline end to end on the real voice: audio, timings, temp files, memory."""

from __future__ import annotations

import resource
import threading
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from synthesis.audio import SegmentWriter
from synthesis.batcher import Batcher
from synthesis.engine import Engine
from synthesis.pipeline import Progress, Synthesizer
from tests.helpers_speech import SpokenOnce
from ttsfarm.core import files
from ttsfarm.core.errors import Cancelled, InvalidAudio, StorageRejected, TransientError
from ttsfarm.core.jobs import JobRequest, JobResult, SynthesisOptions
from ttsfarm.storage import LocalStorage

EXAMPLE = Path(__file__).parent.parent / "examples" / "ellery.txt"
FAST = SynthesisOptions(length_scale=0.5, noise_scale=0.0, noise_w=0.0)


@dataclass(frozen=True)
class Spoken:
    """The example text spoken once, with every progress report the job made."""

    result: JobResult
    progress: list[Progress]


@pytest.fixture(scope="module")
def ellery(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Spoken:
    """The example, about two minutes of speech, spoken once for the tests that look at it."""
    seen: list[Progress] = []
    with Batcher(lambda voice: engine, max_batch=8, max_wait=0.05) as batcher:
        result = Synthesizer(batcher).synthesize(
            JobRequest(EXAMPLE.read_text()),
            LocalStorage(tmp_path_factory.mktemp("ellery")),
            "ellery.wav",
            progress=seen.append,
        )
    return Spoken(result, seen)


@pytest.mark.parametrize("audio_format", ["wav", "flac", "mp3", "ogg"])
def test_formats_decode_to_the_stated_duration(
    synthesizer: Synthesizer, tmp_path: Path, audio_format: str
) -> None:
    request = JobRequest("The ferry carried farmers across the water. Then it stopped.", format=audio_format)
    result = synthesizer.synthesize(request, LocalStorage(tmp_path), f"out.{audio_format}")
    audio, rate = sf.read(result.location)
    assert rate == result.sample_rate == 22050
    assert abs(len(audio) / rate - result.duration) < 0.1  # mp3 adds encoder padding
    assert Path(result.location).stat().st_size == result.size
    assert len(result.sha256) == 64


@pytest.mark.slow
def test_audio_is_speech_with_clean_joins(ellery: Spoken) -> None:
    result = ellery.result
    audio, rate = sf.read(result.location, dtype="float32")
    words = len(EXAMPLE.read_text().split())
    assert 0.2 < result.duration / words < 0.5  # ordinary speaking rate: 120-300 words a minute
    assert 0.2 < np.abs(audio).max() <= 0.98  # audible, never clipped
    assert result.segments[0].text.startswith("The town of Ellery")
    for before, after in zip(result.segments, result.segments[1:], strict=False):
        assert before.end <= after.start
        gap = audio[int(before.end * rate) + 1 : int(after.start * rate) - 1]
        assert len(gap) > 0.1 * rate and not gap.any()  # a real pause of digital silence
        join = audio[int(before.end * rate) - 20 : int(before.end * rate) + 20]
        assert np.abs(np.diff(join)).max() < 0.05  # faded: no click at the join
    assert abs(result.segments[-1].end - result.duration) < 1e-6  # nothing cut off at the end


def test_temp_files_removed_after_success_and_failure(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    temp = tmp_path / "temp"
    temp.mkdir()
    with Batcher(lambda v: engine) as batcher:
        synthesizer = Synthesizer(batcher, temp_dir=str(temp))
        synthesizer.synthesize(JobRequest("Hello there."), LocalStorage(tmp_path / "out"), "a.wav")
        assert list(temp.iterdir()) == []
        blocked = tmp_path / "not-a-folder"
        blocked.write_text("a file where the storage folder should be")
        with pytest.raises(StorageRejected, match="cannot write"):
            synthesizer.synthesize(JobRequest("Hello again."), LocalStorage(blocked), "b.wav")
        assert list(temp.iterdir()) == []
        with pytest.raises(Cancelled):
            synthesizer.synthesize(
                JobRequest("One. Two. Three."),
                LocalStorage(tmp_path / "out"),
                "c.wav",
                cancelled=lambda: True,
            )
        assert list(temp.iterdir()) == []
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.wav"]


def test_a_job_leaves_no_named_temp_file_even_while_it_runs(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The audio goes into a temp file without a name and is stored from there: what is stored
    is what the result describes, in every format."""
    temp = tmp_path / "temp"
    temp.mkdir()
    named: list[str] = []
    with Batcher(lambda v: engine) as batcher:
        synthesizer = Synthesizer(batcher, temp_dir=str(temp))
        for audio_format in ("wav", "flac", "mp3", "ogg"):
            result = synthesizer.synthesize(
                JobRequest("Hello there. And again.", format=audio_format),
                LocalStorage(tmp_path / "out"),
                f"a.{audio_format}",
                progress=lambda p: named.extend(path.name for path in temp.iterdir()),
            )
            stored = Path(result.location)
            assert stored.stat().st_size == result.size and files.sha256_file(stored) == result.sha256
            assert sf.info(str(stored)).duration == pytest.approx(result.duration, abs=0.001)
    assert named == []


def test_progress_is_reported(synthesizer: Synthesizer, tmp_path: Path) -> None:
    seen = []
    synthesizer.synthesize(
        JobRequest("One. Two. Three."), LocalStorage(tmp_path), "p.wav", progress=seen.append
    )
    assert [p.segments_done for p in seen] == [1, 2, 3]
    assert seen[-1].fraction == 1.0


@pytest.mark.slow
def test_progress_total_is_exact_at_the_end_of_a_long_text(ellery: Spoken) -> None:
    result, seen = ellery.result, ellery.progress
    assert [p.segments_done for p in seen] == list(range(1, len(result.segments) + 1))
    assert seen[-1].segments_total == len(result.segments) and seen[-1].fraction == 1.0
    assert all(p.segments_done <= p.segments_total for p in seen)
    early = seen[0].segments_total  # an estimate made a few batches in: within reach of the truth
    assert 0.5 * len(result.segments) <= early <= 2 * len(result.segments)


def current_rss() -> int:
    """Resident memory of this process now, in bytes."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize()


@pytest.mark.slow
def test_fifty_thousand_characters_with_flat_memory(engine: Engine, tmp_path: Path) -> None:
    """The pipeline's memory over a job of the example repeated to 50,000 characters. Each of
    the example's segments is spoken by the engine once, before the job (``SpokenOnce``): the job
    gets the real audio of every segment, and what is measured is the pipeline's own memory, not
    onnxruntime's CPU memory pool, which keeps growing for a while as it meets new shapes."""
    once = SpokenOnce(engine)
    with Batcher(lambda v: once, max_batch=1) as batcher:
        synthesizer = Synthesizer(batcher)
        synthesizer.synthesize(JobRequest(EXAMPLE.read_text(), FAST), LocalStorage(tmp_path), "once.flac")
        runs = once.runs
        _synthesize_long_text(synthesizer, tmp_path)
    assert once.runs - runs <= 3  # new audio only where the text was cut off


def _synthesize_long_text(synthesizer: Synthesizer, tmp_path: Path) -> None:
    base = EXAMPLE.read_text()
    text = ("\n\n".join([base] * 30))[:50_000]
    rss: list[int] = []
    tracemalloc.start()
    try:
        result = synthesizer.synthesize(
            JobRequest(text, options=FAST),
            LocalStorage(tmp_path),
            "long.flac",
            progress=lambda p: rss.append(current_rss()),
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    audio_bytes = result.duration * result.sample_rate * 4
    assert result.duration > 1000  # over 16 minutes of speech
    # Holding the audio would take ~150 MB; the segments' phoneme ids alone take a few MB.
    assert peak < 0.12 * audio_bytes, f"Python peak {peak / 2**20:.0f} MiB"
    # Flat: memory in the second half of the job is no higher than in the first.
    early, late = max(rss[: len(rss) // 2]), max(rss[len(rss) // 2 :])
    assert late - early < 32 * 2**20, f"RSS grew {(late - early) / 2**20:.0f} MiB in the second half"
    with sf.SoundFile(result.location) as f:
        assert abs(f.frames / f.samplerate - result.duration) < 0.01


def test_local_output_follows_the_umask(
    synthesizer: Synthesizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The umask is read once at import (reading it means setting it); the files get its mode."""
    monkeypatch.setattr(files, "UMASK", 0o027)
    result = synthesizer.synthesize(JobRequest("Shared."), LocalStorage(tmp_path), "shared.wav")
    assert Path(result.location).stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_audio_that_is_not_numbers_is_never_written(tmp_path: Path, bad: float) -> None:
    writer = SegmentWriter(tmp_path / "out.flac", 22050, "flac")
    writer.append(np.full(2205, 0.1, dtype=np.float32), "fine", 0.0)
    broken = np.full(2205, 0.1, dtype=np.float32)
    broken[1000] = bad
    with pytest.raises(InvalidAudio, match="not numbers") as raised:
        writer.append(broken, "broken", 0.0)
    assert isinstance(raised.value, TransientError)  # retried: the segment meets another batch
    writer.close()
    assert writer.frames == 2205 and sf.info(str(tmp_path / "out.flac")).frames == 2205


def test_a_job_with_a_loudness_is_mastered_to_it(synthesizer: Synthesizer, tmp_path: Path) -> None:
    """Jobs speak at the voice's own level, which moves by a few LU from text to text (joe:
    -24 to -27 LUFS on benchmarks/quality_texts.txt); a loudness brings each to one level."""
    from ttsfarm.core.loudness import integrated_loudness, true_peak

    text = "Please bring three things: a charged laptop, a pair of headphones, and a notebook."
    plain = synthesizer.synthesize(JobRequest(text, FAST), LocalStorage(tmp_path), "plain.wav")
    for lufs, audio_format in ((-20.0, "flac"), (-16.0, "mp3")):
        request = JobRequest(text, FAST, audio_format, loudness=lufs)
        result = synthesizer.synthesize(request, LocalStorage(tmp_path), f"level.{audio_format}")
        assert result.format == audio_format and result.segments == plain.segments
        assert result.duration == plain.duration and result.loudness == lufs and plain.loudness is None
        assert Path(result.location).stat().st_size == result.size
        assert files.sha256_file(Path(result.location)) == result.sha256
        audio, rate = sf.read(result.location, dtype="float32")
        if audio_format == "flac":
            assert len(audio) / rate == pytest.approx(plain.duration, abs=1e-6)
            assert integrated_loudness(audio, rate) == pytest.approx(lufs, abs=0.1)
            assert true_peak(audio) <= -1.0
            assert not sf.SoundFile(result.location).title  # farm jobs are not tagged, mastered or not
        else:  # the encoder moves loudness and peaks a little
            assert integrated_loudness(audio, rate) == pytest.approx(lufs, abs=0.5)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["level.flac", "level.mp3", "plain.wav"]


@pytest.mark.parametrize("busy", [False, True], ids=["mastering", "waiting its turn"])
def test_a_job_cancelled_while_it_is_mastered_stores_nothing(engine, tmp_path: Path, busy: bool) -> None:  # type: ignore[no-untyped-def]
    """The cancel comes after the text is spoken, while a finishing process masters the job, or
    while the job waits for one (the only one is busy). Either way it stops within a second or
    two, and nothing is stored or left in the temp folder."""
    from ttsfarm.core.processes import HelperPool

    temp, store = tmp_path / "temp", tmp_path / "store"
    temp.mkdir()
    store.mkdir()
    asked: list[int] = []

    def cancelled() -> bool:  # no while the text is spoken and after it, yes from then on
        asked.append(1)
        return len(asked) > 2

    pool = HelperPool(1, what="finishing")
    try:
        pool.start()
        if busy:  # another job is mastered in the only process
            other = threading.Thread(target=pool.run, args=(time.sleep, 5))
            other.start()
            time.sleep(0.2)
        with Batcher(lambda v: engine) as batcher:
            synthesizer = Synthesizer(batcher, temp_dir=str(temp), finishing=pool)
            request = JobRequest("One short sentence to master.", FAST, "flac", loudness=-18)
            started = time.monotonic()
            with pytest.raises(Cancelled):
                synthesizer.synthesize(request, LocalStorage(store), "x.flac", cancelled=cancelled)
            assert time.monotonic() - started < 4
    finally:
        pool.close()
    assert len(asked) == 3  # the segment, the end of speaking, then the cancel while it waits
    assert not any(store.iterdir()) and not any(temp.iterdir())
