"""Finishing a synth file: long audio mastered in blocks cut between segments."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from synthesis.batcher import Batcher
from synthesis.engine import Engine
from synthesis.pipeline import Synthesizer
from tests.helpers_speech import SpokenOnce
from ttsfarm.core.jobs import DEFAULT_LOUDNESS, JobRequest, JobResult, SegmentTiming
from ttsfarm.core.loudness import integrated_loudness, true_peak
from ttsfarm.core.mastering import PEAK_CEILING_DBTP
from ttsfarm.core.synth_file import Tags, block_lengths, decoded_true_peak, finish, title_from
from ttsfarm.storage import LocalStorage

RATE = 8000


def spoken(tmp_path: Path, seconds: int) -> tuple[Path, JobResult]:
    """A tone that speaks for 0.8 s of every second, quieter as it goes on."""
    t = np.arange(RATE) / RATE
    blocks = [np.where(t < 0.8, np.sin(2 * np.pi * 220 * t) * (0.3 - 0.005 * n), 0) for n in range(seconds)]
    audio = np.concatenate(blocks).astype(np.float32)
    sf.write(tmp_path / "spoken.flac", audio, RATE, subtype="PCM_16")
    segments = tuple(SegmentTiming(f"s{n}", n, n + 0.8) for n in range(seconds))
    size = (tmp_path / "spoken.flac").stat().st_size
    return tmp_path / "spoken.flac", JobResult(
        "j", "spoken.flac", None, "flac", RATE, seconds, size, "", segments
    )


def test_blocks_are_cut_in_the_pauses(tmp_path: Path) -> None:
    _, result = spoken(tmp_path, 25)
    lengths = block_lengths(result.segments, RATE, 25 * RATE, block_seconds=10)
    assert sum(lengths) == 25 * RATE
    cuts = np.cumsum(lengths)[:-1] / RATE
    assert list(cuts) == [9.9, 19.9]  # halfway through the pauses from 9.8 to 10 s and 19.8 to 20 s
    assert block_lengths(result.segments, RATE, 25 * RATE, block_seconds=100) == [25 * RATE]


def test_finish_masters_every_block_and_tags(tmp_path: Path) -> None:
    source, result = spoken(tmp_path, 40)
    finish(
        source, result.segments, tmp_path / "out.ogg", "ogg", -20.0, Tags("A title", "joe"), block_seconds=12
    )
    audio, rate = sf.read(tmp_path / "out.ogg", dtype="float32")
    assert rate == RATE and abs(len(audio) - 40 * RATE) < RATE // 10
    assert sf.info(str(tmp_path / "out.ogg")).format == "OGG"
    first, last = audio[: 10 * RATE], audio[30 * RATE :]
    # the tone fades by 6 dB over the file; each block is brought back to the target
    assert abs(integrated_loudness(first, rate) - integrated_loudness(last, rate)) < 1.0
    assert true_peak(audio) <= PEAK_CEILING_DBTP  # measured as decoded: Vorbis lifts peaks
    with sf.SoundFile(tmp_path / "out.ogg") as tagged:
        assert (tagged.title, tagged.artist) == ("A title", "joe")


SPEECH = (Path(__file__).parents[1] / "examples" / "ellery.txt").read_text()[:900]


@pytest.fixture(scope="module")
def speaker(engine: Engine) -> Iterator[Synthesizer]:
    """The real voice, asked once per segment: every format below is made of the same speech."""
    once = SpokenOnce(engine)
    with Batcher(lambda voice: once, max_batch=8, max_wait=0.05) as batcher:
        yield Synthesizer(batcher)


@pytest.mark.slow
@pytest.mark.parametrize("audio_format", ["wav", "flac", "mp3", "ogg"])
def test_every_format_keeps_the_true_peak_promise_as_decoded(
    speaker: Synthesizer, tmp_path: Path, audio_format: str
) -> None:
    """What ``ttsfarm synth`` makes (-18 LUFS by default) of about 50 s of joe: the decoded
    file's true peak is under -1 dBTP and its loudness on target, whatever the encoder does to the
    peaks (before: mp3 -1.09 and Vorbis -0.87 dBTP, against an aim of -1.3)."""
    request = JobRequest(SPEECH, format=audio_format, loudness=DEFAULT_LOUDNESS)
    tags = Tags(title_from(SPEECH), request.options.voice)
    result = speaker.synthesize(request, LocalStorage(tmp_path), f"speech.{audio_format}", tags=tags)
    out = Path(result.location)
    audio, rate = sf.read(out, dtype="float32")
    assert true_peak(audio) <= PEAK_CEILING_DBTP
    assert decoded_true_peak(out) == pytest.approx(true_peak(audio), abs=0.05)
    assert integrated_loudness(audio, rate) == pytest.approx(-18.0, abs=0.5)


def test_a_file_over_the_ceiling_is_encoded_again_lower_by_the_books_rule() -> None:
    """One rule for every lossy file, a job's or a book's: under the ceiling by the meter's
    resolution is done; over it, the next encoding goes lower by the overshoot and a margin."""
    from ttsfarm.core.mastering import METER_RESOLUTION_DB, PEAK_FIX_MARGIN_DB, headroom_after

    assert headroom_after(PEAK_CEILING_DBTP - METER_RESOLUTION_DB, 0.3) is None
    again = headroom_after(PEAK_CEILING_DBTP + 0.13, 0.6)
    assert again == pytest.approx(0.6 + 0.13 + METER_RESOLUTION_DB + PEAK_FIX_MARGIN_DB)
