"""EPUB covers found as publishers mark them, in EPUBs written by hand (zip, OPF, NCX), not by
ebooklib: EPUB 2's ``<meta name="cover">``, and a guide whose cover page shows the image."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from tests.books import png
from ttsfarm.audiobook.epub import read_epub_book
from ttsfarm.jobs import SynthesisOptions

CONTAINER = """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>"""

NCX = """<?xml version="1.0" encoding="UTF-8"?>
<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">
  <head><meta name="dtb:uid" content="urn:uuid:hand-made"/></head>
  <docTitle><text>The Hand-Made Book</text></docTitle>
  <navMap><navPoint id="n1" playOrder="1"><navLabel><text>Chapter One</text></navLabel>
    <content src="text/one.xhtml"/></navPoint></navMap>
</ncx>"""

CHAPTER = """<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>One</title></head>
<body><h1>Chapter One</h1><p>The lamp was lit before the ship came in.</p></body></html>"""

COVER_PAGE = """<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Cover</title></head>
<body><div><img src="../images/front.png" alt="Cover"/></div></body></html>"""


def opf(cover_meta: bool, guide: bool) -> str:
    meta = '<meta name="cover" content="cover-image"/>' if cover_meta else ""
    reference = (
        '<guide><reference type="cover" title="Cover" href="text/cover.xhtml"/></guide>' if guide else ""
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="2.0" unique-identifier="uid">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:opf="http://www.idpf.org/2007/opf">
    <dc:title>The Hand-Made Book</dc:title><dc:creator>A. Writer</dc:creator>
    <dc:language>en</dc:language><dc:identifier id="uid">urn:uuid:hand-made</dc:identifier>
    {meta}
  </metadata>
  <manifest>
    <item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>
    <item id="cover-page" href="text/cover.xhtml" media-type="application/xhtml+xml"/>
    <item id="one" href="text/one.xhtml" media-type="application/xhtml+xml"/>
    <item id="cover-image" href="images/front.png" media-type="image/png"/>
  </manifest>
  <spine toc="ncx"><itemref idref="cover-page" linear="no"/><itemref idref="one"/></spine>
  {reference}
</package>"""


def hand_made_epub(path: Path, cover_meta: bool, guide: bool) -> Path:
    with zipfile.ZipFile(path, "w") as book:
        book.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")  # first, stored
        book.writestr("META-INF/container.xml", CONTAINER)
        book.writestr("OEBPS/content.opf", opf(cover_meta, guide))
        book.writestr("OEBPS/toc.ncx", NCX)
        book.writestr("OEBPS/text/cover.xhtml", COVER_PAGE)
        book.writestr("OEBPS/text/one.xhtml", CHAPTER)
        book.writestr("OEBPS/images/front.png", png(16, 16))
    return path


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
