"""``ttsfarm synth -o -`` streams the audio as it is made: raw PCM, or a WAV of open length."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

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
