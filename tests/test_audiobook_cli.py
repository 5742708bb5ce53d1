"""``ttsfarm audiobook`` as a user runs it: real processes, real files, real Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers_cli import command, environment, ttsfarm_text

EXAMPLE = Path(__file__).parent.parent / "examples" / "ellery-book.csv"
FAST = ("--length-scale", "0.6")


def ttsfarm_audiobook(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return ttsfarm_text("audiobook", *args, cwd=cwd)


BAD_INPUTS: list[tuple[bytes, list[str], str]] = [
    (b"", [], "book.csv is empty: give a CSV with a header row and a 'text' column"),
    (b"chapter,words\n1,Hello.\n", [], "book.csv has no 'text' column"),
    (
        b"chapter,text\n1,Hello.\n2,\n",
        [],
        "book.csv, line 3: the text is empty: fill it in, or pass --skip-empty",
    ),
    ("text\ncaf\xe9\n".encode("latin-1"), [], "book.csv is not UTF-8 text"),
    (b"chapter,text,voice\n1,Hi.,\n2,Hello.,nobody\n", [], "book.csv, line 3: unknown voice 'nobody'"),
    (b"chapter,text\n1,Hello.\n", ["--voice", "nobody"], "book.csv, line 2: unknown voice 'nobody'"),
    (b"chapter,text\n1,Hello.\n", ["--length-scale", "0"], "length scale must be between"),
]
BAD_OPTIONS: list[tuple[list[str], str]] = [
    (["--loudness", "off"], "a book's chapters are always brought to one loudness: give one such as -18"),
    (["--loudness", "-5"], "-5 is outside -40 to -10 LUFS: give one such as -18"),
    (["--target-lufs", "-9"], "'--target-lufs': -9 is outside -40 to -10 LUFS"),
    (
        ["--loudness", "-20", "--target-lufs", "-20"],
        "give --loudness or --target-lufs (its old name), not both",
    ),
]


@pytest.mark.parametrize("case", range(len(BAD_INPUTS)))
def test_bad_input_gives_one_clear_line_and_no_audio(tmp_path: Path, case: int) -> None:
    content, extra, message = BAD_INPUTS[case]
    (tmp_path / "book.csv").write_bytes(content)
    run = ttsfarm_audiobook("book.csv", "-o", "out", "-q", *extra, cwd=tmp_path)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert message in run.stderr
    assert run.stderr.strip().count("\n") == 0, run.stderr
    made = [p.name for p in (tmp_path / "out").rglob("*") if p.is_file() and p.name != "lock"]
    assert made == []


@pytest.mark.parametrize(("options", "message"), BAD_OPTIONS)
def test_a_bad_loudness_is_refused_before_the_book_is_read(
    tmp_path: Path, options: list[str], message: str
) -> None:
    (tmp_path / "book.csv").write_text("chapter,text\n1,Hello.\n")
    run = ttsfarm_audiobook("book.csv", "-o", "out", "-q", *options, cwd=tmp_path)
    assert run.returncode == 2 and message in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "out").exists()


def test_skip_empty_makes_the_book_then_a_second_run_does_nothing(tmp_path: Path) -> None:
    (tmp_path / "book.csv").write_text("chapter,title,text\n1,One,Hello there.\n1,One,\n2,Two,Bye.\n")
    options = ("--skip-empty", "-q", *FAST)
    run = ttsfarm_audiobook("book.csv", "-o", "out", "--loudness", "-20", *options, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "out: 2 chapters" in run.stdout and "all 2 parts made now" in run.stdout
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [c["title"] for c in manifest["chapters"]] == ["One", "Two"]
    assert manifest["target_lufs"] == -20.0
    # within 1 LU, as promised: a short peaky chapter loses a few tenths to the true-peak limiter
    assert all(abs(c["loudness"] + 20.0) <= 1.0 for c in manifest["chapters"])
    # the options' old names, as scripts written for them use them: the same book, so nothing to do
    again = ttsfarm_audiobook("book.csv", "--outdir", "out", "--target-lufs", "-20", *options, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "finished already" in again.stdout
    assert again.stderr.splitlines() == [
        "ttsfarm: --outdir is deprecated: use --output",
        "ttsfarm: --target-lufs is deprecated: use --loudness",
    ]


@pytest.mark.slow
def twice_as_long(tmp_path: Path) -> Path:
    """The example book and its chapters again after it: 12 parts, so that a run interrupted
    once its first parts are done has most of its work still ahead, however the machine runs."""
    header, *rows = EXAMPLE.read_text().splitlines(keepends=True)
    again = [f"{int(row.split(',', 1)[0]) + 6},{row.split(',', 1)[1]}" for row in rows]
    book = tmp_path / "book.csv"
    book.write_text(header + "".join(rows) + "".join(again))
    return book


@pytest.mark.slow
def test_ctrl_c_then_the_same_command_resumes(tmp_path: Path) -> None:
    book = twice_as_long(tmp_path)
    args = command("audiobook", str(book), "-o", "out", *FAST)
    # A shell's background job ignores SIGINT, and so would the command started from it: caught
    # here while it starts, SIGINT is back to its default in the command, as at a terminal.
    ignored = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        process = subprocess.Popen(  # in a session of its own: Ctrl-C reaches its whole group
            args,
            cwd=tmp_path,
            env=environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    finally:
        signal.signal(signal.SIGINT, ignored)
    parts = tmp_path / "out" / ".parts"
    deadline = time.monotonic() + 180
    while not list(parts.glob("*.json")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode != 0, f"the run finished before it could be interrupted: {stderr!r}"
    assert "Traceback" not in stderr.decode()
    assert not (tmp_path / "out" / "manifest.json").exists()
    assert not list(parts.glob(".*rendering*"))
    finished = len(list(parts.glob("*.json")))
    assert 1 <= finished < 12
    assert f"interrupted: {finished} of 12 parts (" in stderr.decode()

    run = ttsfarm_audiobook(str(book), "-o", "out", *FAST, "-q", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    rendered = re.search(
        r"(\d+) of (\d+) parts made now \((\d+) s of speech\), (\d+) from the cache", run.stdout
    )
    assert rendered is not None and int(rendered[2]) == 12
    assert int(rendered[1]) == 12 - finished  # every finished part was re-used
    assert int(rendered[4]) == finished
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert len(manifest["chapters"]) == 12
