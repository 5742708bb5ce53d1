"""``ttsfarm synth -o -`` streams the audio as it is made: raw PCM, a WAV of open length, or MP3."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.helpers_audio import decoded, energy_db
from ttsfarm.core.loudness import integrated_loudness

TEXT = "The stream starts with this sentence. Then comes another one, a little longer than the first."
FIXED = ["--noise-scale", "0", "--noise-w", "0", "-q"]


def ttsfarm(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "ttsfarm", *args], cwd=cwd, capture_output=True, timeout=300)


@pytest.mark.slow
def test_pcm_and_wav_stream_the_samples_of_the_file(tmp_path: Path) -> None:
    made = ttsfarm("synth", TEXT, "-o", "file.wav", "--loudness", "off", *FIXED, cwd=tmp_path)
    pcm = ttsfarm("synth", TEXT, "-o", "-", "--format", "pcm", *FIXED, cwd=tmp_path)
    wav = ttsfarm("synth", TEXT, "-o", "-", "--loudness", "off", *FIXED, cwd=tmp_path)
    assert made.returncode == pcm.returncode == wav.returncode == 0, pcm.stderr.decode()
    stored, rate = sf.read(tmp_path / "file.wav", dtype="int16")
    streamed = np.frombuffer(pcm.stdout, dtype="<i2")
    assert len(streamed) == len(stored) and np.abs(streamed.astype(int) - stored).max() <= 1
    assert "pcm audio" in pcm.stderr.decode() and "the voice's own loudness" in pcm.stderr.decode()
    as_wav, wav_rate = sf.read(io.BytesIO(wav.stdout), dtype="int16")
    assert wav_rate == rate == 22050 and np.abs(as_wav.astype(int) - stored).max() <= 1
    assert [p.name for p in tmp_path.iterdir()] == ["file.wav"]  # nothing left beside it


def test_pcm_goes_to_standard_output_unmastered(tmp_path: Path) -> None:
    to_file = ttsfarm("synth", "Hi.", "-o", "x.pcm", "--format", "pcm", cwd=tmp_path)
    mastered = ttsfarm("synth", "Hi.", "-o", "-", "--format", "pcm", "--loudness", "-16", cwd=tmp_path)
    assert to_file.returncode == mastered.returncode == 2
    assert "--format pcm streams raw samples to standard output: give -o -" in to_file.stderr.decode()
    assert "leave out --loudness" in mastered.stderr.decode()
    assert "Traceback" not in to_file.stderr.decode() + mastered.stderr.decode()


@pytest.mark.slow
def test_mp3_streams_as_it_is_encoded_and_a_mastered_one_comes_whole(tmp_path: Path) -> None:
    made = ttsfarm("synth", TEXT, "-o", "file.wav", "--loudness", "off", *FIXED, cwd=tmp_path)
    streamed = ttsfarm("synth", TEXT, "-o", "-", "--format", "mp3", "--loudness", "off", *FIXED, cwd=tmp_path)
    mastered = ttsfarm("synth", TEXT, "-o", "-", "--format", "mp3", *FIXED, cwd=tmp_path)
    assert made.returncode == streamed.returncode == mastered.returncode == 0, streamed.stderr.decode()
    stored, rate = sf.read(tmp_path / "file.wav", dtype="float32")
    back = decoded(streamed.stdout, rate)
    assert 0 <= len(back) - len(stored) < 4 * 1152  # the encoder's priming and last frame
    assert energy_db(back) == pytest.approx(energy_db(stored), abs=0.5)
    said = streamed.stderr.decode()
    assert "mp3 audio" in said and f"{len(streamed.stdout) / 1024:.0f} KiB" in said
    assert integrated_loudness(decoded(mastered.stdout, rate), rate) == pytest.approx(-18.0, abs=0.5)
    assert [p.name for p in tmp_path.iterdir()] == ["file.wav"]
