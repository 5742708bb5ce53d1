"""Habits users bring from piper's CLI, and the farm commands without a broker, run as a user
runs them: subprocesses, standard input and output, real files."""

from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from producer.client import JobSpec
from tests.helpers_cli import environment, ttsfarm, zero_runs
from ttsfarm.core.errors import InvalidInput
from ttsfarm.core.jobs import JobRequest
from ttsfarm.core.loudness import integrated_loudness, true_peak
from ttsfarm.core.mastering import PEAK_CEILING_DBTP


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
    submit = ttsfarm("submit", "-h", cwd=tmp_path).stdout  # one default for every command
    assert b"--loudness LUFS|off" in submit and b"[default: -18]" in submit
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


@pytest.mark.slow
def test_submit_without_a_broker_gives_an_id_that_status_and_fetch_find(tmp_path: Path) -> None:
    env = {"TTSFARM_STORAGE_URL": str(tmp_path / "store")}
    too_loud = ttsfarm("submit", "--loudness", "-5", cwd=tmp_path, env=env, stdin=b"Loud.")
    assert (
        too_loud.returncode == 2 and b"-5 is outside -40 to -10 LUFS: give one such as -18" in too_loud.stderr
    )
    plain = ("submit", "--format", "flac")
    levels = {}
    for loudness in ((), ("--loudness", "off")):
        run = ttsfarm(*plain, *loudness, cwd=tmp_path, env=env, stdin=b"The level of the job.")
        assert run.returncode == 0, run.stderr
        stored = tmp_path / "store" / f"{run.stdout.decode().split()[0]}.flac"
        levels[loudness] = integrated_loudness(*sf.read(stored, dtype="float32"))
    # as `synth` and `audiobook` by default; a clip this short can lose a tenth or two to the
    # true-peak limiter, as a short chapter does
    assert levels[()] == pytest.approx(-18.0, abs=0.5)
    assert -30 < levels[("--loudness", "off")] < -21  # joe speaks at about -24 to -27 LUFS
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
    silent = ttsfarm("submit", "--sentence-silence", "9", cwd=tmp_path, env=env, stdin=b"One. Two.")
    assert (
        silent.returncode == 1
        and b"sentence silence must be a number of seconds from 0 to 2" in silent.stderr
    )
    spaced = ttsfarm("submit", "--sentence-silence", "1.5", cwd=tmp_path, env=env, stdin=b"One. Two.")
    assert spaced.returncode == 0, spaced.stderr
    spaced_id = spaced.stdout.decode().split()[0]
    assert sf.info(str(tmp_path / "store" / f"{spaced_id}.wav")).duration > 2.0  # 1.5 s between the two
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


@pytest.mark.slow
def test_sentence_silence_sets_the_pause_after_each_sentence_as_piper_does(tmp_path: Path) -> None:
    text = "One sentence. Another one.\n\nA new paragraph."
    fixed = ("--noise-scale", "0", "--noise-w", "0", "--loudness", "off", "-q")  # the same speech each run
    made = {}
    for name, silence in (
        ("default", ()),
        ("long", ("--sentence-silence", "1.0")),
        ("none", ("--sentence-silence", "0")),
    ):
        run = ttsfarm("synth", text, "-o", f"{name}.wav", *fixed, *silence, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        made[name], rate = sf.read(tmp_path / f"{name}.wav", dtype="int16")
    assert rate == 22050
    # ttsfarm's own pauses: 0.3 s after a sentence, 0.6 s after a paragraph; piper's 1.0 s after both
    default, long = ([n for n in zero_runs(made[name]) if n > 0.2 * rate] for name in ("default", "long"))
    assert len(default) == len(long) == 2
    assert [a - b for a, b in zip(long, default, strict=True)] == [22050 - 6615, 22050 - 13230]
    assert len(made["long"]) - len(made["default"]) == 2 * 22050 - 6615 - 13230
    assert len(made["default"]) - len(made["none"]) == 6615 + 13230
    assert max(zero_runs(made["none"])) < 0.05 * rate  # no pause left between sentences
    for audio in made.values():  # and none after the last sentence, as piper
        assert len(audio) - 1 - np.flatnonzero(audio)[-1] < 0.05 * rate


@pytest.mark.slow
def test_noise_options_make_the_same_audio_every_run_and_bad_values_are_one_line(tmp_path: Path) -> None:
    text = "Noise or none."
    quiet = ("--loudness", "off", "-q")
    for name in ("a", "b"):
        run = ttsfarm(
            "synth",
            text,
            "-o",
            f"{name}.wav",
            "--noise-scale",
            "0",
            "--noise-w-scale",
            "0",
            *quiet,
            cwd=tmp_path,
        )
        assert run.returncode == 0, run.stderr
    for name in ("c", "d"):  # the voice's own noise: every run differs
        assert ttsfarm("synth", text, "-o", f"{name}.wav", *quiet, cwd=tmp_path).returncode == 0
    audio = {name: sf.read(tmp_path / f"{name}.wav", dtype="int16")[0] for name in "abcd"}
    assert np.array_equal(audio["a"], audio["b"])
    assert not np.array_equal(audio["c"], audio["d"])
    for option, value, message in (
        ("--sentence-silence", "5", b"the sentence silence must be a number of seconds from 0 to 2"),
        ("--sentence-silence", "-0.1", b"the sentence silence must be a number of seconds from 0 to 2"),
        ("--noise-scale", "3", b"noise scale must be between 0 and 2"),
        ("--noise-w", "-1", b"noise w must be between 0 and 2"),
    ):
        bad = ttsfarm("synth", text, "-o", "x.wav", option, value, cwd=tmp_path)
        assert bad.returncode == 1 and bad.stderr.startswith(b"Error: " + message), bad.stderr
        assert bad.stderr.strip().count(b"\n") == 0 and not (tmp_path / "x.wav").exists()


def test_a_sentence_silence_travels_with_the_job_and_old_messages_still_read() -> None:
    plain = JobRequest("Pause.", job_id="c" * 32)
    paused = JobRequest("Pause.", job_id="c" * 32, sentence_silence=0.5)
    assert JobRequest.from_dict(paused.to_dict()) == paused and paused.to_dict()["sentence_silence"] == 0.5
    old = {k: v for k, v in plain.to_dict().items() if k not in ("sentence_silence", "loudness")}
    assert JobRequest.from_dict(old) == plain  # a message from a producer that predates the field
    before = {"text": "Pause.", "options": plain.options.to_dict(), "format": "wav"}
    blob = json.dumps(before, sort_keys=True, ensure_ascii=False).encode("utf-8")
    assert plain.fingerprint() == hashlib.sha256(blob).hexdigest() != paused.fingerprint()  # keys still match
    assert JobRequest("Pause.", sentence_silence=np.float32(0.25)).sentence_silence == 0.25  # type: ignore[arg-type]
    assert JobSpec("Pause.", sentence_silence=0.5).sentence_silence == 0.5
    for bad in (2.5, -1, float("nan"), "0.5", True):
        with pytest.raises(
            InvalidInput, match="the sentence silence must be a number of seconds from 0 to 2"
        ):
            JobRequest("Pause.", sentence_silence=bad)  # type: ignore[arg-type]
