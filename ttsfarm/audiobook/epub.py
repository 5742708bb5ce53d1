"""Reading a book from an EPUB (2 or 3) with ebooklib.

Chapters follow the book's reading order (its spine). A document the table of contents points
at starts a chapter with the title given there; one it does not name continues the chapter
before it (books are often split into several files per chapter); a document holding several
entries of the contents is cut where each one points. Without a usable table of contents,
every document is a chapter titled by its first heading. Cover, title page, contents, copyright
and other front matter (from the spine's ``linear="no"``, the guide or landmarks, ``epub:type``)
are found and marked, so they are listed but not read unless picked. Title, author, language,
date and cover come from the EPUB's metadata.
"""

from __future__ import annotations

import posixpath
import warnings
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote

import ebooklib
from bs4 import BeautifulSoup
from ebooklib import epub

from ttsfarm.audiobook.book import Book, BookInfo, Chapter, Cover, Row, stem_title
from ttsfarm.audiobook.html import Block, parse_html, soup_blocks
from ttsfarm.errors import InvalidInput
from ttsfarm.jobs import SynthesisOptions

FRONT_MATTER_TYPES: Final = frozenset(
    {
        "cover", "title-page", "titlepage", "toc", "copyright-page", "copyright", "frontmatter",
        "halftitlepage", "halftitle", "imprint", "colophon", "dedication", "epigraph", "loi", "lot",
        "other.ms-coverimage-standard", "imprimatur", "contributors", "bibliography", "index",
        "backmatter",
    }
)  # fmt: skip
"""Guide and ``epub:type`` values of documents that are not part of the story."""
COVER_TYPES: Final = {"image/jpeg": "image/jpeg", "image/jpg": "image/jpeg", "image/png": "image/png"}


@dataclass(frozen=True)
class _Entry:
    """One entry of the table of contents, by file and fragment."""

    title: str
    file: str
    fragment: str | None


def read_epub_book(path: str, defaults: SynthesisOptions, title: str | None = None) -> Book:
    """Read and check the EPUB at ``path``; raises :class:`InvalidInput`."""
    book = _open(path)
    entries = list(_toc_entries(book.toc))
    titled = {entry.file for entry in entries}
    front = _front_files(book)
    guide_titles = {_normal(ref["href"]): ref.get("title") for ref in book.guide if ref.get("title")}
    chapters: list[tuple[str | None, bool, int, list[Block]]] = []
    for position, item in enumerate(_spine_documents(book), start=1):
        name = _normal(item.get_name())
        soup = parse_html(item.get_content())  # once: books' documents can be long
        blocks = soup_blocks(soup)
        marked_front = name in front or _typed_front(soup)
        here = [entry for entry in entries if entry.file == name]
        for piece_title, piece in _cut(blocks, here):
            if chapters and not any(b.text for b in chapters[-1][3]):
                chapters.pop()  # a document with nothing to read (a cover picture) starts nothing
            starts = piece_title is not None or not titled or not chapters
            if starts or marked_front != chapters[-1][1]:
                heading = next((b.text for b in piece if b.heading), None) or guide_titles.get(name)
                chapters.append((piece_title or heading, marked_front, position, list(piece)))
            else:
                chapters[-1][3].extend(piece)
    found = tuple(
        _chapter(number, chapter_title, is_front, position, blocks, defaults)
        for number, (chapter_title, is_front, position, blocks) in enumerate(
            (c for c in chapters if any(b.text for b in c[3])),
            start=1,
        )
    )
    if not found:
        raise InvalidInput(f"{path} holds no text to speak (a book of pictures, or its text is in images)")
    return Book(
        title or _metadata(book, "title") or stem_title(path), found, info=_info(book), position="document"
    )


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


def _chapter(
    number: int,
    title: str | None,
    front: bool,
    position: int,
    blocks: Sequence[Block],
    defaults: SynthesisOptions,
) -> Chapter:
    rows = tuple(Row(position, block.text, defaults) for block in blocks if block.text)
    return Chapter(number, str(number), " ".join((title or f"Chapter {number}").split()), rows, front)


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


def _toc_entries(toc: Any) -> Iterator[_Entry]:
    """Entries of the table of contents in order, nested ones included."""
    for node in toc:
        if isinstance(node, tuple):
            section, children = node
            if getattr(section, "href", None):
                yield _entry(section.title, section.href)
            yield from _toc_entries(children)
        elif isinstance(node, epub.Link):
            yield _entry(node.title, node.href)


def _entry(title: str, href: str) -> _Entry:
    file, _, fragment = href.partition("#")
    return _Entry(" ".join((title or "").split()), _normal(file), fragment or None)


def _cut(blocks: list[Block], entries: Sequence[_Entry]) -> Iterator[tuple[str | None, list[Block]]]:
    """A document's blocks cut where its table-of-contents entries point; the first piece has
    the title of an entry for the whole file (or for its first anchor), else ``None``."""
    if not entries:
        yield None, blocks
        return
    starts: dict[int, str] = {}
    for entry in entries:
        at = (
            0
            if entry.fragment is None
            else next((n for n, block in enumerate(blocks) if entry.fragment in block.anchors), None)
        )
        if at is not None:
            starts.setdefault(at, entry.title)
    if 0 not in starts:
        starts[0] = ""  # text before the first anchor continues what came before
    cuts = sorted(starts)
    for n, at in enumerate(cuts):
        end = cuts[n + 1] if n + 1 < len(cuts) else len(blocks)
        yield (starts[at] or None), blocks[at:end]


def _front_files(book: Any) -> set[str]:
    front = {
        _normal(ref["href"]) for ref in book.guide if str(ref.get("type", "")).lower() in FRONT_MATTER_TYPES
    }
    for idref, linear in book.spine:
        item = book.get_item_with_id(idref)
        if item is not None and (linear == "no" or isinstance(item, epub.EpubCoverHtml)):
            front.add(_normal(item.get_name()))
    for item in book.get_items_of_type(ebooklib.ITEM_NAVIGATION):
        front.add(_normal(item.get_name()))
    nav = next((i for i in book.get_items() if isinstance(i, epub.EpubNav)), None)
    if nav is not None:  # EPUB 3 landmarks
        base = posixpath.dirname(nav.get_name())
        soup = parse_html(nav.get_content())
        for landmarks in soup.find_all("nav", attrs={"epub:type": "landmarks"}):
            for link in landmarks.find_all("a"):
                kinds = set(str(link.get("epub:type", "")).lower().split())
                if kinds & FRONT_MATTER_TYPES and link.get("href"):
                    front.add(_normal(posixpath.join(base, str(link["href"]))))
    return front


def _typed_front(soup: BeautifulSoup) -> bool:
    """Whether the document's body (or its first section) says it is front or back matter."""
    body = soup.body
    if body is None:
        return False
    first = body.find(["section", "div"], recursive=False)
    for node in (body, first):
        kinds = set(str(node.get("epub:type", "") if node is not None else "").lower().split())
        if kinds & FRONT_MATTER_TYPES:
            return True
    return False


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
