"""Front matter, back matter and parts in EPUBs written by hand as publishers ship them
(``tests.books.salt_road``): told from the landmarks (EPUB 3), the guide (EPUB 2), ``epub:type``
on ``<body>`` as the document's own bytes have it, and titles and content where nothing is
marked; a part's page leads the part's first chapter rather than being a chapter of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.books import HandMadeEpub, Page, Toc, salt_road
from ttsfarm.audiobook.book import Book
from ttsfarm.audiobook.epub import read_epub_book
from ttsfarm.audiobook.source import chapter_lines, select_chapters
from ttsfarm.core.jobs import SynthesisOptions

DEFAULTS = SynthesisOptions()


def read(epub: HandMadeEpub, path: Path) -> Book:
    return read_epub_book(str(epub.write(path)), DEFAULTS)


@pytest.mark.parametrize("version", ["3.0", "2.0"])
def test_front_and_back_matter_are_listed_and_left_out(tmp_path: Path, version: str) -> None:
    book = read(salt_road(version), tmp_path / "salt.epub")
    assert [(c.title, c.front_matter) for c in book.chapters] == [
        ("The Salt Road", True),  # title page: opens with the book's title, marked nowhere
        ("Copyright", True),  # the guide's copyright-page
        ("For M., who walked it first.", True),  # <body epub:type="frontmatter"> only
        ("Contents", True),  # landmarks / guide: toc
        ("Part One: The Coast \u2014 Chapter 1", False),
        ("Chapter 2", False),
        ("Part Two: The Hills \u2014 Chapter 3", False),
        ("Harbour Press", True),  # <body epub:type="backmatter"> only: not part of Chapter 3
        ("Acknowledgements", True),  # by its title
        ("About the Author", True),
    ]  # the endnotes (<section epub:type="endnotes">) have nothing to read: not listed
    notes = [line.rsplit("  ", 1)[-1] for line in chapter_lines(book)]
    assert notes[:4] == ["(front matter: left out unless picked)"] * 4
    assert notes[7:] == ["(back matter: left out unless picked)"] * 3
    assert all("matter" not in line for line in chapter_lines(book)[4:7])
    read_aloud = select_chapters(book, None)
    assert [c.title for c in read_aloud.chapters] == [
        "Part One: The Coast \u2014 Chapter 1",
        "Chapter 2",
        "Part Two: The Hills \u2014 Chapter 3",
    ]


def test_a_part_page_leads_its_first_chapter(tmp_path: Path) -> None:
    book = read(salt_road(), tmp_path / "salt.epub")
    chapters = {c.title: [row.text for row in c.rows] for c in book.chapters}
    assert chapters["Part One: The Coast \u2014 Chapter 1"] == [
        "Part One: The Coast",
        "Chapter 1",
        "The road began at the harbour wall.",
        "Nobody knew who had laid the first stones.",
    ]
    assert chapters["Part Two: The Hills \u2014 Chapter 3"][:3] == [
        "Part Two: The Hills",
        "Chapter 3",
        "They kept count of the miles.",
    ]
    # a chapter's own footnotes section and its note marker are not read
    assert not any(
        "pedometer" in text or text == "Notes" for text in chapters["Part Two: The Hills \u2014 Chapter 3"]
    )


def test_parts_without_a_page_and_parts_with_an_introduction(tmp_path: Path) -> None:
    pages = (
        Page("text/one.xhtml", "<h2>One</h2><p>The first night was cold.</p>"),
        Page("text/two.xhtml", "<h2>Two</h2><p>The second was colder.</p>"),
        Page(
            "text/part2.xhtml",
            "<h1>Book Two</h1>" + "<p>This book tells of the long winter and who lived through it.</p>" * 8,
        ),
        Page("text/three.xhtml", "<h2>Three</h2><p>Spring came late.</p>"),
    )
    toc = (
        Toc("Book One", None, (Toc("One", "text/one.xhtml"), Toc("Two", "text/two.xhtml"))),
        Toc("Book Two", "text/part2.xhtml", (Toc("Three", "text/three.xhtml"),)),
    )
    book = read(HandMadeEpub(pages, toc), tmp_path / "parts.epub")
    assert [c.title for c in book.chapters] == [
        "Book One \u2014 One",  # a part with no page of its own: its title leads its first chapter
        "Two",
        "Book Two",  # a part with an introduction of its own is a chapter
        "Three",
    ]


def test_body_types_are_read_from_the_documents_own_bytes(tmp_path: Path) -> None:
    """ebooklib's ``get_content()`` drops the attributes of ``<body>``: a back matter page named
    nowhere else must not become part of the last chapter."""
    pages = (
        Page("text/one.xhtml", "<h1>One</h1><p>It rained.</p>", "bodymatter"),
        Page("text/notes.xhtml", "<h1>Further Thoughts</h1><p>See the map.</p>", "backmatter"),
        Page("text/credits.xhtml", '<section epub:type="contributors"><p>Map by J. Doe.</p></section>'),
    )
    book = read(HandMadeEpub(pages, (Toc("One", "text/one.xhtml"),)), tmp_path / "typed.epub")
    assert [(c.title, c.front_matter, len(c.rows)) for c in book.chapters] == [
        ("One", False, 2),
        ("Further Thoughts", True, 2),
        ("Map by J. Doe.", True, 1),
    ]


def test_a_short_story_that_shares_the_books_title_is_read(tmp_path: Path) -> None:
    pages = (Page("text/story.xhtml", "<h1>The Hand-Made Book</h1><p>It was short.</p>"),)
    book = read(HandMadeEpub(pages, (Toc("The Hand-Made Book", "text/story.xhtml"),)), tmp_path / "one.epub")
    assert [(c.title, c.front_matter) for c in book.chapters] == [("The Hand-Made Book", False)]
