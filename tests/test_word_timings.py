"""Word timings: from the engine's durations, checked against the audio they describe."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from synthesis.batcher import Batcher
from synthesis.durations_model import cached_name, durations_model
from synthesis.engine import Engine, EngineItem, EngineOptions
from synthesis.phonemes import Phonemizer
from synthesis.pipeline import Synthesizer
from synthesis.staged import StagedEngine
from synthesis.word_timings import even_frames, word_bounds, word_marks
from tests.conftest import DETERMINISTIC
from ttsfarm.core.jobs import JobRequest, JobResult, SegmentTiming, WordTiming
from ttsfarm.core.timings import text_words
from ttsfarm.core.voices import Voice
from ttsfarm.storage import LocalStorage

COUNTED = "One, two, three, four, five, six."
"""Every word followed by a pause the voice makes (a comma): the gaps between words are silence."""
EDGE = 0.015
"""Seconds left out at each end of a gap between words."""


def timed_words(
    text: str, ids: list[int], frames: np.ndarray, voice: Voice, start: float
) -> tuple[WordTiming, ...]:
    """The words of ``text`` as a job's record gives them, the segment starting at ``start``."""
    end = start + float(frames.sum()) * voice.hop_length / voice.sample_rate
    return SegmentTiming(text, start, end, word_marks(word_bounds(text, ids, voice), frames, voice)).words


def spans(text: str, ids: list[int], voice: Voice) -> dict[str, tuple[int, int]]:
    bounds = word_bounds(text, ids, voice)
    return dict(zip(text_words(text), zip(bounds[0::2], bounds[1::2], strict=True), strict=True))


def rms_db(audio: np.ndarray) -> float:
    return float(20 * np.log10(np.sqrt(np.mean(np.square(audio, dtype=np.float64))) + 1e-9))


@pytest.fixture(scope="module")
def counted(
    synthesizer_module: Synthesizer, tmp_path_factory: pytest.TempPathFactory
) -> tuple[JobResult, np.ndarray]:
    folder = tmp_path_factory.mktemp("counted")
    result = synthesizer_module.synthesize(JobRequest(COUNTED), LocalStorage(folder), "counted.wav")
    audio, _ = sf.read(folder / "counted.wav", dtype="float32")
    return result, audio


@pytest.fixture(scope="module")
def synthesizer_module(engine: Engine) -> Iterator[Synthesizer]:
    with Batcher(lambda voice: engine, max_batch=8, max_wait=0.05) as batcher:
        yield Synthesizer(batcher)


def test_each_word_is_timed_where_the_audio_speaks_it(counted: tuple[JobResult, np.ndarray]) -> None:
    """Inside each word's time the voice speaks; between two words, where the comma's pause
    falls, it is silent. Timings cut by share of the characters (the engine's durations
    ignored) put most of these boundaries into speech, and fail here."""
    result, audio = counted
    rate = result.sample_rate
    words = [word for segment in result.segments for word in segment.words]
    assert [w.word for w in words] == COUNTED.split()

    def stretch(start: float, end: float) -> np.ndarray:
        return audio[round(start * rate) : round(end * rate)]

    for word in words:
        assert rms_db(stretch(word.start, word.end)) > -32, word
    for before, after in itertools.pairwise(words):
        assert after.start - before.end > 0.1, (before, after)
        # The vocoder smears each frame's sound over its neighbours (a frame is 11.6 ms): a
        # word's first burst may begin a few ms before its first frame. The middle is silent.
        assert rms_db(stretch(before.end + EDGE, after.start - EDGE)) < -45, (before, after)
    first_sound = np.flatnonzero(np.abs(audio) > 0.01)[0] / rate
    assert abs(words[0].start - first_sound) < 0.05
    assert words[-1].end <= result.duration


def test_the_durations_add_up_to_the_audio_in_both_engines(voice: Voice, phonemizer: Phonemizer) -> None:
    """Each item of a batch comes with one duration per phoneme id, and its samples are exactly
    their sum times the hop, in the single-session engine and the staged one alike."""
    texts = ["A short one.", "A somewhat longer sentence, with a pause in it.", "Yes."]
    items = [EngineItem(phonemizer.ids(text)) for text in texts]
    for engine in (
        Engine.load(voice, EngineOptions(provider="cpu", warmup=False)),
        StagedEngine(voice, EngineOptions(provider="cpu", warmup=False)),
    ):
        for batch in (items, items[:1]):
            for item, spoken in zip(batch, engine.speak(batch, DETERMINISTIC), strict=True):
                assert spoken.frames is not None
                assert len(spoken.frames) == len(item.phoneme_ids)
                assert int(spoken.frames.sum()) * voice.hop_length == len(spoken.audio)


def test_words_read_aloud_differently_keep_their_order_inside_the_segment(
    voice: Voice, phonemizer: Phonemizer
) -> None:
    """ "1998" is spoken as three words and "for it" as one: the text's words no longer pair one
    to one with the spoken ones, and are timed by their share, in order and inside the segment."""
    text = "In 1998, Dr. Smith paid $5 for it."
    ids = phonemizer.ids(text)
    frames = np.full(len(ids), 3, dtype=np.int32)
    end = len(ids) * 3 * voice.hop_length / voice.sample_rate
    timed = timed_words(text, ids, frames, voice, 10.0)
    assert [w.word for w in timed] == text.split()
    assert all(10.0 <= w.start < w.end <= 10.0 + end for w in timed)
    assert all(a.end <= b.start for a, b in itertools.pairwise(timed))


def test_an_edge_by_share_moves_to_the_gap_between_spoken_words(voice: Voice, phonemizer: Phonemizer) -> None:
    """espeak-ng speaks "from the" as one word: those two share it, and every other word's
    edges are the spoken words' own."""
    text = "Trucks came down from the hill slowly."
    ids = phonemizer.ids(text)
    mine = spans(text, ids, voice)
    theirs = spans("Trucks came down fromthe hill slowly.", ids, voice)  # one to one
    assert len(theirs) == len(mine) - 1
    for word in ("Trucks", "came", "down", "hill", "slowly."):
        assert mine[word] == theirs[word], word
    assert mine["from"][0] == theirs["fromthe"][0] and mine["the"][1] == theirs["fromthe"][1]


def test_without_durations_words_share_the_segment(voice: Voice, phonemizer: Phonemizer) -> None:
    """A segment spoken in two halves has no durations: its ids share its time evenly."""
    text = "Short words, then a considerably longer one."
    ids = phonemizer.ids(text)
    timed = timed_words(text, ids, even_frames(len(ids), 3.0, voice), voice, 2.0)
    assert [w.word for w in timed] == text.split()
    assert 2.0 <= timed[0].start < 2.2 and 4.8 < timed[-1].end <= 5.0  # the full stop is no word
    assert timed[-2].end - timed[-2].start > timed[0].end - timed[0].start  # "considerably" > "Short"


def test_text_words_leave_out_what_is_not_read() -> None:
    assert text_words("So - it was * * * over, 3 times.") == ["So", "it", "was", "over,", "3", "times."]


def test_segment_timings_keep_their_words_through_json_and_a_shift() -> None:
    segment = SegmentTiming.worded(
        "Hi there.", 1.0, 2.0, (WordTiming("Hi", 1.05, 1.3), WordTiming("there.", 1.4, 1.9))
    )
    data = segment.to_dict()
    assert data["marks"] == [50, 300, 400, 900]  # milliseconds from the segment's start
    assert SegmentTiming.from_dict(data) == segment
    assert segment.words == (WordTiming("Hi", 1.05, 1.3), WordTiming("there.", 1.4, 1.9))
    assert SegmentTiming.from_dict({"text": "Old.", "start": 0, "end": 1}).words == ()
    moved = segment.shifted(10.0)
    assert moved.start == 11.0 and moved.words[1].end == pytest.approx(11.9)


def test_records_stored_with_words_in_seconds_are_read() -> None:
    words = [["Hi", 1.05, 1.3], ["there.", 1.4, 1.9]]
    stored = {"text": "Hi there.", "start": 1.0, "end": 2.0, "words": words}
    assert SegmentTiming.from_dict(stored).words == tuple(WordTiming(*word) for word in words)


def test_the_edited_voice_is_kept_and_loaded_by_path(voice: Voice, tmp_path: Path) -> None:
    """The first load writes the voice with its durations exposed; the next one reads that file."""
    made = durations_model(voice, tmp_path)
    assert made == str(tmp_path / cached_name(voice))
    assert durations_model(voice, tmp_path) == made
    assert [p.name for p in tmp_path.iterdir()] == [cached_name(voice)]  # no part files left


def test_an_unwritable_cache_gives_the_model_from_memory(voice: Voice, tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    model = durations_model(voice, blocked / "models")
    assert isinstance(model, bytes) and len(model) > 1_000_000
