"""``ttsfarm audiobook`` on an EPUB as a user runs it: chapters listed first, then a book whose
.m4b and .mp3 carry title, author, narrator, cover and chapters, with true peaks measured on
the final files under the -1 dBTP ceiling."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import imageio_ffmpeg
import numpy as np
import pytest
from mutagen.id3 import ID3
from mutagen.mp4 import MP4

from tests.books import make_epub, png
from ttsfarm.core.loudness import true_peak
from ttsfarm.core.mastering import PEAK_CEILING_DBTP


def ttsfarm(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TTSFARM_")}
    return subprocess.run(
        [sys.executable, "-m", "ttsfarm", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def decoded(path: Path) -> np.ndarray:
    """The file's audio as the player gets it: decoded to float, nothing clipped."""
    command = [imageio_ffmpeg.get_ffmpeg_exe(), "-nostdin", "-loglevel", "error", "-i", str(path)]
    raw = subprocess.run(
        [*command, "-map", "0:a", "-f", "f32le", "-"], capture_output=True, check=True
    ).stdout
    return np.frombuffer(raw, dtype="<f4")


@pytest.fixture(scope="module")
def book(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    folder = tmp_path_factory.mktemp("epub")
    make_epub(folder / "lantern.epub", cover=png(24, 24))
    # loud enough that the AAC and MP3 encoders overshoot what the chapters had
    run = ttsfarm(
        "audiobook", "lantern.epub", "-o", "out", "-q", "--length-scale", "0.7", "--narrator", "Joe Reader",
        "--target-lufs", "-12", cwd=folder,
    )  # fmt: skip
    return folder, run


def test_list_chapters_shows_what_was_found_and_makes_nothing(tmp_path: Path) -> None:
    make_epub(tmp_path / "lantern.epub")
    run = ttsfarm("audiobook", "lantern.epub", "--list-chapters", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "The Lantern: 5 chapters found"
    assert [line.split("  ")[1] for line in lines[1:]] == [
        "The Lantern",
        "The Hill",
        "Grey Morning",
        "The Lamp Goes Out",
        "Copyright",
    ]
    assert "front matter" in lines[1] and "back matter" in lines[5] and "matter" not in lines[2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lantern.epub"]
    missing = ttsfarm("audiobook", "lantern.epub", cwd=tmp_path)
    assert missing.returncode == 2 and "give the folder for the book with -o OUTDIR" in missing.stderr


def test_epub_book_has_its_chapters_metadata_and_cover(
    book: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    folder, run = book
    assert run.returncode == 0, run.stderr
    assert "3 chapters" in run.stdout and "all 3 parts made now" in run.stdout
    out = folder / "out"
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["title"], manifest["author"], manifest["narrator"], manifest["year"]) == (
        "The Lantern", "Ann Author", "Joe Reader", "2019",
    )  # fmt: skip
    assert [c["title"] for c in manifest["chapters"]] == ["The Hill", "Grey Morning", "The Lamp Goes Out"]
    assert (out / manifest["files"]["cover"]["file"]).read_bytes() == png(24, 24)

    m4b = MP4(out / "the-lantern.m4b")
    assert m4b.tags is not None
    assert m4b.tags["\xa9nam"] == ["The Lantern"] and m4b.tags["\xa9ART"] == ["Ann Author"]
    assert m4b.tags["\xa9wrt"] == ["Joe Reader"] and m4b.tags["\xa9day"] == ["2019"]
    assert bytes(m4b.tags["covr"][0]) == png(24, 24)
    assert [c.title for c in m4b.chapters] == ["The Hill", "Grey Morning", "The Lamp Goes Out"]

    id3 = ID3(out / "the-lantern.mp3")
    assert str(id3["TIT2"]) == "The Lantern" and str(id3["TPE1"]) == "Ann Author"
    assert str(id3["TCOM"]) == "Joe Reader"
    assert id3.getall("APIC")[0].data == png(24, 24)
    assert len(id3.getall("CHAP")) == 3


def test_final_files_keep_true_peaks_under_the_ceiling(
    book: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    folder, run = book
    assert run.returncode == 0, run.stderr
    manifest = json.loads((folder / "out" / "manifest.json").read_text())
    for kind in ("m4b", "mp3"):
        measured = true_peak(decoded(folder / "out" / manifest["files"][kind]["file"]))
        assert measured <= PEAK_CEILING_DBTP, (kind, measured)
        assert manifest["files"][kind]["true_peak"] <= PEAK_CEILING_DBTP
        assert measured > PEAK_CEILING_DBTP - 3  # not bought by turning the whole book down
