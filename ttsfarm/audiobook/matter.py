"""What in a book is not part of the story: front matter (cover, title page, contents, copyright,
dedication) and back matter (notes, index, bibliography, acknowledgements, about the author).

Books say so in their markup: EPUB 2's guide (``<reference type="copyright-page">``), EPUB 3's
landmarks and ``epub:type`` on a document's ``<body>`` or its opening ``<section>``. Where they
say nothing, the title says it (``Acknowledgements``, ``About the Author``), or the content: a
short page that opens with the book's own title is its title page. Such chapters are listed but
not read unless picked (:attr:`ttsfarm.audiobook.book.Chapter.front_matter`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from bs4 import BeautifulSoup, Tag

from ttsfarm.audiobook.html import Block

LEFT_OUT_TYPES: Final = frozenset(
    {
        # front matter
        "cover", "title-page", "titlepage", "toc", "copyright-page", "copyright", "frontmatter",
        "halftitlepage", "halftitle", "imprint", "colophon", "dedication", "epigraph", "loi", "lot",
        "lov", "other.ms-coverimage-standard", "other.ms-coverimage", "other.ms-titlepage", "imprimatur",
        "contributors", "other-credits", "errata", "seriespage", "landmarks", "page-list",
        # back matter
        "backmatter", "bibliography", "index", "glossary", "endnotes", "rearnotes", "footnotes", "notes",
        "acknowledgements", "acknowledgments",
    }
)  # fmt: skip
"""Guide types (EPUB 2), landmark and ``epub:type`` values (EPUB 3 structural semantics) of
front and back matter. An appendix, afterword or epilogue is read: it belongs to the text."""
STORY_TYPES: Final = frozenset(
    {"bodymatter", "chapter", "part", "prologue", "epilogue", "preface", "foreword", "introduction"}
)
"""``epub:type`` values that say a document is to be read, whatever its title."""

LEFT_OUT_TITLES: Final = frozenset(
    {
        "cover", "title page", "half title", "contents", "table of contents", "copyright",
        "copyright page", "dedication", "notes", "endnotes", "footnotes", "notes on the text", "index",
        "bibliography", "references", "works cited", "further reading", "glossary", "acknowledgements",
        "acknowledgments", "about the author", "about the authors", "about the illustrator",
        "about the translator", "about the publisher", "colophon", "a note on the type",
        "a note about the type", "list of illustrations",
    }
)  # fmt: skip
"""Chapter titles (compared without case or punctuation) of front and back matter."""
LEFT_OUT_TITLE_STARTS: Final = ("also by ", "praise for ", "by the same author", "other books by ")
TITLE_PAGE_MAX_CHARS: Final = 400
"""A document this short that opens with the book's title is its title page, not chapter 1."""
SECTION_TAGS: Final = frozenset({"section", "div", "article", "main"})
SECTION_DEPTH: Final = 3
"""How deep, through wrappers that open the body, ``epub:type`` is looked for."""

_WORDS = re.compile(r"[^\w]+")


def typed_matter(soup: BeautifulSoup) -> bool | None:
    """What the document's ``<body>`` or the section it opens with says in ``epub:type``:
    ``True`` for front or back matter, ``False`` for the story, ``None`` when it says neither.
    The soup must come from the document's own bytes (ebooklib's ``get_content()`` drops the
    attributes of ``<body>``)."""
    kinds: set[str] = set()
    node: Tag | None = soup.body
    for _ in range(SECTION_DEPTH + 1):
        if node is None:
            break
        kinds |= set(str(node.get("epub:type") or "").lower().split())
        kinds |= {r.removeprefix("doc-") for r in str(node.get("role") or "").lower().split()}
        node = _opening_section(node)
    if kinds & LEFT_OUT_TYPES:  # <body epub:type="bodymatter"><section epub:type="endnotes">
        return True
    return False if kinds & STORY_TYPES else None


def _opening_section(node: Tag) -> Tag | None:
    """The element ``node`` opens with, if it is a section (text before it means it is not)."""
    for child in node.children:
        if isinstance(child, Tag):
            return child if (child.name or "").lower() in SECTION_TAGS else None
        if str(child).strip():
            return None
    return None


def is_left_out_type(value: str) -> bool:
    """Whether a guide ``type`` or landmark ``epub:type`` names front or back matter."""
    return bool(set(value.lower().split()) & LEFT_OUT_TYPES)


def titled_matter(title: str | None) -> bool:
    """Whether a chapter's title names front or back matter (``Notes``, ``About the Author``)."""
    if not title:
        return False
    words = _plain(title)
    return words in LEFT_OUT_TITLES or words.startswith(LEFT_OUT_TITLE_STARTS)


def is_title_page(blocks: Sequence[Block], book_title: str) -> bool:
    """Whether a document is the book's title page: short, and opening with the book's title
    (or its main title, before a colon)."""
    texts = [block.text for block in blocks if block.text]
    if not texts or sum(len(text) for text in texts) > TITLE_PAGE_MAX_CHARS:
        return False
    titles = {_plain(book_title), _plain(book_title.split(":", 1)[0])}
    return _plain(texts[0]) in titles - {""}


def _plain(text: str) -> str:
    """Lower case words with single spaces, punctuation gone."""
    return " ".join(_WORDS.sub(" ", text.casefold()).split())
