"""EPUB covers found as publishers mark them, in EPUBs written by hand (zip, OPF, NCX), not by
ebooklib: EPUB 2's ``<meta name="cover">``, and a guide whose cover page shows the image."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.books import HandMadeEpub, Image, Page, Toc, png
from ttsfarm.audiobook.epub import read_epub_book
from ttsfarm.core.jobs import SynthesisOptions

COVER_PAGE = Page("text/cover.xhtml", '<div><img src="../images/front.png" alt="Cover"/></div>', linear=False)
CHAPTER = Page("text/one.xhtml", "<h1>Chapter One</h1><p>The lamp was lit before the ship came in.</p>")


def hand_made_epub(path: Path, cover_meta: bool, guide: bool) -> Path:
    return HandMadeEpub(
        pages=(COVER_PAGE, CHAPTER),
        toc=(Toc("Chapter One", "text/one.xhtml"),),
        version="2.0",
        guide=(("cover", "Cover", "text/cover.xhtml"),) if guide else (),
        images=(Image("cover-image", "images/front.png", png(16, 16)),),
        cover_meta="cover-image" if cover_meta else None,
    ).write(path)


@pytest.mark.parametrize(("cover_meta", "guide"), [(True, False), (False, True)], ids=["meta", "guide"])
def test_an_epub2_cover_is_found(tmp_path: Path, cover_meta: bool, guide: bool) -> None:
    path = hand_made_epub(tmp_path / "hand.epub", cover_meta, guide)
    book = read_epub_book(str(path), SynthesisOptions())
    assert book.info.cover is not None
    assert (book.info.cover.data, book.info.cover.mime) == (png(16, 16), "image/png")
    assert [chapter.title for chapter in book.chapters] == ["Chapter One"]


def test_an_epub2_without_a_cover_has_none(tmp_path: Path) -> None:
    book = read_epub_book(str(hand_made_epub(tmp_path / "plain.epub", False, False)), SynthesisOptions())
    assert book.info.cover is None
