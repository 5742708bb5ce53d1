"""A book to speak (:class:`Book`), and reading one from CSV: a header row, a ``text`` column,
rows grouped into chapters. EPUB, text and Markdown books are read in ``ttsfarm.audiobook.epub``
and ``ttsfarm.audiobook.text``; ``ttsfarm.audiobook.source`` picks the reader by extension.

Columns (names are matched without regard to case or surrounding spaces):

- ``text`` (required): what to speak. Each row is read as its own paragraph.
- ``chapter``: rows with the same value form one chapter, in order of first appearance. A row
  with an empty value continues the chapter of the row above it. Without the column, rows are
  grouped by ``title``; without either, every row is a chapter.
- ``title``: the chapter's title (the first one given in the chapter counts).
- ``voice`` / ``speaker``: the voice for that row; empty takes the default.

Other columns are ignored. Every problem is found here, before any audio is made.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Final

from ttsfarm.core.errors import InvalidInput
from ttsfarm.core.inputs import read_text_file
from ttsfarm.core.jobs import SynthesisOptions

TEXT_COLUMN: Final = "text"
CHAPTER_COLUMN: Final = "chapter"
TITLE_COLUMN: Final = "title"
VOICE_COLUMN: Final = "voice"
SPEAKER_COLUMN: Final = "speaker"

CSV_FIELD_LIMIT: Final = 64 * 1024 * 1024
"""Largest field the CSV reader accepts: a whole chapter may sit in one cell."""


@dataclass(frozen=True)
class Row:
    """One row of the book: its text, where it came from, and the voice that speaks it."""

    line: int
    """Where the row starts in its file: a line (a CSV's header is line 1), or for an EPUB the
    position of its document in the book's reading order (see :attr:`Book.position`)."""
    text: str
    options: SynthesisOptions


@dataclass(frozen=True)
class Chapter:
    """Rows that form one chapter, in file order."""

    number: int
    """1-based position in the book."""
    key: str
    """The ``chapter`` value (or title, or row number) that grouped these rows."""
    title: str
    rows: tuple[Row, ...]
    front_matter: bool = False
    """Not part of the story: front matter (cover, title page, contents, copyright) or, after
    the story, back matter (notes, index, acknowledgements, about the author); listed, but left
    out of the book unless picked by number."""

    @property
    def characters(self) -> int:
        return sum(len(row.text) for row in self.rows)


@dataclass(frozen=True)
class Cover:
    """The book's cover picture."""

    data: bytes
    mime: str
    """``image/jpeg`` or ``image/png``."""

    @property
    def extension(self) -> str:
        return "png" if self.mime == "image/png" else "jpg"


@dataclass(frozen=True)
class BookInfo:
    """What players show about a book besides its title."""

    author: str | None = None
    narrator: str | None = None
    year: str | None = None
    language: str | None = None
    cover: Cover | None = None


@dataclass(frozen=True)
class Book:
    """A book, checked and grouped into chapters."""

    title: str
    chapters: tuple[Chapter, ...]
    skipped_lines: tuple[int, ...] = ()
    """Lines left out because their text was empty (only with ``skip_empty``)."""
    info: BookInfo = BookInfo()
    position: str = "line"
    """What :attr:`Row.line` counts, for messages: ``line``, or ``document`` for an EPUB."""

    @property
    def rows(self) -> Iterator[Row]:
        for chapter in self.chapters:
            yield from chapter.rows


def read_book(
    path: str, defaults: SynthesisOptions, title: str | None = None, skip_empty: bool = False
) -> Book:
    """Read and check the book at ``path`` (``-`` for stdin); raises :class:`InvalidInput`."""
    content = read_text_file(path)
    csv.field_size_limit(max(csv.field_size_limit(), CSV_FIELD_LIMIT))
    records = list(_records(path, content))
    if not records:
        raise InvalidInput(f"{path} is empty: give a CSV with a header row and a 'text' column")
    header = records[0][1]
    columns = _columns(path, header)
    if len(records) == 1:
        raise InvalidInput(f"{path} has a header but no rows: add rows with text to speak")
    rows: list[tuple[Row, str, str]] = []
    empty: list[int] = []
    for line, fields in records[1:]:
        if len(fields) > len(header):
            raise InvalidInput(
                f"{path}, line {line}: {len(fields)} fields but the header has {len(header)}: "
                "put double quotes around text that holds commas"
            )
        values = {name: fields[i].strip() if i < len(fields) else "" for name, i in columns.items()}
        text = fields[columns[TEXT_COLUMN]] if columns[TEXT_COLUMN] < len(fields) else ""
        if not text.strip():
            empty.append(line)
            continue
        options = _options(path, line, values, defaults)
        rows.append((Row(line, text, options), values.get(CHAPTER_COLUMN, ""), values.get(TITLE_COLUMN, "")))
    if empty and not skip_empty:
        more = f" (and {len(empty) - 1} more rows)" if len(empty) > 1 else ""
        raise InvalidInput(
            f"{path}, line {empty[0]}: the text is empty{more}: fill it in, or pass --skip-empty to leave "
            "such rows out"
        )
    if not rows:
        raise InvalidInput(f"{path}: every row has empty text: there is nothing to speak")
    chapters = _chapters(rows, grouping=_grouping(columns))
    return Book(title or stem_title(path), chapters, tuple(empty))


def _records(path: str, content: str) -> Iterator[tuple[int, list[str]]]:
    """Non-blank CSV records with the line each one starts on."""
    reader = csv.reader(io.StringIO(content, newline=""), strict=True)
    start = 1
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise InvalidInput(f"{path}, line {reader.line_num}: not valid CSV ({error})") from None
        if any(f.strip() for f in fields):
            yield start, fields
        start = reader.line_num + 1


def _columns(path: str, header: list[str]) -> dict[str, int]:
    """Known column name -> position; the first of duplicate names wins."""
    columns: dict[str, int] = {}
    for position, name in enumerate(header):
        columns.setdefault(name.strip().lstrip("\ufeff").lower(), position)
    if TEXT_COLUMN not in columns:
        found = ", ".join(repr(h.strip()) for h in header[:8])
        raise InvalidInput(
            f"{path} has no 'text' column (the header row has {found}): name the column to speak 'text'"
        )
    known = (TEXT_COLUMN, CHAPTER_COLUMN, TITLE_COLUMN, VOICE_COLUMN, SPEAKER_COLUMN)
    return {name: columns[name] for name in known if name in columns}


def _options(path: str, line: int, values: dict[str, str], defaults: SynthesisOptions) -> SynthesisOptions:
    options = defaults
    if values.get(VOICE_COLUMN):
        options = replace(options, voice=values[VOICE_COLUMN], speaker=None)
    speaker = values.get(SPEAKER_COLUMN, "")
    if speaker:
        try:
            options = replace(options, speaker=int(speaker))
        except ValueError:
            raise InvalidInput(
                f"{path}, line {line}: speaker {speaker!r} is not a whole number: give the speaker id"
            ) from None
    return options


def _grouping(columns: dict[str, int]) -> str | None:
    if CHAPTER_COLUMN in columns:
        return CHAPTER_COLUMN
    return TITLE_COLUMN if TITLE_COLUMN in columns else None


def _chapters(rows: list[tuple[Row, str, str]], grouping: str | None) -> tuple[Chapter, ...]:
    order: list[str] = []
    members: dict[str, list[Row]] = {}
    titles: dict[str, str] = {}
    previous = ""
    for row, chapter, title in rows:
        if grouping is None:
            key = str(row.line)
        else:
            key = (chapter if grouping == CHAPTER_COLUMN else title) or previous
        previous = key
        if key not in members:
            order.append(key)
            members[key] = []
        members[key].append(row)
        if title and not titles.get(key):
            titles[key] = title
    return tuple(
        Chapter(number, key, titles.get(key) or _default_title(number, key, grouping), tuple(members[key]))
        for number, key in enumerate(order, start=1)
    )


def _default_title(number: int, key: str, grouping: str | None) -> str:
    return f"Chapter {key}" if grouping == CHAPTER_COLUMN and key else f"Chapter {number}"


def stem_title(path: str) -> str:
    """A title from the file name, for books that name none."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return stem if path != "-" and stem else "Audiobook"
