"""Normalisation and segmentation with the real espeak-ng phonemizer."""

from __future__ import annotations

import pytest

from synthesis.phonemes import Phonemizer
from synthesis.text import Segmenter, normalize
from ttsfarm.core.breaks import PAUSE_PARAGRAPH, PAUSE_SENTENCE


def test_normalize_collapses_space_and_keeps_paragraphs() -> None:
    text = "  One\tline\r\ncontinues.\r\n\r\n\x07Second   paragraph.\u00a0 "
    assert normalize(text) == "One line continues.\n\nSecond paragraph."


def test_segments_keep_source_text_in_order(phonemizer: Phonemizer) -> None:
    text = "First sentence here. Second one follows!\n\nA new paragraph starts. It ends."
    segments = list(Segmenter(phonemizer).segments(text))
    assert [s.text for s in segments] == [
        "First sentence here.",
        "Second one follows!",
        "A new paragraph starts.",
        "It ends.",
    ]
    assert [s.index for s in segments] == [0, 1, 2, 3]
    assert [s.pause_after for s in segments] == [PAUSE_SENTENCE, PAUSE_PARAGRAPH, PAUSE_SENTENCE, 0.0]


@pytest.mark.parametrize(
    "text",
    [
        "This sentence, which goes on and on, keeps adding clauses; it has commas, semicolons: "
        "and colons, and it never seems to stop, until at last it reaches a very distant end.",
        "word " * 200,
        "x" * 2000,
    ],
)
def test_no_segment_exceeds_the_cap(phonemizer: Phonemizer, text: str) -> None:
    cap = 80
    segments = list(Segmenter(phonemizer, max_phoneme_ids=cap).segments(text))
    assert len(segments) > 1
    assert all(len(s.phoneme_ids) <= cap for s in segments)
    spoken = "".join(s.text for s in segments).replace(" ", "")
    assert spoken == text.replace(" ", "")  # nothing dropped, nothing repeated


def test_long_sentence_splits_at_clauses_first(phonemizer: Phonemizer) -> None:
    text = "When the bridge was finished, the town changed, and nobody was ready for it."
    segments = list(Segmenter(phonemizer, max_phoneme_ids=70).segments(text))
    assert segments[0].text.endswith(",")


def test_symbols_only_sentences_are_not_read_out(phonemizer: Phonemizer) -> None:
    text = "Chapter one ends.\n\n* * *\n\n!?\n\nChapter two begins."
    segments = list(Segmenter(phonemizer).segments(text))
    assert [s.text for s in segments] == ["Chapter one ends.", "Chapter two begins."]
    assert list(Segmenter(phonemizer).segments("... --- ...")) == []


def test_sentence_splitting_is_safe_across_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from synthesis.text import split_sentences

    texts = [
        f"Job {n} starts here. It has a second sentence, number {n}. And a third." * 3 for n in range(40)
    ]
    expected = [split_sentences(t) for t in texts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(5):
            assert list(pool.map(split_sentences, texts)) == expected


ONE_SENTENCE = [
    "A prompt with no stop at all",
    "It ends the usual way.",
    "Does it ask?!",
    "He trailed off...",
    '"Quoted," she said: (quietly) — and left; then came back',
    "Price 3,50 and 50% of 1/2, said the sign",
    "",
    "   ",
]
SEVERAL = [
    "It ended. Then it began.",
    'She said "no." Then she left.',
    'at all."',  # pysbd splits the stray closing quote off: left to it
    "Half-width stops too。 Like this one",
    "One line\nanother line",
]


@pytest.mark.parametrize("text", ONE_SENTENCE + SEVERAL)
def test_sentences_are_split_as_pysbd_splits_them(text: str) -> None:
    import pysbd

    from synthesis.text import split_sentences

    expected = [s.strip() for s in pysbd.Segmenter(language="en", clean=False).segment(text) if s.strip()]
    assert split_sentences(text) == expected


@pytest.mark.parametrize("text", ONE_SENTENCE)
def test_a_text_without_a_stop_inside_it_is_one_sentence_without_pysbd(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pysbd's 0.3-0.6 ms is most of a one-sentence job's text work: such texts skip it."""
    import synthesis.text

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("pysbd was asked to split one sentence")

    monkeypatch.setattr(synthesis.text.pysbd, "Segmenter", refused)
    assert synthesis.text.split_sentences(text) == ([text.strip()] if text.strip() else [])
