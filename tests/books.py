"""Small books that tests make themselves: an EPUB (with cover, front matter, a chapter split
over two files and two chapters in one file), a plain text and a Markdown book."""

from __future__ import annotations

import struct
import zlib
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
