"""Reading a book from plain text (``.txt``) or Markdown (``.md``).

Chapters start at headings: in Markdown the top level of ``#`` headings used (a single ``#``
heading over ``##`` ones is the book's title), in text a line of its own such as ``Chapter 3``,
``CHAPTER IV. The Storm``, ``Prologue`` or ``Part Two``. Without headings, a line of ``***``,
``* * *``, ``---`` or ``===`` separates chapters; without either the whole file is one chapter.
Each paragraph (text between blank lines) is read as its own row; a heading is read too.
"""

from __future__ import annotations

import re
from typing import Final

from markdown_it import MarkdownIt
from markdown_it.token import Token

from ttsfarm.audiobook.book import Book, Chapter, Row, stem_title
from ttsfarm.audiobook.html import Block, Section, clean, html_blocks, sections, text_blocks
from ttsfarm.core.errors import InvalidInput
from ttsfarm.core.inputs import read_text_file
from ttsfarm.core.jobs import SynthesisOptions

_NUMBER: Final = (
    r"(?:\d+|(?=[ivxlcdm])m{0,3}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"
    r"fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|"
    r"(?:twenty|thirty|forty|fifty)-(?:one|two|three|four|five|six|seven|eight|nine))"
)
TEXT_HEADING: Final = re.compile(
    rf"^(?:(?:chapter|part|book)\s+{_NUMBER}\b"
    r"|(?:prologue|epilogue|preface|foreword|introduction|afterword|interlude|appendix)\b)"
    r"(?:[.:\s].{0,70})?$",
    re.IGNORECASE,
)
"""A line of its own that starts a chapter: ``Chapter 3``, ``PART TWO: The Sea``, ``Book IV.``,
``Prologue``; not ``Part of it was lost.`` (a word after Chapter, Part or Book must be a number)."""
SEPARATOR: Final = re.compile(r"^\s*(?:([*#=~_-])\s*)(?:\1\s*){2,}$")
"""A line of three or more of one of ``* # = ~ _ -`` (spaces allowed between them)."""
_SKIPPED_TOKENS: Final = frozenset({"fence", "code_block"})


def read_text_book(path: str, defaults: SynthesisOptions, title: str | None = None) -> Book:
    """Read a ``.txt`` (``markdown=False``) or ``.md`` book; raises :class:`InvalidInput`."""
    content = read_text_file(path)
    markdown = path.lower().endswith((".md", ".markdown"))
    blocks = (
        markdown_blocks(content) if markdown else text_blocks(content.splitlines(), TEXT_HEADING, SEPARATOR)
    )
    book_title, found = sections(blocks)
    if not found:
        raise InvalidInput(f"{path} has no text to speak")
    chapters = tuple(_chapter(number, section, defaults) for number, section in enumerate(found, start=1))
    return Book(title or book_title or stem_title(path), chapters)


def _chapter(number: int, section: Section, defaults: SynthesisOptions) -> Chapter:
    rows = tuple(Row(block.line, block.text, defaults) for block in section.paragraphs)
    return Chapter(number, str(number), " ".join((section.title or f"Chapter {number}").split()), rows)


def markdown_blocks(content: str) -> list[Block]:
    """Markdown (CommonMark) as blocks, inline markup reduced to its words; code is not read."""
    parser = MarkdownIt("commonmark")
    tokens = parser.parse(content)
    blocks: list[Block] = []
    heading = 0
    for token in tokens:
        line = token.map[0] + 1 if token.map else 0
        if token.type == "heading_open":
            heading = int(token.tag[1])
        elif token.type == "heading_close":
            heading = 0
        elif token.type == "hr":
            blocks.append(Block("", rule=True, line=line))
        elif token.type == "inline":
            text = _inline_text(parser, token)
            if text:
                blocks.append(Block(text, heading=heading, line=line))
        elif token.type == "html_block":
            blocks += [Block(b.text, b.heading, b.rule, line) for b in html_blocks(token.content)]
        elif token.type in _SKIPPED_TOKENS:
            continue
    return blocks


def _inline_text(parser: MarkdownIt, token: Token) -> str:
    html = parser.renderer.render([token], parser.options, {})
    if "<" not in html and "&" not in html:
        return clean(html)
    return "\n".join(b.text for b in html_blocks(f"<p>{html}</p>"))
