"""Reading books from CSV and cutting them into parts: no audio, real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from ttsfarm.audiobook.book import read_book
from ttsfarm.audiobook.export import ffmetadata, srt, srt_time
from ttsfarm.audiobook.parts import book_parts, chapter_parts
from ttsfarm.core.breaks import PAUSE_PARAGRAPH, PAUSE_SENTENCE
from ttsfarm.core.errors import InvalidInput
from ttsfarm.core.files import slug
from ttsfarm.core.jobs import SegmentTiming, SynthesisOptions

DEFAULTS = SynthesisOptions(voice="joe", length_scale=0.8)
EXAMPLE = Path(__file__).parent.parent / "examples" / "ellery-book.csv"


def write(tmp_path: Path, content: str | bytes, name: str = "book.csv") -> str:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8", newline="")
    return str(path)


def test_example_book_has_six_chapters_in_order() -> None:
    book = read_book(str(EXAMPLE), DEFAULTS)
    assert book.title == "ellery-book"
    assert [c.title for c in book.chapters] == [
        "The Town",
        "The Bridge",
        "The Ferryman",
        "The Flood",
        "The Ferry Again",
        "The Ceremony",
    ]
    assert [len(c.rows) for c in book.chapters] == [3, 4, 4, 4, 4, 3]
    assert book.chapters[0].rows[0].line == 2
    assert all(row.options == DEFAULTS for row in book.rows)


def test_chapters_group_by_first_appearance_with_bom_quotes_and_extra_columns(tmp_path: Path) -> None:
    content = (
        "\ufeffNotes, Chapter ,TEXT,Title,voice,speaker\r\n"
        'x,b,"First, with a comma.",Bee,,\r\n'
        'y,a,"Two lines\r\nin one field.",Ay,,\r\n'
        'z,,"Continues chapter a.",,,\r\n'
        'w,b,"Back to b.",Other title,joe,0\r\n'
    )
    book = read_book(write(tmp_path, content), DEFAULTS, title="My Book")
    assert book.title == "My Book"
    assert [(c.number, c.key, c.title) for c in book.chapters] == [(1, "b", "Bee"), (2, "a", "Ay")]
    b, a = book.chapters
    assert [r.text for r in b.rows] == ["First, with a comma.", "Back to b."]
    assert [r.text for r in a.rows] == ["Two lines\r\nin one field.", "Continues chapter a."]
    assert [r.line for r in a.rows] == [3, 5]  # the quoted newline makes row 3 two lines long
    assert b.rows[1].options == SynthesisOptions(voice="joe", speaker=0, length_scale=0.8)


def test_without_chapter_column_rows_group_by_title_else_each_row_is_a_chapter(tmp_path: Path) -> None:
    by_title = read_book(write(tmp_path, "title,text\nOne,a.\nOne,b.\nTwo,c.\n"), DEFAULTS)
    assert [(c.title, len(c.rows)) for c in by_title.chapters] == [("One", 2), ("Two", 1)]
    plain = read_book(write(tmp_path, "text\na.\nb.\n", "plain.csv"), DEFAULTS)
    assert [c.title for c in plain.chapters] == ["Chapter 1", "Chapter 2"]


def test_voice_column_overrides_the_default_per_row(tmp_path: Path) -> None:
    book = read_book(write(tmp_path, "chapter,text,voice\n1,a.,\n1,b.,other\n"), DEFAULTS)
    first, second = book.chapters[0].rows
    assert first.options.voice == "joe" and second.options.voice == "other"
    assert second.options.length_scale == 0.8


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "is empty: give a CSV with a header row"),
        ("  \n\n", "is empty"),
        (",,,\n , \n", "is empty: give a CSV with a header row"),
        ("chapter,words\n1,hello\n", "has no 'text' column (the header row has 'chapter', 'words')"),
        ("chapter,text\n", "has a header but no rows"),
        ('chapter,text\n1,"a\nb"\n2,  \n3,c\n', "line 4: the text is empty: fill it in, or pass"),
        ("chapter,text\n1,\n2,\n", "line 2: the text is empty (and 1 more rows)"),
        ("chapter,text\n1,Hello, world\n", "line 2: 3 fields but the header has 2: put double quotes"),
        ("text,speaker\nhi,two\n", "line 2: speaker 'two' is not a whole number"),
        ('text\n"unclosed\n', "not valid CSV"),
    ],
)
def test_bad_csv_names_the_problem_and_line(tmp_path: Path, content: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=r"book\.csv") as caught:
        read_book(write(tmp_path, content), DEFAULTS)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_non_utf8_and_missing_files_are_reported(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="is not UTF-8 text"):
        read_book(write(tmp_path, "text\ncaf\xe9\n".encode("latin-1")), DEFAULTS)
    with pytest.raises(InvalidInput, match="does not exist"):
        read_book(str(tmp_path / "missing.csv"), DEFAULTS)


def test_skip_empty_leaves_out_empty_rows_and_says_which(tmp_path: Path) -> None:
    book = read_book(write(tmp_path, "chapter,text\n1,a.\n1,\n2,b.\n"), DEFAULTS, skip_empty=True)
    assert book.skipped_lines == (3,)
    assert [[r.text for r in c.rows] for c in book.chapters] == [["a."], ["b."]]
    with pytest.raises(InvalidInput, match="every row has empty text"):
        read_book(write(tmp_path, "chapter,text\n1,\n", "empty.csv"), DEFAULTS, skip_empty=True)


def test_parts_join_rows_split_at_voice_changes_and_size(tmp_path: Path) -> None:
    rows = "\n".join(f"1,Sentence number {n} is here.,{'other' if n == 3 else ''}" for n in range(6))
    book = read_book(write(tmp_path, f"chapter,text,voice\n{rows}\n"), DEFAULTS)
    parts = chapter_parts(book.chapters[0], max_chars=60)
    assert [p.options.voice for p in parts] == ["joe", "joe", "other", "joe"]
    assert parts[0].text == "Sentence number 0 is here.\n\nSentence number 1 is here."
    assert [p.line for p in parts] == [2, 4, 5, 6]
    assert all(len(p.text) <= 60 for p in parts)
    assert [p.index for p in parts] == [0, 1, 2, 3]


def test_an_over_long_row_is_cut_at_sentences_then_words(tmp_path: Path) -> None:
    long_text = "One two three four. " * 10 + "\n\n" + "word " * 30
    book = read_book(write(tmp_path, f'text\n"{long_text}"\nshort.\n'), DEFAULTS)
    parts = chapter_parts(book.chapters[0], max_chars=50)
    assert all(len(p.text) <= 50 for p in parts)
    assert " ".join(p.text for p in parts).split() == long_text.split()
    assert parts[0].pause_after == PAUSE_SENTENCE  # cut inside a paragraph
    assert parts[0].text.endswith("four.")
    assert book_parts(book, 50)[1][0].pause_after == PAUSE_PARAGRAPH


def test_part_keys_follow_content_not_position(tmp_path: Path) -> None:
    content = "chapter,text\n1,Same words.\n2,Same words.\n3,Other words.\n"
    book = read_book(write(tmp_path, content), DEFAULTS)
    (one,), (two,), (three,) = book_parts(book)
    assert one.key == two.key != three.key
    assert one.name != two.name  # each chapter keeps its own cached file
    slower = read_book(
        write(tmp_path, "chapter,text\n1,Same words.\n", "slow.csv"), SynthesisOptions(length_scale=0.9)
    )
    assert book_parts(slower)[0][0].key != one.key


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("The Ferry Again", "the-ferry-again"),
        ("../../etc/passwd", "etc-passwd"),
        ("/absolute/path", "absolute-path"),
        ("..", "chapter"),
        ("C:\\Windows\\system32", "c-windows-system32"),
        ("Café à la crème", "cafe-a-la-creme"),
        ("日本語", "chapter"),
        (".hidden", "hidden"),
        ("x" * 100, "x" * 40),
    ],
)
def test_slugs_cannot_leave_the_folder(title: str, expected: str) -> None:
    assert slug(title, "chapter") == expected


def test_srt_cues_and_ffmpeg_metadata_escaping() -> None:
    cues = [SegmentTiming("Hello  there.", 0.5, 1.25), SegmentTiming("Bye.", 3661.0, 3662.0004)]
    assert srt_time(3661.0) == "01:01:01,000"
    assert srt(cues, offset=1.0) == (
        "1\n00:00:01,500 --> 00:00:02,250\nHello there.\n\n2\n01:01:02,000 --> 01:01:03,000\nBye.\n"
    )
    from ttsfarm.audiobook.export import BookTags, ChapterMark

    text = ffmetadata(BookTags("A=B; #1"), [ChapterMark("Line\nbreak\\", 0.0, 1.5, Path("x.flac"))], 22050)
    assert "title=A\\=B\\; \\#1\n" in text
    assert "TIMEBASE=1/22050\nSTART=0\nEND=33075\ntitle=Line\\\nbreak\\\\\n" in text
