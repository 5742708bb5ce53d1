"""The text front end: segments made in a pool of processes match those made in the job's thread."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from synthesis.frontend import TextFrontend, chunk_paragraphs
from synthesis.phonemes import Phonemizer
from synthesis.text import normalize
from ttsfarm.core.breaks import PAUSE_PARAGRAPH, split_paragraphs
from ttsfarm.core.errors import InvalidInput, TransientError
from ttsfarm.core.voices import Voice

SAMPLE = Path(__file__).resolve().parent.parent / "benchmarks" / "corpus.txt"


def test_chunks_keep_every_paragraph_in_order() -> None:
    paragraphs = [f"p{n} " + "x" * (n * 37 % 900) for n in range(40)]
    chunks = list(chunk_paragraphs(paragraphs, size=1_000))
    assert [p for chunk in chunks for p in chunk] == paragraphs
    assert all(sum(map(len, chunk)) >= 1_000 for chunk in chunks[:-1])
    assert len(chunks) > 5


def test_pool_segments_equal_in_thread_segments(voice: Voice) -> None:
    text = SAMPLE.read_text(encoding="utf-8")
    with TextFrontend() as in_thread, TextFrontend(processes=2) as pooled:
        expected = list(in_thread.segments(voice, text))
        assert pooled._pool is not None
        submitted: list[list[str]] = []
        submit = pooled._pool.submit
        pooled._pool.submit = lambda fn, *args: submitted.append(args[2]) or submit(fn, *args)  # type: ignore[method-assign]
        got = list(pooled.segments(voice, text))
    assert len(submitted) == len(list(chunk_paragraphs(split_paragraphs(normalize(text))))) > 1
    assert got == expected
    assert [segment.index for segment in got] == list(range(len(got)))
    assert got[-1].pause_after == 0.0
    assert PAUSE_PARAGRAPH in {segment.pause_after for segment in got}


def test_pool_with_nothing_to_speak(voice: Voice) -> None:
    with TextFrontend(processes=1) as pooled:
        assert list(pooled.segments(voice, "* * *\n\n...")) == []


def test_a_killed_text_process_fails_one_job_as_transient_then_the_pool_recovers(voice: Voice) -> None:
    with TextFrontend(processes=1) as pooled:
        pooled.start()
        pool = pooled._pool
        assert pool is not None
        for pid in list(pool.pool._processes):  # the outer edge: the OS kills the process
            os.kill(pid, signal.SIGKILL)
        with pytest.raises(TransientError, match="text process stopped"):
            list(pooled.segments(voice, "One sentence. Another one."))
        assert [s.text for s in pooled.segments(voice, "One sentence. Another one.")] == [
            "One sentence.",
            "Another one.",
        ]


NUMBERS = "It costs $49.95 on 2024-03-15.\n\nHenry VIII paid £5 at 8:30 pm. Say [[ həlˈoʊ ]] to Dr. Smith."


def test_pool_and_thread_both_read_numbers_aloud_and_keep_the_text(voice: Voice) -> None:
    phonemizer = Phonemizer(voice)
    with TextFrontend() as in_thread, TextFrontend(processes=1) as pooled:
        expected = list(in_thread.segments(voice, NUMBERS))
        got = list(pooled.segments(voice, NUMBERS))
    assert got == expected
    assert [s.text for s in got] == [
        "It costs $49.95 on 2024-03-15.",
        "Henry VIII paid £5 at 8:30 pm.",
        "Say [[ həlˈoʊ ]] to Dr. Smith.",
    ]
    spoken = "Henry the eighth paid five pounds at eight thirty PM."
    assert list(got[1].phoneme_ids) == phonemizer.ids(spoken)


def test_normalisation_can_be_switched_off_in_the_pool_too(voice: Voice) -> None:
    as_written = Phonemizer(voice, normalize_text=False)
    with TextFrontend(processes=1, normalize_text=False) as pooled:
        got = list(pooled.segments(voice, "It costs $49.95."))
    assert [list(s.phoneme_ids) for s in got] == [as_written.ids("It costs $49.95.")]
    assert got[0].phoneme_ids != tuple(Phonemizer(voice).ids("It costs $49.95."))


def test_an_unknown_inline_phoneme_fails_the_job_from_the_pool_too(voice: Voice) -> None:
    with TextFrontend(processes=1) as pooled, pytest.raises(InvalidInput, match="no phoneme 'Q'"):
        list(pooled.segments(voice, "Say [[ hQlo ]] now."))
