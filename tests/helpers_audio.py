"""What tests of encoded audio share: ffmpeg's own decoding of it, and its energy."""

from __future__ import annotations

import subprocess

import imageio_ffmpeg
import numpy as np


def decoded(data: bytes, rate: int) -> np.ndarray:
    """ffmpeg's decoding of ``data`` (any format it knows) to mono float32 at ``rate``."""
    command = [imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-i", "pipe:0"]
    command += ["-f", "f32le", "-ac", "1", "-ar", str(rate), "pipe:1"]
    run = subprocess.run(command, input=data, capture_output=True, timeout=60, check=True)
    return np.frombuffer(run.stdout, dtype=np.float32)


def energy_db(audio: np.ndarray) -> float:
    """The audio's energy in dB: the same for a copy with silence added at either end."""
    return float(10 * np.log10(np.sum(np.square(audio, dtype=np.float64))))
