"""From markup to what is spoken: HTML (an EPUB's documents, Markdown rendered to HTML) and plain
text become :class:`Block` runs (headings, paragraphs, section breaks), and blocks become
chapters at their headings or breaks. Parsing is BeautifulSoup's with lxml, which copes with
the broken markup real books carry.

A ``<br/>`` is kept as :data:`LINE_BREAK` (a verse line ends there, with a short pause); a newline
in the markup is a space. A table is read row by row, the cells of a row as one sentence."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from bs4 import BeautifulSoup, Tag, XMLParsedAsHTMLWarning
from bs4.element import Comment, Declaration, Doctype, NavigableString, ProcessingInstruction

from ttsfarm.core.breaks import LINE_BREAK

HEADINGS: Final = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
BLOCK_TAGS: Final = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "dd", "div", "dl", "dt", "figcaption",
        "figure", "footer", "header", "li", "main", "ol", "p", "pre", "section", "ul",
    }
)  # fmt: skip
SKIPPED_TAGS: Final = frozenset({"script", "style", "head", "title", "img", "svg", "math", "rt", "rp", "nav"})
NOTE_TYPES: Final = frozenset(
    {
        "noteref", "footnote", "endnote", "rearnote", "footnotes", "endnotes", "rearnotes", "pagebreak",
        "annoref",
    }
)  # fmt: skip
"""``epub:type`` (or ``role="doc-..."``) values of things not read aloud: note markers, the notes
and their sections, page numbers."""
TABLE_CELLS: Final = frozenset({"td", "th"})
CELL_JOIN: Final = ", "
"""Between the cells of a table row, read as one sentence."""
CHAPTER_HEADING_LEVELS: Final = 3
"""Only h1-h3 start chapters; deeper headings are read as part of the chapter."""
UNTITLED_OPENING: Final = "Opening"
"""Title of text that comes before a book's first heading."""

_SPACE = re.compile(r"[ \t\r\f\v\u00a0\u200b]+")
_NOTE_MARK = re.compile(r"^[\s\d*\u2020\u2021\u00a7\[\]()]*$")
_SENTENCE_END = re.compile(r"[.!?\u2026:;][\"'\u201d\u2019)\]]*$")


@dataclass(frozen=True)
class Block:
    """A paragraph, heading or section break, in reading order."""

    text: str
    heading: int = 0
    """1-6 for a heading, 0 for body text."""
    rule: bool = False
    """A section break (``<hr>``, a line of ``* * *``): no text."""
    line: int = 0
    """Line of the source file where the block starts, where known (else 0)."""
    anchors: frozenset[str] = field(default_factory=frozenset)
    """``id`` values at or just before the block, to find where a table of contents points."""


@dataclass(frozen=True)
class Section:
    """A run of blocks under one heading (or between two breaks)."""

    title: str | None
    blocks: tuple[Block, ...]

    @property
    def paragraphs(self) -> list[Block]:
        return [b for b in self.blocks if b.text]


def clean(text: str) -> str:
    """Whitespace collapsed within lines; empty lines dropped."""
    lines = (" ".join(_SPACE.sub(" ", line).split()) for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def parse_html(markup: str | bytes) -> BeautifulSoup:
    """HTML or XHTML parsed leniently (lxml's HTML parser: books' XHTML is often not well formed)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
        return BeautifulSoup(markup, "lxml")


def html_blocks(markup: str | bytes) -> list[Block]:
    """The blocks of an HTML or XHTML document, notes and page numbers left out."""
    return soup_blocks(parse_html(markup))


def soup_blocks(soup: BeautifulSoup) -> list[Block]:
    """The blocks of a parsed document (:func:`parse_html`), which is read, not changed."""
    root = soup.body or soup
    walker = _Walker()
    walker.walk(root)
    walker.flush()
    return walker.blocks


class _Walker:
    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self._buffer: list[str] = []
        self._anchors: set[str] = set()

    def flush(self, heading: int = 0) -> None:
        # the only newlines left are the <br/>s: markup's own line ends were made spaces
        text = clean("".join(self._buffer)).replace("\n", LINE_BREAK)
        self._buffer.clear()
        if text:
            self.blocks.append(Block(text, heading=heading, anchors=frozenset(self._anchors)))
            self._anchors.clear()

    def walk(self, node: Tag) -> None:
        for child in node.children:
            if isinstance(child, Comment | Declaration | Doctype | ProcessingInstruction):
                continue
            if isinstance(child, NavigableString):
                self._buffer.append(re.sub(r"\s+", " ", str(child)))
            elif isinstance(child, Tag):
                self._element(child)

    def _element(self, tag: Tag) -> None:
        name = (tag.name or "").lower()
        if name in SKIPPED_TAGS or _is_note(tag):
            return
        ident = tag.get("id")
        if isinstance(ident, str):
            self._anchors.add(ident)
        if name == "br":
            self._buffer.append("\n")
        elif name == "hr":
            self.flush()
            self.blocks.append(Block("", rule=True, anchors=frozenset(self._anchors)))
            self._anchors.clear()
        elif name == "table":
            self.flush()
            self._table(tag)
        elif name in HEADINGS:
            self.flush()
            self.walk(tag)
            self.flush(heading=int(name[1]))
        elif name in BLOCK_TAGS:
            self.flush()
            self.walk(tag)
            self.flush()
        else:
            self.walk(tag)

    def _table(self, table: Tag) -> None:
        """Each row of ``table`` as one block: its cells joined into one sentence."""
        for caption in table.find_all("caption", recursive=False):
            self._element(caption)
            self.flush()
        for row in table.find_all("tr"):
            if row.find_parent("table") is not table:
                continue  # a row of a table within a cell: read with its cell
            cells = []
            for node in (row, *row.find_all(TABLE_CELLS, recursive=False)):
                ident = node.get("id")
                if isinstance(ident, str):
                    self._anchors.add(ident)
                if node is not row:
                    inner = _Walker()
                    inner.walk(node)
                    inner.flush()
                    self._anchors |= inner._anchors.union(*(block.anchors for block in inner.blocks))
                    cells.append(" ".join(" ".join(block.text for block in inner.blocks).split()))
            self._buffer.append(_joined([cell for cell in cells if cell]))
            self.flush()


def _joined(cells: Sequence[str]) -> str:
    """Cells as one sentence: commas between them, unless a cell ends a sentence itself."""
    text = cells[0] if cells else ""
    for cell in cells[1:]:
        text += (" " if _SENTENCE_END.search(text) else CELL_JOIN) + cell
    return text


def _is_note(tag: Tag) -> bool:
    kinds = str(tag.get("epub:type") or tag.get("role") or "").replace("doc-", "").split()
    if NOTE_TYPES.intersection(kinds):
        return True
    # A bare footnote marker: <sup><a href="#n1">1</a></sup>
    return tag.name == "sup" and tag.find("a") is not None and bool(_NOTE_MARK.match(tag.get_text()))


def sections(blocks: Sequence[Block]) -> tuple[str | None, list[Section]]:
    """Cut ``blocks`` into chapters: at headings of the top level used (h1-h3), or, with no
    headings, at section breaks. A lone top heading over several lower ones is the book's
    title, not a chapter; it is returned first. Headings within a chapter stay in its text."""
    levels = sorted({b.heading for b in blocks if 0 < b.heading <= CHAPTER_HEADING_LEVELS})
    book_title: str | None = None
    if levels:
        top = levels[0]
        tops = [b for b in blocks if b.heading == top]
        if len(tops) == 1 and len(levels) > 1 and blocks and blocks[0] is tops[0]:
            book_title = tops[0].text
            blocks = blocks[1:]
            levels = levels[1:]
        level = levels[0]

        def starts(block: Block) -> bool:
            return 0 < block.heading <= level
    else:

        def starts(block: Block) -> bool:
            return block.rule

    found: list[Section] = []
    current: list[Block] = []
    title: str | None = None
    for block in blocks:
        if starts(block):
            found.append(Section(title, tuple(current)))
            current = [block] if block.text else []
            title = block.text or None
        else:
            current.append(block)
    found.append(Section(title, tuple(current)))
    kept = [s for s in found if s.paragraphs]
    if kept and kept[0].title is None and levels:
        kept[0] = Section(UNTITLED_OPENING, kept[0].blocks)
    return book_title, kept


def text_blocks(lines: Iterable[str], heading: re.Pattern[str], rule: re.Pattern[str]) -> list[Block]:
    """Plain text: paragraphs at blank lines; a one-line paragraph matching ``heading`` is a
    heading, a line matching ``rule`` a section break."""
    blocks: list[Block] = []
    paragraph: list[str] = []
    start = 0

    def close() -> None:
        if paragraph:
            text = clean("\n".join(paragraph))
            level = 1 if len(paragraph) == 1 and heading.match(text) else 0
            blocks.append(Block(text, heading=level, line=start))
            paragraph.clear()

    for number, line in enumerate(lines, start=1):
        if not line.strip():
            close()
        elif rule.match(line):
            close()
            blocks.append(Block("", rule=True, line=number))
        else:
            if not paragraph:
                start = number
            paragraph.append(line)
    close()
    return blocks
