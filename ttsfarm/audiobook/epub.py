"""Reading a book from an EPUB (2 or 3) with ebooklib.

Chapters follow the book's reading order (its spine). A document the table of contents points
at starts a chapter with the title given there; one it does not name continues the chapter
before it (books are often split into several files per chapter); a document holding several
entries of the contents is cut where each one points. Without a usable table of contents,
every document is a chapter titled by its first heading. In a nested table of contents, a part
whose page holds little more than its title is no chapter of its own: its page is read at the
start of the part's first chapter, whose title it leads (``Part One: The Coast — Chapter 1``).
Front and back matter (:mod:`ttsfarm.audiobook.matter`) is found and marked, so it is listed but
not read unless picked. Title, author, language, date and cover come from the EPUB's metadata.
"""

from __future__ import annotations

import posixpath
import warnings
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote

import ebooklib
from bs4 import BeautifulSoup
from ebooklib import epub

from ttsfarm.audiobook.book import Book, BookInfo, Chapter, Cover, Row, stem_title
from ttsfarm.audiobook.html import Block, parse_html, soup_blocks
from ttsfarm.audiobook.matter import is_left_out_type, is_title_page, titled_matter, typed_matter
from ttsfarm.core.errors import InvalidInput
from ttsfarm.core.jobs import SynthesisOptions

COVER_TYPES: Final = {"image/jpeg": "image/jpeg", "image/jpg": "image/jpeg", "image/png": "image/png"}
PART_PAGE_MAX_CHARS: Final = 400
"""A part's page with at most this much text (its title, perhaps an epigraph) leads the part's
first chapter; a longer one (an introduction to the part) is a chapter of its own."""
UNTITLED_WORDS: Final = 6
"""Words of its text that title a page of front or back matter without a title."""
TITLE_JOIN: Final = " \u2014 "
"""Between a part's title and its first chapter's: ``Part One: The Coast — Chapter 1``."""


@dataclass(frozen=True)
class _Entry:
    """One entry of the table of contents, by file and fragment."""

    title: str
    file: str
    fragment: str | None
    part: bool = False
    """Whether entries are nested under it: a part (or book) of the book."""
    leads: tuple[str, ...] = ()
    """Titles of the parts without a page of their own that this entry opens."""


@dataclass
class _Draft:
    """A chapter as it is gathered: title, whether it is front or back matter, where it starts."""

    title: str | None
    left_out: bool
    position: int
    blocks: list[Block] = field(default_factory=list)

    @property
    def readable(self) -> bool:
        return any(block.text for block in self.blocks)


def read_epub_book(path: str, defaults: SynthesisOptions, title: str | None = None) -> Book:
    """Read and check the EPUB at ``path``; raises :class:`InvalidInput`."""
    book = _open(path)
    own_title = _metadata(book, "title")
    drafts = [d for d in _drafts(book, own_title or title or "") if d.readable]
    found = tuple(_chapter(number, draft, defaults) for number, draft in enumerate(drafts, start=1))
    if not found:
        raise InvalidInput(f"{path} holds no text to speak (a book of pictures, or its text is in images)")
    return Book(title or own_title or stem_title(path), found, info=_info(book), position="document")


def _drafts(book: Any, book_title: str) -> list[_Draft]:
    """The book's chapters in reading order, front and back matter marked."""
    entries = list(_toc_entries(book.toc, _toc_base(book)))
    titled = {entry.file for entry in entries}
    marked = _marked_files(book)
    guide_titles = {_normal(ref["href"]): ref.get("title") for ref in book.guide if ref.get("title")}
    documents = list(_spine_documents(book))
    drafts: list[_Draft] = []
    parts: list[_Draft] = []  # part pages waiting for the chapter they lead
    for position, item in enumerate(documents, start=1):
        name = _normal(item.get_name())
        soup = parse_html(_raw(item))  # once: books' documents can be long
        blocks = soup_blocks(soup)
        typed = True if name in marked else typed_matter(soup)
        heading = next((b.text for b in blocks if b.heading), None) or guide_titles.get(name)
        document_left_out = (
            typed
            if typed is not None
            else titled_matter(heading) or (position < len(documents) and is_title_page(blocks, book_title))
        )
        for at, piece in _cut(blocks, [entry for entry in entries if entry.file == name]):
            if drafts and not drafts[-1].readable:
                drafts.pop()  # a document with nothing to read (a cover picture) starts nothing
            left_out = document_left_out or (typed is None and any(titled_matter(e.title) for e in at))
            piece_title = _title(at)
            if not left_out and at and all(e.part for e in at) and _is_part_page(piece):
                parts.append(_Draft(piece_title, False, position, list(piece)))
            elif not left_out and parts:  # the part's page and title lead its first chapter
                titles = [d.title for d in parts if d.title] + ([piece_title] if piece_title else [])
                lead = [block for draft in parts for block in draft.blocks]
                drafts.append(_Draft(TITLE_JOIN.join(titles) or None, False, parts[0].position, lead + piece))
                parts.clear()
            elif at or not titled or not drafts or left_out or drafts[-1].left_out:
                # front and back matter: each document on its own, to be picked or not
                piece_heading = next((b.text for b in piece if b.heading), None) or guide_titles.get(name)
                drafts.append(_Draft(piece_title or piece_heading, left_out, position, list(piece)))
            else:
                drafts[-1].blocks.extend(piece)
    return drafts + parts  # a part page no chapter followed is read on its own


def _open(path: str) -> Any:
    if Path(path).is_file() and not zipfile.is_zipfile(path):
        raise InvalidInput(f"{path} is not an EPUB (not a zip archive): give an .epub file")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ebooklib warns about its own future defaults
            return epub.read_epub(path, {"ignore_ncx": True})
    except FileNotFoundError:
        raise InvalidInput(f"file {path} does not exist") from None
    except IsADirectoryError:
        raise InvalidInput(f"{path} is a folder, not an EPUB file") from None
    except zipfile.BadZipFile:
        raise InvalidInput(f"{path} is not an EPUB (not a zip archive): give an .epub file") from None
    except (epub.EpubException, KeyError, AttributeError, IndexError, ValueError) as error:
        raise InvalidInput(f"{path} is not a readable EPUB ({error}): check the file") from None


def _chapter(number: int, draft: _Draft, defaults: SynthesisOptions) -> Chapter:
    rows = tuple(Row(draft.position, block.text, defaults) for block in draft.blocks if block.text)
    title = draft.title or (_opening(rows[0].text) if draft.left_out else f"Chapter {number}")
    return Chapter(number, str(number), " ".join(title.split()), rows, draft.left_out)


def _opening(text: str) -> str:
    """A title for an untitled page of front or back matter (a dedication): its first words,
    so that it is not taken for a chapter of the story."""
    words = text.split()
    return " ".join(words[:UNTITLED_WORDS]) + (" \u2026" if len(words) > UNTITLED_WORDS else "")


def _raw(item: Any) -> bytes | str:
    """A document as the book holds it: ebooklib's ``get_content()`` rebuilds it and drops the
    attributes of ``<body>`` (where ``epub:type`` says what the document is)."""
    content = getattr(item, "content", None)
    return content if isinstance(content, bytes | str) and content else item.get_content()


def _spine_documents(book: Any) -> Iterator[Any]:
    for idref, _ in book.spine:
        item = book.get_item_with_id(idref)
        if (
            item is not None
            and item.get_type() == ebooklib.ITEM_DOCUMENT
            and not isinstance(item, epub.EpubNav)
        ):
            yield item


def _normal(href: str) -> str:
    return posixpath.normpath(unquote(href.split("#", 1)[0]))


def _toc_base(book: Any) -> str:
    """The folder the table of contents' links are relative to: ebooklib resolves the EPUB 3
    ``nav``'s, but leaves the NCX's relative to the NCX."""
    if any(isinstance(item, epub.EpubNav) for item in book.get_items()):
        return ""
    ncx = next(iter(book.get_items_of_type(ebooklib.ITEM_NAVIGATION)), None)
    return posixpath.dirname(ncx.get_name()) if ncx is not None else ""


def _toc_entries(toc: Any, base: str, leads: tuple[str, ...] = ()) -> Iterator[_Entry]:
    """Entries of the table of contents in order, nested ones included; a part without a link
    of its own leads the first entry under it."""
    for node in toc:
        if isinstance(node, tuple):
            section, children = node
            title = _words(section.title)
            if getattr(section, "href", None):
                yield _entry(title, section.href, base, part=bool(children), leads=leads)
                yield from _toc_entries(children, base)
            else:
                yield from _toc_entries(children, base, (*leads, title) if title else leads)
            leads = ()
        elif isinstance(node, epub.Link):
            yield _entry(node.title, node.href, base, leads=leads)
            leads = ()


def _entry(title: str, href: str, base: str, part: bool = False, leads: tuple[str, ...] = ()) -> _Entry:
    file, _, fragment = href.partition("#")
    return _Entry(_words(title), _normal(posixpath.join(base, file)), fragment or None, part, leads)


def _words(text: str | None) -> str:
    return " ".join((text or "").split())


def _title(entries: Sequence[_Entry]) -> str | None:
    """The title of a chapter that these entries (several may point at one place) start."""
    titles = [title for entry in entries for title in (*entry.leads, entry.title) if title]
    return TITLE_JOIN.join(titles) or None


def _is_part_page(blocks: Sequence[Block]) -> bool:
    return sum(len(block.text) for block in blocks) <= PART_PAGE_MAX_CHARS


def _cut(blocks: list[Block], entries: Sequence[_Entry]) -> Iterator[tuple[tuple[_Entry, ...], list[Block]]]:
    """A document's blocks cut where its table-of-contents entries point, each piece with the
    entries that start it (none for text before the first anchor, which continues what came
    before)."""
    starts: dict[int, list[_Entry]] = {0: []}
    for entry in entries:
        at = (
            0
            if entry.fragment is None
            else next((n for n, block in enumerate(blocks) if entry.fragment in block.anchors), None)
        )
        if at is not None:
            starts.setdefault(at, []).append(entry)
    cuts = sorted(starts)
    for n, at in enumerate(cuts):
        end = cuts[n + 1] if n + 1 < len(cuts) else len(blocks)
        yield tuple(starts[at]), blocks[at:end]


def _marked_files(book: Any) -> set[str]:
    """Documents the book marks as front or back matter: the guide (EPUB 2), the landmarks
    (EPUB 3), ``linear="no"`` in the spine, the cover page and the contents."""
    marked = {_normal(ref["href"]) for ref in book.guide if is_left_out_type(str(ref.get("type") or ""))}
    for idref, linear in book.spine:
        item = book.get_item_with_id(idref)
        if item is not None and (linear == "no" or isinstance(item, epub.EpubCoverHtml)):
            marked.add(_normal(item.get_name()))
    for item in book.get_items_of_type(ebooklib.ITEM_NAVIGATION):
        marked.add(_normal(item.get_name()))
    for nav in (i for i in book.get_items() if isinstance(i, epub.EpubNav)):
        base = posixpath.dirname(nav.get_name())
        for landmarks in parse_html(_raw(nav)).find_all("nav", attrs={"epub:type": "landmarks"}):
            for link in landmarks.find_all("a"):
                if is_left_out_type(str(link.get("epub:type") or "")) and link.get("href"):
                    marked.add(_normal(posixpath.join(base, str(link["href"]))))
    return marked


def _metadata(book: Any, name: str) -> str | None:
    for value, _ in book.get_metadata("DC", name):
        if value and str(value).strip():
            return " ".join(str(value).split())
    return None


def _info(book: Any) -> BookInfo:
    authors = [" ".join(str(v).split()) for v, _ in book.get_metadata("DC", "creator") if v]
    date = _metadata(book, "date")
    return BookInfo(
        author=", ".join(authors) or None,
        year=date[:4] if date and date[:4].isdigit() else None,
        language=_metadata(book, "language"),
        cover=_cover(book),
    )


def _cover(book: Any) -> Cover | None:
    """The cover image: the item marked ``cover-image`` (EPUB 3), the item ``<meta name="cover">``
    names (EPUB 2), or the first image of the guide's cover page; ``None`` if there is none in
    JPEG or PNG."""
    candidates = list(book.get_items_of_type(ebooklib.ITEM_COVER))
    # ebooklib files a prefix-less <meta name="cover"> under ('OPF', 'meta') in most OPFs, and
    # under ('OPF', 'cover') in some: both are looked at
    metas = [a for _, a in book.get_metadata("OPF", "meta") if a.get("name") == "cover"]
    for attributes in [*metas, *(a for _, a in book.get_metadata("OPF", "cover"))]:
        item = book.get_item_with_id(attributes.get("content", ""))
        if item is not None:
            candidates.append(item)
    candidates.extend(_guide_cover_images(book))
    for item in candidates:
        mime = COVER_TYPES.get(str(item.media_type).lower())
        content = item.get_content()
        if mime and content:
            return Cover(content, mime)
    return None


def _guide_cover_images(book: Any) -> Iterator[Any]:
    """The images of the page the guide names as the cover (``<reference type="cover">``)."""
    for reference in getattr(book, "guide", []) or []:
        if str(reference.get("type", "")).lower() != "cover":
            continue
        page_href = _normal(str(reference.get("href", "")))
        page = book.get_item_with_href(page_href)
        if page is None:
            continue
        if COVER_TYPES.get(str(page.media_type).lower()):  # the guide names the image itself
            yield page
            continue
        soup = BeautifulSoup(page.get_content(), "html.parser")
        for tag in soup.find_all(["img", "image"]):
            source = tag.get("src") or tag.get("xlink:href") or tag.get("href")
            if source:
                href = _normal(posixpath.join(posixpath.dirname(page_href), str(source)))
                image = book.get_item_with_href(href)
                if image is not None:
                    yield image
