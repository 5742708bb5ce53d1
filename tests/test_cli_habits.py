"""Habits users bring from piper's CLI, and the farm commands without a broker, run as a user
runs them: subprocesses, standard input and output, real files."""

from __future__ import annotations

import hashlib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf

from tests.test_cli import environment
from ttsfarm.loudness import integrated_loudness, true_peak
from ttsfarm.mastering import PEAK_CEILING_DBTP


def ttsfarm(
    *args: str, cwd: Path, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """``ttsfarm ARGS`` with ``stdin`` piped in (nothing by default); output as bytes."""
    command = [sys.executable, "-m", "ttsfarm", *args]
    return subprocess.run(
        command, cwd=cwd, env=environment(env), input=stdin or b"", capture_output=True, timeout=240
    )


def test_text_from_stdin_audio_to_stdout(tmp_path: Path) -> None:
    run = ttsfarm("synth", "-o", "-", "--format", "flac", "-q", cwd=tmp_path, stdin=b"Piped in. Spoken out.")
    assert run.returncode == 0, run.stderr
    audio, rate = sf.read(io.BytesIO(run.stdout))
    assert rate == 22050 and 1.0 < len(audio) / rate < 5.0
    summary = run.stderr.decode()
    assert summary.startswith("standard output: ") and "flac audio" in summary
    assert list(tmp_path.iterdir()) == []  # nothing left behind


def test_synth_is_normalised_tagged_and_says_its_speed_plainly(tmp_path: Path) -> None:
    text = "The lamp was lit at dusk. Wind came over the hill, and then the rain began."
    run = ttsfarm("synth", text, "-o", "lamp.flac", "-q", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    line = run.stdout.decode()
    assert re.search(
        r"made in [\d.]+ s, [\d.]+x (faster|slower) than real time; normalised to -18 LUFS", line
    )
    audio, rate = sf.read(tmp_path / "lamp.flac", dtype="float32")
    assert abs(integrated_loudness(audio, rate) + 18) <= 0.5
    assert true_peak(audio) <= PEAK_CEILING_DBTP
    with sf.SoundFile(tmp_path / "lamp.flac") as tagged:
        assert (tagged.title, tagged.artist) == ("The lamp was lit at dusk. Wind came...", "joe")

    raw = ttsfarm("synth", text, "-o", "raw.wav", "-q", "--loudness", "off", cwd=tmp_path)
    assert raw.returncode == 0, raw.stderr
    assert "the voice's own loudness" in raw.stdout.decode()
    quiet, _ = sf.read(tmp_path / "raw.wav", dtype="float32")
    assert integrated_loudness(quiet, rate) < -20  # the voice alone is quieter than books
    with sf.SoundFile(tmp_path / "raw.wav") as tagged:  # tagged as it is written, unmastered too
        assert (tagged.title, tagged.artist) == ("The lamp was lit at dusk. Wind came...", "joe")


def test_help_short_option_format_choices_and_no_text(tmp_path: Path) -> None:
    helped = ttsfarm("synth", "-h", cwd=tmp_path)
    assert helped.returncode == 0 and b"--format [wav|flac|mp3|ogg]" in helped.stdout
    assert b"--loudness LUFS|off" in helped.stdout and b"[default: -18]" in helped.stdout
    assert ttsfarm("-h", cwd=tmp_path).returncode == 0
    both = ttsfarm("synth", "hi", "-f", "x.txt", "-o", "x.wav", cwd=tmp_path)
    assert both.returncode == 2 and b"not both" in both.stderr
    bad = ttsfarm("synth", "hi", "-o", "x.wav", "--loudness", "loud", cwd=tmp_path)
    assert bad.returncode == 2 and b"not a number of LUFS" in bad.stderr


def test_a_file_name_given_as_the_text_is_refused_not_spoken(tmp_path: Path) -> None:
    (tmp_path / "story.txt").write_text("Once upon a time.\n", encoding="utf-8")
    named = ttsfarm("synth", "story.txt", "-o", "story.wav", cwd=tmp_path)
    assert named.returncode == 2 and b"use -f story.txt" in named.stderr
    assert not (tmp_path / "story.wav").exists()
    submitted = ttsfarm("submit", "story.txt", cwd=tmp_path, env={"TTSFARM_STORAGE_URL": str(tmp_path / "s")})
    assert submitted.returncode == 2 and b"is a file" in submitted.stderr
    absolute = ttsfarm(
        "synth", str(tmp_path / "story.txt"), "-o", str(tmp_path / "abs.wav"), cwd=tmp_path.parent
    )
    assert absolute.returncode == 2 and b"is a file" in absolute.stderr
    assert not (tmp_path / "abs.wav").exists()
    read = ttsfarm("synth", "-f", "story.txt", "-o", "story.wav", "-q", cwd=tmp_path)
    assert read.returncode == 0, read.stderr
    assert sf.info(str(tmp_path / "story.wav")).duration > 0.5


def test_submit_without_a_broker_gives_an_id_that_status_and_fetch_find(tmp_path: Path) -> None:
    env = {"TTSFARM_STORAGE_URL": str(tmp_path / "store")}
    too_loud = ttsfarm("submit", "--loudness", "-5", cwd=tmp_path, env=env, stdin=b"Loud.")
    assert (
        too_loud.returncode == 2 and b"-5 is outside -40 to -10 LUFS: give one such as -18" in too_loud.stderr
    )
    plain = ttsfarm("submit", "--format", "flac", cwd=tmp_path, env=env, stdin=b"The voice's own level.")
    plain_id = plain.stdout.decode().split()[0]
    level = integrated_loudness(*sf.read(tmp_path / "store" / f"{plain_id}.flac", dtype="float32"))
    assert -30 < level < -21  # not mastered unless asked: joe speaks at about -24 to -27 LUFS
    leveled = ("submit", "--format", "flac", "--loudness", "-20")
    run = ttsfarm(*leveled, cwd=tmp_path, env=env, stdin=b"Made here. Found later.")
    assert run.returncode == 0, run.stderr
    job_id = run.stdout.decode().split()[0]
    assert integrated_loudness(*sf.read(tmp_path / "store" / f"{job_id}.flac", dtype="float32")) == (
        pytest.approx(-20.0, abs=0.1)
    )
    status = ttsfarm("status", job_id, cwd=tmp_path, env=env)
    assert status.returncode == 0, status.stderr
    assert status.stdout.decode().startswith(f"{job_id}  succeeded")
    fetched = ttsfarm("fetch", job_id, "-o", "got.flac", cwd=tmp_path, env=env)
    assert fetched.returncode == 0, fetched.stderr
    stored = (tmp_path / "store" / f"{job_id}.flac").read_bytes()
    assert (tmp_path / "got.flac").read_bytes() == stored
    assert hashlib.sha256(stored).hexdigest()[:12] in fetched.stdout.decode()
    piped = ttsfarm("fetch", job_id, "-o", "-", cwd=tmp_path, env=env)  # as `synth -o -`
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == stored and b"sha256" in piped.stderr
    assert not (tmp_path / "-").exists()
    unknown = ttsfarm("status", "0" * 32, cwd=tmp_path, env=env)
    assert unknown.returncode == 1 and unknown.stderr.decode().count("\n") == 1
    assert b"with no broker configured" in unknown.stderr
    path_like = ttsfarm("fetch", "../secret", "-o", "x.flac", cwd=tmp_path, env=env)
    assert path_like.returncode == 1 and b"unknown job id ../secret" in path_like.stderr


def test_celery_flower_without_a_broker_says_so_in_one_line(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "celery", "-A", "worker.app", "flower"]
    root = Path(__file__).parent.parent
    run = subprocess.run(command, cwd=root, env=environment(), capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert (
        run.stderr.strip()
        == "ttsfarm: no broker configured: set TTSFARM_BROKER_URL (e.g. redis://127.0.0.1:6379/0)"
    )
