"""Loudness mastering: every chapter brought to one integrated loudness (ITU-R BS.1770 /
EBU R128, measured by libebur128, the reference implementation, which reads what ffmpeg's
``ebur128`` filter reads) with true peaks (4x oversampled by libsoxr) kept under a ceiling by a
look-ahead limiter. Pure functions on float arrays; no files here.

Both libraries are compiled code that imports in a tenth of a second: mastering 125 s of speech
costs about a third of what pyloudnorm and scipy cost (import included, `docs/benchmarks.md`),
which is what a one-off `ttsfarm synth` and a worker mastering every job both pay."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import pyebur128
import soxr

TARGET_LUFS: Final = -18.0
"""Integrated loudness of every chapter: a common target for spoken word."""
PEAK_CEILING_DBTP: Final = -1.0
"""True peaks (4x oversampled) stay below this, leaving room for lossy encoders."""
LIMITER_MARGIN_DB: Final = 0.3
"""The limiter aims this far under the ceiling, for 16-bit rounding and resampling."""
LIMITER_WINDOW_SECONDS: Final = 0.010
"""Look-ahead and smoothing of the limiter's gain: short enough to leave speech intact,
long enough not to distort a 100 Hz voice."""
TRUE_PEAK_OVERSAMPLING: Final = 4
OVERSAMPLING_QUALITY: Final = "HQ"
"""libsoxr's high quality (20-bit) filter, linear phase: an input sample's peak lands on its 4x
position."""
TRUE_PEAK_REACH: Final = 128
"""Samples on each side that a 4x-oversampled value depends on: libsoxr's ``HQ`` filter reaches
97 input samples either way (an impulse's response above 1e-7); 128 leaves room."""
LOUDNESS_TOLERANCE_LU: Final = 0.1
MAX_PASSES: Final = 4
"""Gain then limit, re-measured: limiting lowers loudness a little, so a few passes settle."""
BLOCK_SECONDS: Final = 0.4
"""The BS.1770 gating block: shorter audio is padded with silence to be measured."""
SILENCE_LUFS: Final = -70.0


@dataclass(frozen=True)
class Mastered:
    """Audio after mastering, and what was measured."""

    audio: np.ndarray
    loudness: float
    """Integrated loudness after mastering, LUFS."""
    true_peak: float
    """Highest true peak after mastering, dBTP."""
    gain: float
    """Gain applied before limiting, dB."""


def db_to_linear(db: float) -> float:
    return float(10 ** (db / 20))


def integrated_loudness(audio: np.ndarray, rate: int) -> float:
    """Integrated loudness in LUFS; ``-inf`` for silence."""
    block = math.ceil(BLOCK_SECONDS * rate) + 1
    if len(audio) < block:
        audio = np.concatenate([audio, np.zeros(block - len(audio), dtype=audio.dtype)])
    samples = np.ascontiguousarray(audio, dtype=np.float32)
    meter = pyebur128.R128State(1, rate, pyebur128.MeasurementMode.MODE_I)
    meter.add_frames(samples, len(samples))
    return float(pyebur128.get_loudness_global(meter))


def true_peak(audio: np.ndarray) -> float:
    """The highest peak of ``audio`` oversampled 4 times, and never under its highest sample (as
    libebur128 reads it), in dBTP (``-inf`` for silence)."""
    if not len(audio):
        return -math.inf
    oversampled = oversample(audio)
    peak = max(  # no |x| copy of 4x the audio
        float(oversampled.max()), -float(oversampled.min()), float(audio.max()), -float(audio.min())
    )
    return 20 * math.log10(peak) if peak > 0 else -math.inf


def oversample(audio: np.ndarray) -> np.ndarray:
    """``audio`` at :data:`TRUE_PEAK_OVERSAMPLING` times its rate, as float32 (the rate itself
    does not matter: only the ratio does)."""
    samples = np.ascontiguousarray(audio, dtype=np.float32)
    oversampled: np.ndarray = soxr.resample(samples, 1, TRUE_PEAK_OVERSAMPLING, quality=OVERSAMPLING_QUALITY)
    return oversampled


def peak_envelope(audio: np.ndarray) -> np.ndarray:
    """Each sample's true peak: the largest magnitude among the sample itself and its
    4x-oversampled values. libsoxr's filter passes 91% of the band, so a lone spike (which
    reaches to the top of it) comes out lower than the sample: the sample counts too."""
    oversampled = oversample(audio)
    peaks: np.ndarray = np.abs(audio).astype(np.float32)
    for phase in range(TRUE_PEAK_OVERSAMPLING):  # one phase at a time: 13x faster than a row max
        np.maximum(peaks, np.abs(oversampled[phase::TRUE_PEAK_OVERSAMPLING]), out=peaks)
    return peaks


def limiter_gain(peaks: np.ndarray, rate: int, ceiling_db: float) -> np.ndarray:
    """Per-sample gain that brings every peak in ``peaks`` under ``ceiling_db``.

    The gain each sample needs is spread over a window on both sides (a minimum filter) and
    then smoothed by a moving average of the same width: the average of values that are all
    at most the need at a peak cannot exceed it, so every peak gets at least its reduction.
    Both filters reach one window to each side, so the gain is 1 more than a window away
    from any peak over the ceiling: only the stretches around those peaks are filtered
    (a tenth of the time of filtering all of a chapter of speech).
    """
    need = np.minimum(1.0, db_to_linear(ceiling_db) / np.maximum(peaks, 1e-12))
    width = max(1, round(LIMITER_WINDOW_SECONDS * rate)) | 1
    gain: np.ndarray = np.ones_like(need)
    for start, end in stretches(np.flatnonzero(need < 1.0), 2 * width, len(need)):
        near = need[start:end]  # ones for two windows at either end, as outside it
        gain[start:end] = moving_mean(moving_min(near, width), width)
    return gain


def moving_min(values: np.ndarray, width: int) -> np.ndarray:
    """The minimum of each ``width`` (odd) values centred on each one, the ends repeated outward."""
    half = width // 2
    padded = np.pad(values, half, mode="edge")
    minimum: np.ndarray = np.lib.stride_tricks.sliding_window_view(padded, width).min(axis=1)
    return minimum


def moving_mean(values: np.ndarray, width: int) -> np.ndarray:
    """The mean of each ``width`` (odd) values centred on each one, the ends repeated outward;
    summed in float64 and returned in the type of ``values``."""
    half = width // 2
    sums = np.concatenate([[0.0], np.cumsum(np.pad(values, half, mode="edge"), dtype=np.float64)])
    mean: np.ndarray = ((sums[width:] - sums[:-width]) / width).astype(values.dtype)
    return mean


def stretches(indices: np.ndarray, margin: int, length: int) -> list[tuple[int, int]]:
    """``[start, end)`` ranges holding every index of ``indices`` (sorted) with ``margin``
    samples on both sides, clipped to ``length``; ranges closer than that are merged, so each
    one's margins hold none of the others' indices."""
    if not len(indices):
        return []
    gaps = np.flatnonzero(np.diff(indices) > 2 * margin)
    firsts, lasts = indices[np.r_[0, gaps + 1]], indices[np.r_[gaps, len(indices) - 1]]
    return [
        (max(0, int(first) - margin), min(length, int(last) + margin + 1))
        for first, last in zip(firsts, lasts, strict=True)
    ]


def master(
    audio: np.ndarray, rate: int, target_lufs: float = TARGET_LUFS, ceiling_db: float = PEAK_CEILING_DBTP
) -> Mastered:
    """Bring ``audio`` to ``target_lufs`` with true peaks under ``ceiling_db``."""
    source = audio.astype(np.float32)
    loudness = integrated_loudness(source, rate)
    if not math.isfinite(loudness) or loudness < SILENCE_LUFS:
        return Mastered(source, loudness, true_peak(source), 0.0)
    peaks = peak_envelope(source)  # peaks scale with gain: measure them once
    highest = float(peaks.max())
    limit = db_to_linear(ceiling_db - LIMITER_MARGIN_DB)
    total_gain = 0.0
    audio = source
    limiter: np.ndarray | None = None
    for _ in range(MAX_PASSES):
        total_gain += target_lufs - loudness
        linear = db_to_linear(total_gain)
        limiter = None
        if highest * linear > limit:
            limiter = limiter_gain(peaks * linear, rate, ceiling_db - LIMITER_MARGIN_DB)
            audio = (source * (limiter * linear)).astype(np.float32)
        else:  # no peak reaches the limiter's aim: one gain for all, nothing to smooth
            audio = source * np.float32(linear)
        loudness = integrated_loudness(audio, rate)
        if abs(loudness - target_lufs) <= LOUDNESS_TOLERANCE_LU:
            break
    if limiter is None:  # oversampling is linear: under one gain the peak is the source's scaled
        peak = 20 * math.log10(highest * linear)
    else:
        peak = limited_true_peak(audio, limiter, peaks * linear)
    if peak > ceiling_db - LIMITER_MARGIN_DB / 2:  # the smoothed gain can leave a sliver over
        audio = audio * np.float32(db_to_linear(ceiling_db - LIMITER_MARGIN_DB / 2 - peak))
        loudness, peak = integrated_loudness(audio, rate), true_peak(audio)
    return Mastered(audio, loudness, peak, total_gain)


def limited_true_peak(audio: np.ndarray, limiter: np.ndarray, scaled_peaks: np.ndarray) -> float:
    """The true peak of ``audio``, which is the source times a gain times ``limiter``, in dBTP.

    Where the limiter is 1 for the whole reach of the oversampling filter, the audio is the
    source under one gain, so its peaks are ``scaled_peaks``; only the stretches the limiter
    touched are oversampled again (each with a margin, so that no edge of a cut reaches the
    samples read from it).
    """
    highest = 0.0
    untouched = np.ones(len(audio), dtype=bool)
    for start, end in stretches(np.flatnonzero(limiter < 1.0), TRUE_PEAK_REACH, len(audio)):
        first = max(0, start - TRUE_PEAK_REACH)
        envelope = peak_envelope(audio[first : end + TRUE_PEAK_REACH])
        highest = max(highest, float(envelope[start - first : end - first].max()))
        untouched[start:end] = False
    if untouched.any():
        highest = max(highest, float(scaled_peaks[untouched].max()))
    return 20 * math.log10(highest) if highest > 0 else -math.inf


def resample(audio: np.ndarray, rate: int, target_rate: int) -> np.ndarray:
    """``audio`` at ``target_rate`` (libsoxr's high quality; a no-op when the rates match)."""
    if rate == target_rate:
        return audio
    resampled: np.ndarray = soxr.resample(np.ascontiguousarray(audio), rate, target_rate, quality="HQ")
    return resampled.astype(audio.dtype)
