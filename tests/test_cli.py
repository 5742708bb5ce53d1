"""The ``ttsfarm`` command as a user runs it: real processes, real files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf

from ttsfarm.jobs import MAX_TEXT_CHARS


def environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without ttsfarm settings, plus ``env``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TTSFARM_")}
    environ.update(env or {})
    return environ


def ttsfarm(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ttsfarm", *args],
        cwd=cwd,
        env=environment(env),
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_synth_text_to_wav(tmp_path: Path) -> None:
    run = ttsfarm("synth", "Hello from the farm. It works.", "-o", "hello.wav", "-q", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    audio, rate = sf.read(tmp_path / "hello.wav")
    assert rate == 22050 and 1.0 < len(audio) / rate < 5.0
    assert "hello.wav" in run.stdout
    size = (tmp_path / "hello.wav").stat().st_size
    assert f"{size / 1024:.0f} KiB" in run.stdout  # the result describes the file written


def test_synth_file_to_mp3_with_options(tmp_path: Path) -> None:
    (tmp_path / "chapter.txt").write_text("A short chapter. It has two sentences.", encoding="utf-8")
    run = ttsfarm(
        "synth",
        "-f",
        "chapter.txt",
        "-o",
        "out/ch.mp3",
        "--length-scale",
        "1.3",
        "--voice",
        "joe",
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    info = sf.info(tmp_path / "out" / "ch.mp3")
    assert info.format == "MP3" and info.duration > 2.0


def test_voices_lists_joe(tmp_path: Path) -> None:
    run = ttsfarm("voices", cwd=tmp_path)
    assert run.returncode == 0
    assert run.stdout.startswith("joe ") and "22050 Hz" in run.stdout


def bad_inputs(tmp_path: Path) -> list[tuple[list[str], str]]:
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (tmp_path / "huge.txt").write_text("word " * (MAX_TEXT_CHARS // 5 + 10))
    (tmp_path / "a-file").write_text("x")
    return [
        (["synth", "", "-o", "x.wav"], "the text is empty"),
        (["synth", "   \n\t ", "-o", "x.wav"], "the text is empty"),
        (["synth", "-f", "missing.txt", "-o", "x.wav"], "file missing.txt does not exist"),
        (["synth", "-f", "latin1.txt", "-o", "x.wav"], "is not UTF-8 text"),
        (["synth", "hi", "--voice", "nobody", "-o", "x.wav"], "unknown voice 'nobody'"),
        (["synth", "hi", "-o", "a-file/x.wav"], "cannot write to a-file"),
        (["synth", "hi", "-o", "x.aiff"], "unknown audio format 'aiff'"),
        (["synth", "hi", "-o", "x.wav", "--format", "m4a"], "unknown audio format 'm4a'"),
        (["synth", "-f", "huge.txt", "-o", "x.wav"], "over the limit of 200,000"),
        (["synth", "hi", "--speaker", "3", "-o", "x.wav"], "has a single speaker"),
        (["synth", "hi", "--length-scale", "0", "-o", "x.wav"], "length scale must be between"),
    ]


@pytest.mark.parametrize("case", range(11))
def test_bad_input_gives_one_clear_line(tmp_path: Path, case: int) -> None:
    args, message = bad_inputs(tmp_path)[case]
    run = ttsfarm(*args, cwd=tmp_path)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert message in run.stderr
    assert run.stderr.strip().count("\n") == 0, run.stderr
    assert not (tmp_path / "x.wav").exists()
