"""What is spoken of a book's text, by the segments and pauses the synthesis front end makes of
it: a table row by row, verse line by line with short pauses (only where the markup breaks the
line, never where prose is merely wrapped), and a warning when the voice does not speak the
book's language."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from synthesis.phonemes import Phonemizer
from synthesis.text import Segmenter
from tests.books import HandMadeEpub, Page, Toc, salt_road
from ttsfarm.audiobook.book import Chapter
from ttsfarm.audiobook.epub import read_epub_book
from ttsfarm.audiobook.language import language_warning, primary_language
from ttsfarm.audiobook.parts import chapter_parts
from ttsfarm.audiobook.source import open_book
from ttsfarm.core.breaks import PAUSE_LINE, PAUSE_PARAGRAPH, PAUSE_SENTENCE
from ttsfarm.core.jobs import SynthesisOptions
from ttsfarm.core.voices import Voice

DEFAULTS = SynthesisOptions()


def spoken(chapter: Chapter, phonemizer: Phonemizer) -> list[tuple[str, float]]:
    """Each segment of the chapter, with the pause after it."""
    segmenter = Segmenter(phonemizer)
    return [(s.text, s.pause_after) for p in chapter_parts(chapter) for s in segmenter.segments(p.text)]


def chapter(path: Path, title: str) -> Chapter:
    return next(c for c in open_book(str(path), DEFAULTS).chapters if c.title == title)


def test_a_table_is_read_row_by_row(tmp_path: Path, phonemizer: Phonemizer) -> None:
    path = salt_road().write(tmp_path / "salt.epub")
    segments = spoken(chapter(path, "Part Two: The Hills \u2014 Chapter 3"), phonemizer)
    assert segments[3:7] == [
        ("Miles walked", PAUSE_PARAGRAPH),
        ("Day, Miles, Weather", PAUSE_PARAGRAPH),
        ("Monday, 12, Rain", PAUSE_PARAGRAPH),
        ("Tuesday, 15, Fog", PAUSE_PARAGRAPH),
    ]


def test_cells_that_are_sentences_are_not_run_together(tmp_path: Path) -> None:
    table = (
        "<table><tr><th>Term</th><th>Meaning</th></tr>"
        "<tr><td>Cairn</td><td>A pile of stones. It marks the way.</td></tr>"
        "<tr><td>Tide.</td><td>The sea rising <em>and</em> falling</td></tr></table>"
    )
    pages = (Page("text/one.xhtml", f"<h1>Words</h1>{table}"),)
    book = read_epub_book(
        str(HandMadeEpub(pages, (Toc("Words", "text/one.xhtml"),)).write(tmp_path / "t.epub")), DEFAULTS
    )
    assert [row.text for row in book.chapters[0].rows] == [
        "Words",
        "Term, Meaning",
        "Cairn, A pile of stones. It marks the way.",
        "Tide. The sea rising and falling",
    ]


def test_verse_lines_end_in_short_pauses(tmp_path: Path, phonemizer: Phonemizer) -> None:
    path = salt_road().write(tmp_path / "salt.epub")
    assert spoken(chapter(path, "Chapter 2"), phonemizer) == [
        ("Chapter 2", PAUSE_PARAGRAPH),
        ("At dusk she sang the old road song.", PAUSE_PARAGRAPH),
        ("The salt road runs", PAUSE_LINE),
        ("where the grey gulls cry", PAUSE_LINE),
        ("and the tide comes in", PAUSE_LINE),
        ("under a wide sky", PAUSE_PARAGRAPH),
        ("Then she was quiet.", 0.0),
    ]
    assert 0 < PAUSE_LINE < PAUSE_SENTENCE


def test_a_verse_line_that_ends_a_sentence_pauses_as_a_sentence(phonemizer: Phonemizer) -> None:
    text = "\u2028".join(
        [
            "Whose woods these are I think I know.",
            "His house is in the village though;",
            "He will not see me.",
        ]
    )
    segments = [(s.text, s.pause_after) for s in Segmenter(phonemizer).segments(text)]
    assert segments == [
        ("Whose woods these are I think I know.", PAUSE_SENTENCE),
        ("His house is in the village though;", PAUSE_LINE),
        ("He will not see me.", 0.0),
    ]


WRAPPED = """The road began at the harbour wall and ran north along the
cliffs for a day and a night, and nobody knew who had laid
the first stones of it.
"""


@pytest.mark.parametrize("name", ["wrapped.txt", "wrapped.md"])
def test_hard_wrapped_prose_is_not_verse(tmp_path: Path, phonemizer: Phonemizer, name: str) -> None:
    (tmp_path / name).write_text(WRAPPED, encoding="utf-8")
    book = open_book(str(tmp_path / name), DEFAULTS)
    assert spoken(book.chapters[0], phonemizer) == [(" ".join(WRAPPED.split()), 0.0)]


def test_markdown_line_breaks_are_verse(tmp_path: Path, phonemizer: Phonemizer) -> None:
    (tmp_path / "poem.md").write_text("The salt road runs  \nwhere the grey gulls cry\\\nunder a wide sky\n")
    book = open_book(str(tmp_path / "poem.md"), DEFAULTS)
    assert spoken(book.chapters[0], phonemizer) == [
        ("The salt road runs", PAUSE_LINE),
        ("where the grey gulls cry", PAUSE_LINE),
        ("under a wide sky", 0.0),
    ]


def test_a_voice_that_does_not_speak_the_books_language_is_named(voice: Voice) -> None:
    assert voice.language == "en_US"
    assert language_warning("de-DE", voice, "book.epub") == (
        "book.epub is in de-DE (its dc:language) but voice 'joe' speaks en_US: it will be read with "
        "en_US pronunciation; pick a voice for de-DE with --voice"
    )
    for same in ("en", "en-GB", "EN_us", "eng"):
        assert language_warning(same, voice, "book.epub") is None
    assert language_warning(None, voice, "book.epub") is None
    assert [primary_language(c) for c in ("pt-BR", "zh-Hans-CN", "cmn", "nb")] == ["pt", "zh", "zh", "no"]


def test_the_audiobook_command_warns_in_one_line(tmp_path: Path) -> None:
    pages = (Page("text/eins.xhtml", "<h1>Eins</h1><p>Guten Morgen.</p>"),)
    epub = HandMadeEpub(pages, (Toc("Eins", "text/eins.xhtml"),), title="Das Buch", language="de")
    epub.write(tmp_path / "buch.epub")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "ttsfarm",
            "audiobook",
            "buch.epub",
            "-o",
            "out",
            "-q",
            "--length-scale",
            "0.6",
        ],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if not k.startswith("TTSFARM_")},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr
    warnings = [line for line in run.stderr.splitlines() if "dc:language" in line]
    assert len(warnings) == 1 and "WARNING" in warnings[0], run.stderr
    assert "buch.epub is in de (its dc:language) but voice 'joe' speaks en_US" in warnings[0]
