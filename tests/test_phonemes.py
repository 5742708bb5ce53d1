"""Phonemes from text: read aloud first for English voices, inline ``[[ ]]`` phonemes as piper
takes them, checked against piper-tts itself."""

from __future__ import annotations

import dataclasses
import json

import pytest
from piper.config import PiperConfig
from piper.voice import PiperVoice

from synthesis.phonemes import Phonemizer, split_inline
from synthesis.text import Segmenter
from ttsfarm.core.errors import InvalidInput
from ttsfarm.core.voices import Voice


def piper_phonemes(voice: Voice, text: str) -> list[str]:
    """piper-tts's own phonemes of ``text``, its sentences joined as ours are."""
    config = PiperConfig.from_dict(json.loads(voice.config_path.read_text(encoding="utf-8")))
    sentences = PiperVoice(session=None, config=config).phonemize(text)  # no model needed
    return [p for n, sentence in enumerate(sentences) for p in ([" "] if n else []) + sentence]


def test_numbers_are_read_in_words_for_english(voice: Voice) -> None:
    read = Phonemizer(voice)
    assert read.spoken("It costs $49.95.") == "It costs forty-nine dollars and ninety-five cents."
    assert read.ids("It costs $49.95.") == read.ids("It costs forty-nine dollars and ninety-five cents.")
    as_written = Phonemizer(voice, normalize_text=False)
    assert as_written.spoken("It costs $49.95.") == "It costs $49.95."
    assert as_written.ids("It costs $49.95.") != read.ids("It costs $49.95.")


def test_other_languages_go_to_espeak_as_written(voice: Voice) -> None:
    german = dataclasses.replace(voice, espeak_voice="de", language="de_DE")
    phonemizer = Phonemizer(german)
    assert phonemizer.reader is None
    assert phonemizer.spoken("Es kostet 5 Euro, Dr. Schmidt.") == "Es kostet 5 Euro, Dr. Schmidt."


def test_henry_viii_is_no_longer_roman_eight(voice: Voice) -> None:
    assert "ɹˌoʊmən" in "".join(Phonemizer(voice, normalize_text=False).phonemes("Henry VIII"))
    assert "".join(Phonemizer(voice).phonemes("Henry VIII")).endswith("ˈeɪtθ")


@pytest.mark.parametrize(
    "text",
    [
        "I am the [[ bˈætmæn ]] not [[bɹˈuːs wˈeɪn]]",
        "Say [[ həlˈoʊ ]] to everyone.",
        "[[ həlˈoʊ wˈɜːld ]]",
        "First sentence. Then [[ ðˈɛn ]] a second one.",
        "Say [[ h ə l ˈoʊ ]] now.",
    ],
)
def test_inline_phonemes_match_piper(voice: Voice, text: str) -> None:
    assert Phonemizer(voice, normalize_text=False).phonemes(text) == piper_phonemes(voice, text)


def test_inline_phonemes_go_to_the_model_as_written(voice: Voice) -> None:
    phonemizer = Phonemizer(voice)
    said = phonemizer.phonemes("Say [[ həlˈoʊ ]] now.")
    assert "".join(said) == "sˈeɪ həlˈoʊ nˈaʊ."
    # the letters read as phonemes, not as the letter names espeak-ng would say
    assert "".join(phonemizer.phonemes("[[ h ə l ˈoʊ ]]")) == "h ə l ˈoʊ"
    assert phonemizer.phonemes("[[ həlˈoʊ ]]") == phonemizer.phonemes("hello")


def test_punctuation_after_a_block_is_not_read_out(voice: Voice) -> None:
    said = "".join(Phonemizer(voice).phonemes("I am the [[ bˈætmæn ]]!"))
    assert said.endswith("bˈætmæn!")
    assert "ɛkskl" not in said  # espeak-ng alone reads "!" as "exclamation"


def test_numbers_beside_a_block_are_read_too(voice: Voice) -> None:
    phonemizer = Phonemizer(voice)
    assert phonemizer.phonemes("[[ həlˈoʊ ]] 3 times") == phonemizer.phonemes("[[ həlˈoʊ ]] three times")


def test_an_unknown_phoneme_is_a_clear_error(voice: Voice) -> None:
    with pytest.raises(InvalidInput, match=r"\[\[ hQlo \]\]: voice 'joe' has no phoneme 'Q'"):
        Phonemizer(voice).ids("Say [[ hQlo ]] now.")


def test_split_inline_keeps_blocks_cut_by_the_segmenter() -> None:
    assert split_inline("a [[ b c ]] d") == [(False, "a "), (True, " b c "), (False, " d")]
    assert split_inline("a [[ b c") == [(False, "a "), (True, " b c")]
    assert split_inline("b c ]] d") == [(True, "b c "), (False, " d")]
    assert split_inline("[[x]][[y]]") == [(True, "x"), (True, "y")]
    assert split_inline("no blocks") == [(False, "no blocks")]


def test_segments_keep_the_text_as_written(voice: Voice) -> None:
    phonemizer = Phonemizer(voice)
    text = "It costs $49.95 on 2024-03-15. Say [[ həlˈoʊ ]] to Dr. Smith."
    segments = list(Segmenter(phonemizer).segments(text))
    assert [s.text for s in segments] == ["It costs $49.95 on 2024-03-15.", "Say [[ həlˈoʊ ]] to Dr. Smith."]
    spoken = "It costs forty-nine dollars and ninety-five cents on March fifteenth, twenty twenty-four."
    assert list(segments[0].phoneme_ids) == phonemizer.ids(spoken)


def test_a_long_sentence_split_inside_a_block_keeps_its_phonemes(voice: Voice) -> None:
    phonemizer = Phonemizer(voice)
    block = " ".join(["həlˈoʊ"] * 30)
    segments = list(Segmenter(phonemizer, max_phoneme_ids=80).segments(f"Say [[ {block} ]] now."))
    assert len(segments) > 1
    letter_names = phonemizer.phonemes("h")  # espeak-ng reading "h" as a letter: "eɪtʃ"
    for segment in segments:
        assert "[" not in "".join(phonemizer.phonemes(segment.text))
        assert "".join(letter_names) not in "".join(phonemizer.phonemes(segment.text))
