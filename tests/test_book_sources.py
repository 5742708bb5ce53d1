"""Books from EPUB, text and Markdown files the tests make: chapters, titles, front matter,
what is read aloud and what is not, metadata, picking chapters."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.books import MARKDOWN_BOOK, TEXT_BOOK, make_epub, png
from ttsfarm.audiobook.parts import PART_MAX_CHARS, chapter_parts
from ttsfarm.audiobook.source import (
    chapter_lines,
    open_book,
    parse_selection,
    read_cover,
    select_chapters,
    with_info,
)
from ttsfarm.audiobook.text import TEXT_HEADING
from ttsfarm.core.errors import InvalidInput
from ttsfarm.core.jobs import SynthesisOptions

DEFAULTS = SynthesisOptions()


def texts(book_path: Path) -> list[tuple[str, bool, list[str]]]:
    book = open_book(str(book_path), DEFAULTS)
    return [(c.title, c.front_matter, [r.text for r in c.rows]) for c in book.chapters]


def test_epub_chapters_follow_the_table_of_contents(tmp_path: Path) -> None:
    found = texts(make_epub(tmp_path / "lantern.epub", cover=png()))
    assert found == [
        ("The Lantern", True, ["The Lantern", "A story by Ann Author."]),
        # a file the contents do not name continues the chapter; the footnote is not read
        (
            "The Hill",
            False,
            [
                "Chapter One: The Hill",
                "The lamp was lit at dusk.",
                "Wind came over the hill.",
                "Then the rain began.",
            ],
        ),
        # two entries pointing into one file cut it in two
        ("Grey Morning", False, ["Chapter Two", "Morning was grey."]),
        ("The Lamp Goes Out", False, ["Chapter Three", "By noon the lamp was out.", "They went home."]),
        ("Copyright", True, ["Copyright 2019 Ann Author. All rights reserved."]),
    ]


def test_epub_metadata_and_cover(tmp_path: Path) -> None:
    cover = png(16, 16)
    book = open_book(str(make_epub(tmp_path / "lantern.epub", cover=cover)), DEFAULTS)
    assert (book.title, book.info.author, book.info.year, book.info.language) == (
        "The Lantern",
        "Ann Author",
        "2019",
        "en",
    )
    assert (
        book.info.cover is not None and book.info.cover.data == cover and book.info.cover.mime == "image/png"
    )
    assert open_book(str(tmp_path / "lantern.epub"), DEFAULTS, title="Another").title == "Another"
    plain = open_book(str(make_epub(tmp_path / "plain.epub")), DEFAULTS)
    assert plain.info.cover is None


def test_front_matter_is_listed_but_left_out_unless_picked(tmp_path: Path) -> None:
    book = open_book(str(make_epub(tmp_path / "lantern.epub")), DEFAULTS)
    lines = chapter_lines(book)
    assert lines[0].startswith("1  The Lantern  [33 characters") and "front matter" in lines[0]
    assert "front matter" not in lines[1]
    default = select_chapters(book, None)
    assert [(c.number, c.title) for c in default.chapters] == [
        (1, "The Hill"),
        (2, "Grey Morning"),
        (3, "The Lamp Goes Out"),
    ]
    picked = select_chapters(book, "1,3-")
    assert [c.title for c in picked.chapters] == [
        "The Lantern",
        "Grey Morning",
        "The Lamp Goes Out",
        "Copyright",
    ]
    assert [c.number for c in picked.chapters] == [1, 2, 3, 4]


def test_text_book_chapters_at_headings(tmp_path: Path) -> None:
    (tmp_path / "lantern.txt").write_text(TEXT_BOOK, encoding="utf-8")
    book = open_book(str(tmp_path / "lantern.txt"), DEFAULTS)
    assert book.title == "lantern"
    assert [(c.title, [(r.line, r.text) for r in c.rows]) for c in book.chapters] == [
        ("Opening", [(1, "The Lantern"), (3, "A story in three parts.")]),
        (
            "Chapter 1",
            [
                (5, "Chapter 1"),
                (7, "The lamp was lit at dusk.\nWind came over the hill."),
                (12, "Then the rain began."),
            ],
        ),
        ("CHAPTER II. Grey Morning", [(14, "CHAPTER II. Grey Morning"), (16, "Morning was grey.")]),
        ("Epilogue", [(18, "Epilogue"), (20, "They went home.")]),
    ]


def test_text_headings_need_a_number_after_chapter_part_or_book() -> None:
    headings = [
        "Chapter 12",
        "CHAPTER IV. The Storm",
        "Part Two: The Sea",
        "Book xiv",
        "Prologue",
        "Epilogue",
    ]
    prose = ["Part of it was lost.", "Book lovers rejoiced.", "Chapter and verse.", "Part did not matter."]
    assert [bool(TEXT_HEADING.match(line)) for line in headings] == [True] * len(headings)
    assert [bool(TEXT_HEADING.match(line)) for line in prose] == [False] * len(prose)


def test_text_book_without_headings_splits_at_separators(tmp_path: Path) -> None:
    (tmp_path / "scenes.txt").write_text(
        "First scene.\n\n***\n\nSecond scene.\n\n- - -\nThird.\n", encoding="utf-8"
    )
    assert [
        (c.title, [r.text for r in c.rows])
        for c in open_book(str(tmp_path / "scenes.txt"), DEFAULTS).chapters
    ] == [
        ("Chapter 1", ["First scene."]),
        ("Chapter 2", ["Second scene."]),
        ("Chapter 3", ["Third."]),
    ]
    (tmp_path / "one.txt").write_text("Just one paragraph.\n", encoding="utf-8")
    assert [c.title for c in open_book(str(tmp_path / "one.txt"), DEFAULTS).chapters] == ["Chapter 1"]


def test_markdown_book_chapters_at_the_top_heading_level(tmp_path: Path) -> None:
    (tmp_path / "lantern.md").write_text(MARKDOWN_BOOK, encoding="utf-8")
    book = open_book(str(tmp_path / "lantern.md"), DEFAULTS)
    assert book.title == "The Lantern"  # the lone # heading over ## ones
    assert [(c.title, [(r.line, r.text) for r in c.rows]) for c in book.chapters] == [
        (
            "The Hill",
            [
                (3, "The Hill"),
                (5, "The lamp was lit at dusk."),
                (11, "A quieter part"),
                (13, "Wind came over the hill."),
            ],
        ),
        ("Grey Morning", [(15, "Grey Morning"), (17, "Morning was grey."), (18, "The lamp was out.")]),
    ]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("book.epub", b"not a zip", "book.epub is not an EPUB (not a zip archive)"),
        ("book.txt", b"\n\n  \n", "book.txt has no text to speak"),
        ("book.md", b"```\nonly code\n```\n", "book.md has no text to speak"),
        ("book.docx", b"x", "book.docx is: give a file ending in .csv, .epub, .txt, .md"),
        ("book.txt", "caf\xe9".encode("latin-1"), "book.txt is not UTF-8 text"),
    ],
)
def test_bad_books_give_one_clear_line(tmp_path: Path, name: str, content: bytes, message: str) -> None:
    (tmp_path / name).write_bytes(content)
    with pytest.raises(InvalidInput, match=re.escape(message)) as raised:
        open_book(str(tmp_path / name), DEFAULTS)
    assert "\n" not in str(raised.value)


def test_chapter_selection_and_cover_checks(tmp_path: Path) -> None:
    assert parse_selection("3, 1-2 ,5-", 6) == [1, 2, 3, 5, 6]
    for bad in ("0", "2-1", "7", "one", "1,,2"):
        with pytest.raises(InvalidInput, match="--chapters"):
            parse_selection(bad, 6)
    (tmp_path / "cover.png").write_bytes(png())
    (tmp_path / "cover.gif").write_bytes(b"GIF89a....")
    assert read_cover(tmp_path / "cover.png").mime == "image/png"
    with pytest.raises(InvalidInput, match="is not a JPEG or PNG picture"):
        read_cover(tmp_path / "cover.gif")
    with pytest.raises(InvalidInput, match="does not exist"):
        read_cover(tmp_path / "missing.jpg")
    book = open_book(str(make_epub(tmp_path / "lantern.epub", cover=png())), DEFAULTS)
    given = with_info(book, author="B. Writer", narrator="Joe", cover=tmp_path / "cover.png")
    assert (given.info.author, given.info.narrator, given.info.year) == ("B. Writer", "Joe", "2019")


def test_parts_hold_about_a_minute_of_speech(tmp_path: Path) -> None:
    sentence = "The lamp was lit at dusk and the wind came over the hill again. "
    (tmp_path / "long.txt").write_text("Chapter 1\n\n" + sentence * 200, encoding="utf-8")
    chapter = open_book(str(tmp_path / "long.txt"), DEFAULTS).chapters[0]
    parts = chapter_parts(chapter)
    assert len(parts) >= 12
    assert all(len(part.text) <= PART_MAX_CHARS <= 1_000 for part in parts)
