"""Loudness mastering: audio brought to one integrated loudness (ITU-R BS.1770 / EBU R128, as
``ttsfarm.core.loudness`` measures it) with true peaks kept under a ceiling by a look-ahead limiter.
Pure functions on float arrays; no files here.

The audio is measured once. Its block energies give the loudness at any gain without another
pass, and only the stretches around its loudest samples are oversampled for true peaks
(:data:`~ttsfarm.core.loudness.INTERSAMPLE_HEADROOM_DB`); the limiter's effect on each block is
estimated from those stretches. Only after hard limiting is the result measured again in full
(:data:`ESTIMATE_TRUSTED_LU`). ``benchmarks/mastering_cost.py`` prints the CPU time per audio second."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import soxr

from ttsfarm.core.job_limits import DEFAULT_LOUDNESS
from ttsfarm.core.loudness import (
    BLOCK_HOPS,
    INTERSAMPLE_HEADROOM_DB,
    STRETCH_MARGIN,
    block_energies,
    envelopes,
    gated_loudness,
    hop_samples,
    integrated_loudness,
    spans_index,
    stretches,
    to_db,
    true_peak,
)

TARGET_LUFS: Final = DEFAULT_LOUDNESS
"""Integrated loudness of every chapter: a common target for spoken word."""
PEAK_CEILING_DBTP: Final = -1.0
"""True peaks (4x oversampled) stay below this, leaving room for lossy encoders."""
PEAK_FIX_PASSES: Final = 4
"""Encodings of one file at most while its decoded true peak is over the ceiling."""
PEAK_FIX_MARGIN_DB: Final = 0.2
"""How far under the ceiling a file encoded again aims."""
METER_RESOLUTION_DB: Final = 0.1
"""ffmpeg's meter prints true peaks to 0.1 dB: a file's peak must be that far under the ceiling
for every meter to read it under."""
LIMITER_MARGIN_DB: Final = 0.3
"""The limiter aims this far under the ceiling, for 16-bit rounding and resampling."""
LIMITER_WINDOW_SECONDS: Final = 0.010
"""Look-ahead and smoothing of the limiter's gain: short enough to leave speech intact,
long enough not to distort a 100 Hz voice."""
LOUDNESS_TOLERANCE_LU: Final = 0.1
MAX_PASSES: Final = 4
"""Gain then limit, re-estimated: limiting lowers loudness a little, so a few passes settle."""
MAX_MEASURED_PASSES: Final = 3
"""Full measurements of the result at most: a second only when the estimate missed."""
ESTIMATE_TRUSTED_LU: Final = 1.5
"""Where limiting lowers the loudness by at most this much, the estimate of the loudness after
limiting is what a full measurement reads to within 0.01 LU (joe's speech brought to -23 to -16
LUFS: 0.000 to 0.012 apart), and it stands; after harder limiting (-14 LUFS: 0.04 to 0.07 apart)
the result is measured."""
GAIN_ALLOWANCE_DB: Final = 1.0
"""The stretches oversampled for peaks cover gains up to this much over the first estimate
(limiting lowers the loudness, so the gain rises a little from pass to pass)."""
MAX_LIMITING_DB: Final = 10.0
"""The gain goes at most this far over what brings the unlimited audio to the target: a target so
loud that the limiter would need more would lift pauses and breaths toward the speech (joe at
-10 LUFS), so such audio ends under its target instead."""
MIN_SLOPE: Final = 0.25
"""The least loudness (LU) a dB of gain is taken to add, however hard the limiter works."""
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


@dataclass(frozen=True)
class LimiterGain:
    """The limiter's gain where it is not 1: over the stretches ``bounds`` (rows of start, end),
    joined in order in ``gain``; ``index`` holds their samples' positions in the audio."""

    bounds: np.ndarray
    index: np.ndarray
    gain: np.ndarray


def db_to_linear(db: float) -> float:
    return float(10 ** (db / 20))


def master(
    audio: np.ndarray, rate: int, target_lufs: float = TARGET_LUFS, ceiling_db: float = PEAK_CEILING_DBTP
) -> Mastered:
    """Bring ``audio`` to ``target_lufs`` with true peaks under ``ceiling_db``."""
    source = np.ascontiguousarray(audio, dtype=np.float32)
    energies = block_energies(source, rate)
    loudness = gated_loudness(energies)
    if not math.isfinite(loudness) or loudness < SILENCE_LUFS:
        return Mastered(source, loudness, true_peak(source), 0.0)
    aim = db_to_linear(ceiling_db - LIMITER_MARGIN_DB)
    hops = _HopEnergies(source, rate)
    gain = target_lufs - loudness
    most = gain + MAX_LIMITING_DB
    peaks = _LoudPeaks(source, aim, gain + GAIN_ALLOWANCE_DB)
    steps = _GainSteps(target_lufs, most)
    for attempt in range(MAX_MEASURED_PASSES):
        for _ in range(MAX_PASSES):
            limits = limiter_gain(peaks.at(gain), rate, aim / db_to_linear(gain))
            estimate = gated_loudness(energies * hops.ratios(limits), gain)
            following = steps.next(gain, estimate)
            if abs(estimate - target_lufs) <= LOUDNESS_TOLERANCE_LU or following == gain:
                break  # on target, or as loud as the limiter may make it
            gain = following
        else:  # the last pass moved the gain: limit at the gain the audio gets, and measure
            limits = limiter_gain(peaks.at(gain), rate, aim / db_to_linear(gain))
            estimate = math.nan
        mastered = source * np.float32(db_to_linear(gain))
        mastered[limits.index] *= limits.gain
        if gated_loudness(energies, gain) - estimate <= ESTIMATE_TRUSTED_LU:
            loudness = estimate  # light limiting: the estimate is what a measurement reads
            break
        loudness = integrated_loudness(mastered, rate)
        following = steps.next(gain, loudness)  # the estimate missed: once more from the measurement
        if abs(loudness - target_lufs) <= LOUDNESS_TOLERANCE_LU or following == gain:
            break
        if attempt == MAX_MEASURED_PASSES - 1:
            break  # keep what was measured: the audio is at ``gain``
        gain = following
    peak = _peak_after(mastered, peaks.at(gain), db_to_linear(gain), limits, aim)
    if peak > ceiling_db - LIMITER_MARGIN_DB / 2:  # the smoothed gain can leave a sliver over
        mastered *= np.float32(db_to_linear(ceiling_db - LIMITER_MARGIN_DB / 2 - peak))
        loudness, peak = integrated_loudness(mastered, rate), true_peak(mastered)
    return Mastered(mastered, loudness, peak, gain)


def headroom_after(
    decoded_peak: float, headroom: float, ceiling_db: float = PEAK_CEILING_DBTP
) -> float | None:
    """A lossy encoder lifts peaks: after an encoding made ``headroom`` dB under the ceiling
    decoded to ``decoded_peak`` dBTP, ``None`` if that is under the ceiling (as every meter
    reads it), else the headroom to encode again with."""
    if decoded_peak <= ceiling_db - METER_RESOLUTION_DB:
        return None
    return headroom + decoded_peak - ceiling_db + METER_RESOLUTION_DB + PEAK_FIX_MARGIN_DB


def limit(audio: np.ndarray, rate: int, ceiling_db: float) -> np.ndarray:
    """``audio`` with its true peaks brought under ``ceiling_db`` by the limiter alone (no gain:
    the loudness moves only as much as the peaks it touches)."""
    source = np.ascontiguousarray(audio, dtype=np.float32)
    aim = db_to_linear(ceiling_db - LIMITER_MARGIN_DB)
    peaks = _LoudPeaks(source, aim, 0.0).at(0.0)
    limits = limiter_gain(peaks, rate, aim)
    limited = source.copy()
    limited[limits.index] *= limits.gain
    return limited


class _GainSteps:
    """The next gain to try, from the loudness the last ones gave: under heavy limiting a dB of
    gain adds less than a dB of loudness, so the step follows the slope seen so far; never over
    ``most`` dB."""

    def __init__(self, target: float, most: float) -> None:
        self.target, self.most = target, most
        self.last: tuple[float, float] | None = None

    def next(self, gain: float, loudness: float) -> float:
        slope = 1.0
        if self.last is not None and gain != self.last[0]:
            slope = min(1.0, max(MIN_SLOPE, (loudness - self.last[1]) / (gain - self.last[0])))
        self.last = (gain, loudness)
        return min(self.most, gain + (self.target - loudness) / slope)


class _LoudPeaks:
    """The true-peak envelope of the source around every sample that a gain up to ``gain_db``
    could bring near ``aim``, and around its loudest sample (the reported peak); zero elsewhere.
    Made again for a louder gain."""

    def __init__(self, source: np.ndarray, aim: float, gain_db: float) -> None:
        self.source, self.aim = source, aim
        self.loudest = float(np.abs(source).max())
        self._make(gain_db)

    def _make(self, gain_db: float) -> None:
        level = min(self.aim / db_to_linear(gain_db), self.loudest) * db_to_linear(-INTERSAMPLE_HEADROOM_DB)
        bounds = stretches(np.flatnonzero(np.abs(self.source) >= level), STRETCH_MARGIN, len(self.source))
        self.peaks = np.zeros(len(self.source), dtype=np.float32)
        self.peaks[spans_index(bounds[:, 0], bounds[:, 1] - bounds[:, 0])] = envelopes(self.source, bounds)
        self.reach = gain_db

    def at(self, gain_db: float) -> np.ndarray:
        """The envelope, good for ``gain_db``."""
        if gain_db > self.reach:  # heavy limiting: the gain keeps rising, so leave more room
            self._make(gain_db + 3 * GAIN_ALLOWANCE_DB)
        return self.peaks


def limiter_gain(peaks: np.ndarray, rate: int, level: float) -> LimiterGain:
    """The gain that brings every value of ``peaks`` under ``level``, where it is not 1.

    The gain each sample needs is spread over a window on both sides (a minimum filter) and
    then smoothed by a moving average of the same width: the average of values that are all
    at most the need at a peak cannot exceed it, so every peak gets at least its reduction.
    Both filters reach one window to each side, so the gain is 1 more than a window away from
    any peak over ``level``. Each stretch keeps two windows of ones at either end, so the
    stretches are filtered joined, as one, and each comes out as it would alone."""
    width = max(1, round(LIMITER_WINDOW_SECONDS * rate)) | 1
    bounds = stretches(np.flatnonzero(peaks > level), 2 * width, len(peaks))
    index = spans_index(bounds[:, 0], bounds[:, 1] - bounds[:, 0])
    need = np.minimum(np.float32(1.0), np.float32(level) / np.maximum(peaks[index], np.float32(1e-12)))
    gain = moving_mean(moving_min(need, width), width) if len(need) else need
    return LimiterGain(bounds, index, gain)


def moving_min(values: np.ndarray, width: int) -> np.ndarray:
    """The minimum of each ``width`` (odd) values centred on each one, the ends repeated outward
    (van Herk and Gil-Werman: running minima within blocks of ``width``, three passes)."""
    half = width // 2
    padded = np.pad(values, (half, half + (-(len(values) + 2 * half)) % width), mode="edge")
    blocks = padded.reshape(-1, width)
    prefix = np.minimum.accumulate(blocks, axis=1).ravel()
    suffix = np.minimum.accumulate(blocks[:, ::-1], axis=1)[:, ::-1].ravel()
    count = len(values)
    minimum: np.ndarray = np.minimum(suffix[:count], prefix[width - 1 : width - 1 + count])
    return minimum


def moving_mean(values: np.ndarray, width: int) -> np.ndarray:
    """The mean of each ``width`` (odd) values centred on each one, the ends repeated outward;
    summed in float64 and returned in the type of ``values``."""
    half = width // 2
    sums = np.concatenate([[0.0], np.cumsum(np.pad(values, half, mode="edge"), dtype=np.float64)])
    mean: np.ndarray = ((sums[width:] - sums[:-width]) / width).astype(values.dtype)
    return mean


class _HopEnergies:
    """The source's energy in each 100 ms hop, to estimate how limiting changes each gating
    block's energy: by the share of the block's energy the limiter takes away."""

    def __init__(self, source: np.ndarray, rate: int) -> None:
        self.hop = hop_samples(rate)
        hops = max(BLOCK_HOPS, len(source) // self.hop)  # short audio is measured padded
        self.source = source
        squares = np.zeros(hops * self.hop, dtype=np.float32)
        usable = min(len(source), len(squares))
        np.square(source[:usable], out=squares[:usable])
        self.energy = squares.reshape(hops, self.hop).sum(axis=1, dtype=np.float64)

    def ratios(self, limits: LimiterGain) -> np.ndarray:
        """Each block's energy after limiting over its energy before (1 where untouched)."""
        counted = limits.index < len(self.energy) * self.hop  # a last, partial hop is in no block
        index = limits.index[counted]
        squares = self.source[index].astype(np.float64) ** 2
        lost = squares * (limits.gain[counted].astype(np.float64) ** 2 - 1.0)
        removed = np.bincount(index // self.hop, lost, minlength=len(self.energy))
        before, after = _block_sums(self.energy), _block_sums(self.energy + removed)
        ratios: np.ndarray = np.divide(after, before, out=np.ones_like(before), where=before > 0)
        return ratios


def _block_sums(per_hop: np.ndarray) -> np.ndarray:
    totals = np.concatenate([[0.0], np.cumsum(per_hop)])
    sums: np.ndarray = totals[BLOCK_HOPS:] - totals[:-BLOCK_HOPS]
    return sums


def _peak_after(
    mastered: np.ndarray, peaks: np.ndarray, linear: float, limits: LimiterGain, aim: float
) -> float:
    """The true peak (dBTP) of ``mastered``: oversampled again where the limiter acted, and
    elsewhere the source's ``peaks`` under one gain (a stretch's ends are ones for longer than
    the oversampling filter reaches). Every sample left alone has a peak under ``aim``, so the
    highest such sample anywhere stands for them: it is never lower, and never over ``aim``."""
    limited = float(envelopes(mastered, limits.bounds).max(initial=0.0))
    level = aim / linear
    alone = float(np.max(peaks, where=peaks <= level, initial=0.0)) * linear
    return to_db(max(limited, alone))


def resample(audio: np.ndarray, rate: int, target_rate: int) -> np.ndarray:
    """``audio`` at ``target_rate`` (libsoxr's high quality; a no-op when the rates match)."""
    if rate == target_rate:
        return audio
    resampled: np.ndarray = soxr.resample(np.ascontiguousarray(audio), rate, target_rate, quality="HQ")
    return resampled.astype(audio.dtype)
