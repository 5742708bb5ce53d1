"""Loudness mastering on signals with known properties."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import imageio_ffmpeg
import numpy as np
import pyloudnorm
import pytest
import soundfile as sf
from scipy.ndimage import minimum_filter1d, uniform_filter1d  # type: ignore[import-untyped]
from scipy.signal import resample  # type: ignore[import-untyped]

from ttsfarm.core.loudness import (
    envelopes,
    integrated_loudness,
    peak_envelope,
    spans_index,
    stretches,
    true_peak,
)
from ttsfarm.core.mastering import (
    LIMITER_WINDOW_SECONDS,
    MAX_LIMITING_DB,
    LimiterGain,
    db_to_linear,
    limiter_gain,
    master,
    moving_min,
)
from ttsfarm.core.mastering import resample as resample_to

RATE = 22050


def fft_true_peak(audio: np.ndarray) -> float:
    """dBTP measured another way than the code under test (FFT resampling, 8x)."""
    return float(20 * np.log10(np.abs(resample(audio, len(audio) * 8)).max()))


def speech_like(seconds: float, seed: int = 1) -> np.ndarray:
    """Bursts of modulated tones with sharp transients and gaps: a high crest factor, like speech."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    voice = (
        np.sin(2 * np.pi * 140 * t) + 0.5 * np.sin(2 * np.pi * 420 * t) + 0.2 * rng.standard_normal(len(t))
    )
    envelope = (np.sin(2 * np.pi * 2.5 * t) > 0.2).astype(np.float64)
    clicks = np.zeros_like(t)
    clicks[rng.integers(0, len(t), 20)] = 3.0  # isolated spikes far above the rest
    return (0.05 * voice * envelope + 0.05 * clicks).astype(np.float32)


@pytest.mark.parametrize("target", [-18.0, -23.0, -14.0])
def test_master_hits_the_target_with_true_peaks_under_the_ceiling(target: float) -> None:
    audio = speech_like(6.0)
    assert (
        fft_true_peak(audio) - pyloudnorm.Meter(RATE).integrated_loudness(audio) > 18
    )  # gain alone would clip
    mastered = master(audio, RATE, target, ceiling_db=-1.0)
    loudness = pyloudnorm.Meter(RATE).integrated_loudness(mastered.audio.astype(np.float64))
    assert abs(loudness - target) <= 0.2
    assert fft_true_peak(mastered.audio) < -1.0
    # an estimate after light limiting, a measurement after hard: within 0.02 LU either way
    assert mastered.loudness == pytest.approx(integrated_loudness(mastered.audio, RATE), abs=0.02)
    assert len(mastered.audio) == len(audio)


def ffmpeg_reading(audio: np.ndarray, tmp_path: Path) -> tuple[float, float]:
    """Integrated loudness (LUFS) and true peak (dBTP) as ffmpeg's own EBU R128 meter reads them."""
    path = tmp_path / "measured.wav"
    sf.write(path, audio, RATE, subtype="FLOAT")
    command = [imageio_ffmpeg.get_ffmpeg_exe(), "-nostats", "-i", str(path), "-af", "ebur128=peak=true"]
    report = subprocess.run([*command, "-f", "null", "-"], capture_output=True, text=True, check=True).stderr
    summary = report[report.rindex("Summary:") :]
    loudness = re.search(r"I:\s+(-?[\d.]+) LUFS", summary)
    peak = re.search(r"Peak:\s+(-?[\d.]+) dBFS", summary)
    assert loudness and peak, summary
    return float(loudness[1]), float(peak[1])


@pytest.mark.parametrize("gain_db", [0.0, 14.0])
def test_the_meters_read_what_ffmpeg_reads(gain_db: float, tmp_path: Path) -> None:
    """ffmpeg's ``ebur128`` filter is code of its own: it prints one decimal."""
    audio = speech_like(6.0, seed=4) * np.float32(db_to_linear(gain_db))
    loudness, peak = ffmpeg_reading(audio, tmp_path)
    assert integrated_loudness(audio, RATE) == pytest.approx(loudness, abs=0.051)
    assert true_peak(audio) == pytest.approx(peak, abs=0.11)


def full_gain(limits: LimiterGain, length: int) -> np.ndarray:
    gain = np.ones(length, dtype=np.float32)
    gain[limits.index] = limits.gain
    return gain


def test_limiter_leaves_audio_below_the_ceiling_untouched() -> None:
    audio = speech_like(3.0) * np.float32(0.1)
    peaks = peak_envelope(audio)
    assert len(limiter_gain(peaks, RATE, db_to_linear(-1.0)).index) == 0
    mastered = master(audio, RATE, target_lufs=-40.0)  # quieter: plain gain, no limiting
    ratio = mastered.audio[audio != 0] / audio[audio != 0]
    assert np.allclose(ratio, ratio[0], rtol=1e-4)
    # the reported peak is derived from the source under one gain: it must equal the measured one
    assert mastered.true_peak == pytest.approx(true_peak(mastered.audio), abs=1e-3)


def test_limiter_gain_covers_every_peak() -> None:
    rng = np.random.default_rng(3)
    peaks = (np.abs(rng.standard_normal(5000)) * 2).astype(np.float32)
    gain = full_gain(limiter_gain(peaks, RATE, 1.0), len(peaks))
    assert np.all(peaks * gain <= 1.0 + 1e-6)
    assert gain.max() <= 1.0


def test_silence_stays_silence() -> None:
    mastered = master(np.zeros(RATE, dtype=np.float32), RATE)
    assert not mastered.audio.any() and mastered.gain == 0.0
    assert true_peak(mastered.audio) == -np.inf


def test_resample_keeps_duration_and_pitch() -> None:
    t = np.arange(16000) / 16000
    tone = np.sin(2 * np.pi * 440 * t).astype(np.float32)
    converted = resample_to(tone, 16000, RATE)
    assert len(converted) == RATE and converted.dtype == np.float32
    spectrum = np.abs(np.fft.rfft(converted))
    assert np.argmax(spectrum) * RATE / len(converted) == pytest.approx(440, abs=1)


def test_limiter_only_acts_near_a_peak() -> None:
    peaks = np.full(RATE, 0.5, dtype=np.float32)
    peaks[RATE // 2] = 2.0
    gain = full_gain(limiter_gain(peaks, RATE, 1.0), len(peaks))
    assert gain[RATE // 2] <= 0.5
    reach = np.flatnonzero(gain < 1.0)
    assert (reach.max() - reach.min()) / RATE < 0.025  # about two 10 ms windows, nothing more


def test_the_limiter_filters_only_near_peaks_and_gets_what_filtering_everything_gets() -> None:
    audio = speech_like(6.0)
    audio[:3] = audio[-3:] = 0.2  # peaks at both ends, where the filters meet the edges
    gain_db = 24.0  # a tenth of the samples over the ceiling
    peaks = peak_envelope(audio) * np.float32(db_to_linear(gain_db))
    need = np.minimum(1.0, db_to_linear(-1.3) / np.maximum(peaks, 1e-12))
    width = round(LIMITER_WINDOW_SECONDS * RATE) | 1
    everywhere = uniform_filter1d(minimum_filter1d(need, width, mode="nearest"), width, mode="nearest")
    limits = limiter_gain(peaks, RATE, db_to_linear(-1.3))
    limiter = full_gain(limits, len(audio))
    assert len(limits.bounds) > 1  # several stretches, filtered joined
    assert 0 < np.mean(limiter < 1.0) < 0.9 and limiter[0] < 1.0 and limiter[-1] < 1.0
    assert np.allclose(limiter, everywhere, rtol=0, atol=1e-6)


@pytest.mark.parametrize("width", [1, 3, 221])
def test_moving_min_is_the_minimum_filter(width: int) -> None:
    values = np.random.default_rng(width).random(1000).astype(np.float32)
    assert np.array_equal(moving_min(values, width), minimum_filter1d(values, width, mode="nearest"))


def test_stretches_are_oversampled_as_in_the_whole() -> None:
    audio = speech_like(2.0, seed=7)
    bounds = stretches(np.array([5, 6, 400, 20000, len(audio) - 2]), 256, len(audio))
    assert len(bounds) == 3  # 5, 6 and 400 share one
    whole = peak_envelope(audio)
    joined = envelopes(audio, bounds)
    # libsoxr convolves in blocks: a stretch oversampled apart rounds its float32s differently
    # (about 3e-7 of the value) from the same samples in the whole.
    assert np.allclose(joined, whole[spans_index(bounds[:, 0], bounds[:, 1] - bounds[:, 0])], atol=1e-5)


@pytest.mark.parametrize("target", [-18.0, -12.0], ids=["light limiting", "hard limiting"])
def test_the_loudness_reported_is_what_a_measurement_reads(target: float) -> None:
    """master() estimates the loudness after limiting; after hard limiting it measures it."""
    audio = speech_like(20.0, seed=5)
    mastered = master(audio, RATE, target)
    assert mastered.loudness == pytest.approx(integrated_loudness(mastered.audio, RATE), abs=0.02)
    assert abs(integrated_loudness(mastered.audio, RATE) - target) <= 0.12
    assert mastered.true_peak == pytest.approx(true_peak(mastered.audio), abs=0.02)


def test_a_target_the_limiter_cannot_reach_stops_at_a_bounded_gain() -> None:
    """Speech-like audio full of clicks, asked for -10 LUFS: the gain stops 10 dB over plain gain,
    the audio stays finite, its pauses stay quiet, and what is reported is what it has."""
    audio = speech_like(20.0, seed=6)
    clicks = np.random.default_rng(6).integers(0, len(audio), 2000)
    audio[clicks] = 0.9
    plain = -10.0 - integrated_loudness(audio, RATE)
    mastered = master(audio, RATE, -10.0)
    assert np.isfinite(mastered.audio).all()
    assert mastered.gain <= plain + MAX_LIMITING_DB + 1e-9
    assert mastered.loudness == pytest.approx(integrated_loudness(mastered.audio, RATE), abs=0.02)
    assert (
        mastered.true_peak == pytest.approx(true_peak(mastered.audio), abs=0.02) and mastered.true_peak < -1.0
    )
    gaps = np.abs(mastered.audio[np.abs(audio) == 0])
    assert gaps.max() == 0.0  # silence stays silence, however loud the rest
