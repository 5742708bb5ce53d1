"""Small books that tests make themselves: an EPUB made by ebooklib (with cover, front matter, a
chapter split over two files and two chapters in one file), EPUBs written by hand as publishers
ship them (:class:`HandMadeEpub`), a plain text and a Markdown book."""

from __future__ import annotations

import struct
import zipfile
import zlib
from dataclasses import dataclass
from html import escape
from pathlib import Path

from ebooklib import epub


def png(width: int = 8, height: int = 8, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A real PNG picture of one colour."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _page(name: str, title: str, body: str, kind: str | None = None) -> epub.EpubHtml:
    page = epub.EpubHtml(title=title, file_name=name, lang="en")
    if kind:
        body = f'<section epub:type="{kind}">{body}</section>'
    page.content = f"<html><body>{body}</body></html>"
    return page


def make_epub(path: Path, cover: bytes | None = None) -> Path:
    """``The Lantern``, by Ann Author: cover, title page, three chapters, copyright page."""
    book = epub.EpubBook()
    book.set_identifier("test-lantern")
    book.set_title("The Lantern")
    book.set_language("en")
    book.add_author("Ann Author")
    book.add_metadata("DC", "date", "2019-04-01")
    if cover is not None:
        book.set_cover("images/cover.png", cover)
    title_page = _page(
        "title.xhtml", "Title", "<h1>The Lantern</h1><p>A story by Ann Author.</p>", "frontmatter titlepage"
    )
    one = _page(
        "one.xhtml",
        "One",
        "<h1>Chapter One: The Hill</h1><p>The lamp was lit at dusk.<sup><a href='#n1'>1</a></sup></p>"
        "<p>Wind came   over the\nhill.</p><aside epub:type='footnote' id='n1'>A note not read.</aside>",
    )
    one_more = _page("one-b.xhtml", "One, continued", "<p>Then the rain began.</p>")
    two_three = _page(
        "two.xhtml",
        "Two and Three",
        "<h2 id='c2'>Chapter Two</h2><p>Morning was grey.</p>"
        "<h2 id='c3'>Chapter Three</h2><p>By noon the lamp was out.</p><p>They went home.</p>",
    )
    rights = _page("rights.xhtml", "Copyright", "<p>Copyright 2019 Ann Author. All rights reserved.</p>")
    pages = [title_page, one, one_more, two_three, rights]
    for page in pages:
        book.add_item(page)
    book.toc = [
        epub.Link("one.xhtml", "The Hill", "one"),
        epub.Link("two.xhtml#c2", "Grey Morning", "two"),
        epub.Link("two.xhtml#c3", "The Lamp Goes Out", "three"),
    ]
    book.guide = [{"href": "rights.xhtml", "title": "Copyright", "type": "copyright-page"}]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = (["cover"] if cover is not None else []) + ["nav", *pages]
    epub.write_epub(str(path), book)
    return path


TEXT_BOOK = """The Lantern

A story in three parts.

Chapter 1

The lamp was lit at dusk.
Wind came over the hill.

* * *

Then the rain began.

CHAPTER II. Grey Morning

Morning was grey.

Epilogue

They went home.
"""

MARKDOWN_BOOK = """# The Lantern

## The Hill

The lamp was *lit* at [dusk](https://example.org).

```
code is not read
```

### A quieter part

Wind came over the hill.

## Grey Morning

- Morning was grey.
- The lamp was out.
"""


CONTAINER = """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>"""


@dataclass(frozen=True)
class Page:
    """One XHTML document of a hand-made EPUB."""

    href: str
    """Where it is, from the OPF's folder: ``text/one.xhtml``."""
    body: str
    """What ``<body>`` holds, as XHTML."""
    body_type: str | None = None
    """``epub:type`` of ``<body>``."""
    linear: bool = True

    @property
    def id(self) -> str:
        return self.href.rsplit("/", 1)[-1].rsplit(".", 1)[0]

    def xhtml(self) -> str:
        kind = f' epub:type="{self.body_type}"' if self.body_type else ""
        return f"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" lang="en">
<head><title>{escape(self.id)}</title><link rel="stylesheet" href="../style.css"/></head>
<body{kind}>
{self.body}
</body></html>"""


@dataclass(frozen=True)
class Toc:
    """An entry of the table of contents; ``href`` ``None`` for a heading without a page."""

    title: str
    href: str | None
    children: tuple[Toc, ...] = ()


@dataclass(frozen=True)
class Image:
    id: str
    href: str
    data: bytes
    media_type: str = "image/png"


@dataclass(frozen=True)
class HandMadeEpub:
    """An EPUB written file by file, as publishers' tools write them (not by ebooklib): the
    ``mimetype`` first and stored, ``META-INF/container.xml``, an OPF with a spine and a guide,
    an NCX, and for EPUB 3 a ``nav.xhtml`` with the contents and landmarks."""

    pages: tuple[Page, ...]
    toc: tuple[Toc, ...]
    version: str = "3.0"
    """``3.0`` (with ``nav.xhtml`` and an NCX) or ``2.0`` (an NCX only)."""
    title: str = "The Hand-Made Book"
    author: str = "A. Writer"
    language: str = "en"
    guide: tuple[tuple[str, str, str], ...] = ()
    """``(type, title, href)`` of each ``<reference>``."""
    landmarks: tuple[tuple[str, str, str], ...] = ()
    """``(epub:type, title, href)`` of each landmark (EPUB 3)."""
    images: tuple[Image, ...] = ()
    cover_meta: str | None = None
    """The id of the image ``<meta name="cover">`` names."""

    def write(self, path: Path) -> Path:
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as book:
            book.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")  # first, stored
            book.writestr("META-INF/container.xml", CONTAINER)
            book.writestr("OEBPS/content.opf", self.opf())
            book.writestr("OEBPS/toc.ncx", self.ncx())
            if self.version.startswith("3"):
                book.writestr("OEBPS/nav.xhtml", self.nav())
            book.writestr("OEBPS/style.css", "p { text-indent: 1em; }")
            for page in self.pages:
                book.writestr(f"OEBPS/{page.href}", page.xhtml())
            for image in self.images:
                book.writestr(f"OEBPS/{image.href}", image.data)
        return path

    def opf(self) -> str:
        epub3 = self.version.startswith("3")
        items = [
            '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>',
            '<item id="css" href="style.css" media-type="text/css"/>',
            *(f'<item id="{p.id}" href="{p.href}" media-type="application/xhtml+xml"/>' for p in self.pages),
            *(f'<item id="{i.id}" href="{i.href}" media-type="{i.media_type}"/>' for i in self.images),
        ]
        if epub3:
            items.append(
                '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
            )
        spine = "".join(
            f'<itemref idref="{p.id}" linear="{"yes" if p.linear else "no"}"/>' for p in self.pages
        )
        guide = "".join(
            f'<reference type="{kind}" title="{escape(title)}" href="{href}"/>'
            for kind, title, href in self.guide
        )
        cover = f'<meta name="cover" content="{self.cover_meta}"/>' if self.cover_meta else ""
        modified = '<meta property="dcterms:modified">2020-01-01T00:00:00Z</meta>' if epub3 else ""
        newline = "\n    "
        return f"""<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="{self.version}" unique-identifier="uid">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:opf="http://www.idpf.org/2007/opf">
    <dc:title>{escape(self.title)}</dc:title><dc:creator>{escape(self.author)}</dc:creator>
    <dc:language>{self.language}</dc:language><dc:identifier id="uid">urn:uuid:hand-made</dc:identifier>
    {cover}{modified}
  </metadata>
  <manifest>
    {newline.join(items)}
  </manifest>
  <spine toc="ncx">{spine}</spine>
  {f"<guide>{guide}</guide>" if guide else ""}
</package>"""

    def ncx(self) -> str:
        count = iter(range(1, 1000))

        def points(entries: tuple[Toc, ...]) -> str:
            return "".join(
                f'<navPoint id="n{n}" playOrder="{n}"><navLabel><text>{escape(e.title)}</text></navLabel>'
                f'<content src="{e.href or _first_href(e)}"/>{points(e.children)}</navPoint>'
                for e in entries
                for n in [next(count)]
            )

        return f"""<?xml version="1.0" encoding="UTF-8"?>
<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">
  <head><meta name="dtb:uid" content="urn:uuid:hand-made"/></head>
  <docTitle><text>{escape(self.title)}</text></docTitle>
  <navMap>{points(self.toc)}</navMap>
</ncx>"""

    def nav(self) -> str:
        def items(entries: tuple[Toc, ...]) -> str:
            found = ""
            for e in entries:
                label = (
                    f'<a href="{e.href}">{escape(e.title)}</a>'
                    if e.href
                    else f"<span>{escape(e.title)}</span>"
                )
                found += f"<li>{label}" + (f"<ol>{items(e.children)}</ol>" if e.children else "") + "</li>"
            return found

        landmarks = "".join(
            f'<li><a epub:type="{kind}" href="{href}">{escape(title)}</a></li>'
            for kind, title, href in self.landmarks
        )
        return f"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" lang="en">
<head><title>Contents</title></head>
<body epub:type="frontmatter">
<nav epub:type="toc" id="toc"><h1>Contents</h1><ol>{items(self.toc)}</ol></nav>
{f'<nav epub:type="landmarks" hidden=""><ol>{landmarks}</ol></nav>' if landmarks else ""}
</body></html>"""


def _first_href(entry: Toc) -> str:
    """Where an NCX entry without a page of its own points: its first child's page."""
    return entry.href or next(_first_href(child) for child in entry.children)


SALT_ROAD_PAGES = (
    Page("text/cover.xhtml", '<div class="cover"><img src="../images/cover.png" alt="The Salt Road"/></div>'),
    Page(
        "text/title.xhtml",
        '<h1 class="title">The Salt Road</h1><p class="author">A. Writer</p><p>Harbour Press</p>',
    ),
    Page("text/copyright.xhtml", "<p>Copyright 2021 A. Writer. All rights reserved.</p><p>ISBN 0-00-000</p>"),
    Page("text/dedication.xhtml", '<p class="dedication">For M., who walked it first.</p>', "frontmatter"),
    Page(
        "text/contents.xhtml",
        "<h1>Contents</h1><p>Part One: The Coast</p><p>Chapter 1</p><p>Chapter 2</p>",
    ),
    Page(
        "text/part1.xhtml", '<section epub:type="part"><h1>Part One: The Coast</h1></section>', "bodymatter"
    ),
    Page(
        "text/ch1.xhtml",
        '<section epub:type="chapter"><h2>Chapter 1</h2><p>The road began at the harbour wall.</p>'
        "<p>Nobody knew who had laid the first stones.</p></section>",
        "bodymatter",
    ),
    Page(
        "text/ch2.xhtml",
        '<section epub:type="chapter"><h2>Chapter 2</h2><p>At dusk she sang the old road song.</p>\n'
        '<div class="poem"><p class="stanza">The salt road runs<br/>\nwhere the grey gulls cry<br/>\n'
        "and the tide comes in<br/>\nunder a wide sky</p></div>\n<p>Then she was quiet.</p></section>",
        "bodymatter",
    ),
    Page(
        "text/part2.xhtml", '<section epub:type="part"><h1>Part Two: The Hills</h1></section>', "bodymatter"
    ),
    Page(
        "text/ch3.xhtml",
        '<section epub:type="chapter"><h2>Chapter 3</h2><p>They kept count of the miles.</p>\n'
        "<table><caption>Miles walked</caption>\n<thead><tr><th>Day</th><th>Miles</th><th>Weather</th></tr>"
        "</thead>\n<tbody><tr><td>Monday</td><td>12</td><td>Rain</td></tr>\n"
        "<tr><td>Tuesday</td><td>15</td><td><p>Fog</p></td></tr></tbody></table>\n"
        '<p>The hills were close.<a epub:type="noteref" href="#fn1">1</a></p>'
        '<section epub:type="footnotes"><h3>Notes</h3><p id="fn1">Measured with a pedometer.</p></section>'
        "</section>",
        "bodymatter",
    ),
    Page(
        "text/press.xhtml",
        "<h1>Harbour Press</h1><p>Harbour Press makes books about the sea.</p>",
        "backmatter",
    ),
    Page(
        "text/endnotes.xhtml",
        '<section epub:type="endnotes" role="doc-endnotes"><h1>Endnotes</h1><ol>'
        '<li id="n1" epub:type="endnote"><p>The road is on old maps.</p></li></ol></section>',
        "backmatter",
    ),
    Page("text/thanks.xhtml", "<h1>Acknowledgements</h1><p>My thanks to the walkers of the coast.</p>"),
    Page("text/about.xhtml", "<h1>About the Author</h1><p>A. Writer lives by the sea.</p>"),
)
SALT_ROAD_TOC = (
    Toc(
        "Part One: The Coast",
        "text/part1.xhtml",
        (Toc("Chapter 1", "text/ch1.xhtml"), Toc("Chapter 2", "text/ch2.xhtml")),
    ),
    Toc("Part Two: The Hills", "text/part2.xhtml", (Toc("Chapter 3", "text/ch3.xhtml"),)),
    Toc("Endnotes", "text/endnotes.xhtml"),
    Toc("Acknowledgements", "text/thanks.xhtml"),
    Toc("About the Author", "text/about.xhtml"),
)


def salt_road(version: str = "3.0", language: str = "en") -> HandMadeEpub:
    """``The Salt Road``, as a publisher ships it: cover, title page, copyright, dedication and
    contents; two parts with a page each and three chapters (a poem in one, a table and footnotes
    in another); endnotes, a publisher's page, acknowledgements and about the author. EPUB 3
    marks what it can in landmarks, EPUB 2 in the guide; some pages say what they are only in
    ``epub:type`` on ``<body>``, some only by their title or content."""
    epub3 = version.startswith("3")
    return HandMadeEpub(
        pages=SALT_ROAD_PAGES,
        toc=SALT_ROAD_TOC,
        version=version,
        title="The Salt Road",
        language=language,
        guide=(
            (("copyright-page", "Copyright", "text/copyright.xhtml"),)
            if epub3
            else (
                ("cover", "Cover", "text/cover.xhtml"),
                ("copyright-page", "Copyright", "text/copyright.xhtml"),
                ("toc", "Contents", "text/contents.xhtml"),
                ("notes", "Endnotes", "text/endnotes.xhtml"),
                ("text", "Start", "text/ch1.xhtml"),
            )
        ),
        landmarks=(
            ("cover", "Cover", "text/cover.xhtml"),
            ("toc", "Contents", "text/contents.xhtml"),
            ("bodymatter", "Start", "text/part1.xhtml"),
        )
        if epub3
        else (),
        images=(Image("cover-image", "images/cover.png", png(16, 16)),),
        cover_meta="cover-image",
    )
