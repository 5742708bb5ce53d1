"""Opening a book of any kind the CLI takes, picking chapters and setting what players show.

The reader is picked by extension: ``.csv`` (``ttsfarm.audiobook.book``), ``.epub``
(``ttsfarm.audiobook.epub``), ``.txt``, ``.md`` (``ttsfarm.audiobook.text``).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Final

from ttsfarm.audiobook.book import Book, BookInfo, Chapter, Cover, read_book
from ttsfarm.core.errors import InvalidInput
from ttsfarm.core.jobs import SynthesisOptions

BOOK_EXTENSIONS: Final = (".csv", ".epub", ".txt", ".md", ".markdown")
COVER_SIGNATURES: Final = ((b"\xff\xd8\xff", "image/jpeg"), (b"\x89PNG\r\n\x1a\n", "image/png"))
COVER_MAX_BYTES: Final = 20 * 1024 * 1024
SPEECH_CHARS_PER_SECOND: Final = 15.0
"""Characters the default voice speaks per second, for estimates before synthesis."""
_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d*)\s*)?$")


def open_book(
    path: str, defaults: SynthesisOptions, title: str | None = None, skip_empty: bool = False
) -> Book:
    """Read the book at ``path`` with the reader its extension names."""
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return read_book(path, defaults, title, skip_empty)
    if suffix == ".epub":
        from ttsfarm.audiobook.epub import read_epub_book

        return read_epub_book(path, defaults, title)
    if suffix in (".txt", ".md", ".markdown"):
        from ttsfarm.audiobook.text import read_text_book

        return read_text_book(path, defaults, title)
    raise InvalidInput(
        f"cannot tell what kind of book {path} is: give a file ending in {', '.join(BOOK_EXTENSIONS)}"
    )


def parse_selection(spec: str, chapters: int) -> list[int]:
    """Chapter numbers from ``1,3,5-7`` (``9-`` runs to the last), in book order."""
    picked: set[int] = set()
    for piece in spec.split(","):
        match = _RANGE.match(piece)
        if match is None:
            raise InvalidInput(
                f"--chapters {spec!r}: {piece.strip()!r} is not a chapter number or range such as 3 or 5-7"
            )
        first = int(match[1])
        last = first if match[2] is None else int(match[2]) if match[2] else chapters
        if not 1 <= first <= last <= chapters:
            raise InvalidInput(
                f"--chapters {spec!r}: the book has chapters 1 to {chapters} (see --list-chapters)"
            )
        picked.update(range(first, last + 1))
    return sorted(picked)


def select_chapters(book: Book, spec: str | None) -> Book:
    """The chapters picked by ``spec`` (numbers as :func:`chapter_lines` shows them), else all
    but the front matter; renumbered from 1."""
    if spec:
        numbers = set(parse_selection(spec, len(book.chapters)))
        kept = [c for c in book.chapters if c.number in numbers]
    else:
        kept = [c for c in book.chapters if not c.front_matter]
    if not kept:
        raise InvalidInput(
            "every chapter found is front matter: pick chapters with --chapters (see --list-chapters)"
        )
    renumbered = tuple(replace(c, number=n) for n, c in enumerate(kept, start=1))
    return replace(book, chapters=renumbered)


def with_info(
    book: Book,
    author: str | None = None,
    narrator: str | None = None,
    cover: Path | None = None,
) -> Book:
    """``book`` with what was given on the command line in place of what the file said."""
    info = book.info
    info = BookInfo(
        author=author or info.author,
        narrator=narrator or info.narrator,
        year=info.year,
        language=info.language,
        cover=read_cover(cover) if cover is not None else info.cover,
    )
    return replace(book, info=info)


def read_cover(path: Path) -> Cover:
    """A JPEG or PNG picture from ``path``; raises :class:`InvalidInput` for anything else."""
    try:
        with path.open("rb") as handle:
            data = handle.read(COVER_MAX_BYTES + 1)
    except FileNotFoundError:
        raise InvalidInput(f"cover {path} does not exist") from None
    except OSError as error:
        raise InvalidInput(f"cannot read cover {path}: {error.strerror}") from None
    if len(data) > COVER_MAX_BYTES:
        raise InvalidInput(f"cover {path} is over {COVER_MAX_BYTES // 2**20} MiB: give a smaller picture")
    for signature, mime in COVER_SIGNATURES:
        if data.startswith(signature):
            return Cover(data, mime)
    raise InvalidInput(f"cover {path} is not a JPEG or PNG picture: convert it to one of those")


def chapter_lines(book: Book) -> list[str]:
    """What ``--list-chapters`` prints: one line per chapter found."""
    width = len(str(len(book.chapters)))
    lines = []
    story_begun = False  # what is left out after the story began is back matter
    for chapter in book.chapters:
        lines.append(_chapter_line(chapter, width, "back" if story_begun else "front"))
        story_begun = story_begun or not chapter.front_matter
    return lines


def _chapter_line(chapter: Chapter, width: int, matter: str) -> str:
    chars = chapter.characters
    seconds = chars / SPEECH_CHARS_PER_SECOND
    length = f"about {seconds / 60:.0f} min" if seconds >= 90 else f"about {seconds:.0f} s"
    note = f"  ({matter} matter: left out unless picked)" if chapter.front_matter else ""
    return f"{chapter.number:>{width}}  {chapter.title}  [{chars:,} characters, {length}]{note}"
