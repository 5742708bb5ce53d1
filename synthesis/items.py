"""What goes into an engine and what comes out: items, scales, padded inputs, cut audio."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from ttsfarm.core.voices import Voice

PAD_ID: Final = 0
"""Phoneme id used to right-pad shorter items in a batch (Piper's ``_``)."""

WARMUP_PHONEMES: Final = "h\u0259l\u02c8o\u028a."  # "hello." in IPA
"""A short utterance run once at load, so kernels and memory pools are ready."""


@dataclass(frozen=True)
class Scales:
    """The model's ``scales`` input; one value for a whole batch."""

    noise_scale: float
    length_scale: float
    noise_w: float

    def as_array(self) -> np.ndarray:
        return np.array([self.noise_scale, self.length_scale, self.noise_w], dtype=np.float32)


@dataclass(frozen=True)
class EngineItem:
    """One utterance for the model: phoneme ids with BOS/EOS, and a speaker id if any."""

    phoneme_ids: Sequence[int]
    speaker_id: int | None = None


@dataclass(frozen=True)
class Spoken:
    """One item as the engine spoke it."""

    audio: np.ndarray
    """float32 samples, exactly ``frames.sum() * hop_length`` of them where ``frames`` is known."""
    frames: np.ndarray | None
    """Decoder frames each of the item's phoneme ids got (the model's durations), in order;
    ``None`` where the engine cannot say (an item spoken in two halves)."""


def spoken_items(audio: list[np.ndarray], durations: np.ndarray, lengths: Sequence[int]) -> list[Spoken]:
    """Each cut item's audio with its own row of ``durations`` (``(rows, ids)``), cut to its
    phoneme ids."""
    return [
        Spoken(wave, np.array(durations[row, :length], dtype=np.int32))
        for row, (wave, length) in enumerate(zip(audio, lengths, strict=True))
    ]


def cut_items(audio: np.ndarray, samples: np.ndarray, count: int) -> list[np.ndarray]:
    """The first ``count`` rows of a batch's ``(rows, samples)`` audio, each trimmed to its own
    ``samples``, as arrays of their own (writable; nothing refers back to ``audio``).

    Copied through ``bytearray``, which keeps the interpreter lock for the whole copy: a numpy
    copy of this size lets go of it and must then win it back, and in a worker, behind 40-odd
    threads, the 32 copies of a batch took 25-30 ms where engine alone they took 3 (the ``cut``
    counter, docs/decisions/0024-cut-items-keep-the-lock.md; ``benchmarks/cut_items.py`` shows the
    waiting on a CPU)."""
    dtype = audio.dtype
    return [np.frombuffer(bytearray(audio[row, : samples[row]]), dtype=dtype) for row in range(count)]


def padded_feeds(
    items: Sequence[EngineItem], rows: int, width: int, scales: Scales, takes_sid: bool
) -> dict[str, np.ndarray]:
    """The graph's inputs for a batch padded to ``rows`` x ``width`` phoneme ids. Spare rows
    repeat the shortest item (their audio is discarded)."""
    lengths = np.array([len(item.phoneme_ids) for item in items], dtype=np.int64)
    shortest = int(np.argmin(lengths))
    ids = np.full((rows, width), PAD_ID, dtype=np.int64)
    all_lengths = np.full(rows, lengths[shortest], dtype=np.int64)
    all_lengths[: len(items)] = lengths
    for row in range(rows):
        source = items[row] if row < len(items) else items[shortest]
        ids[row, : all_lengths[row]] = source.phoneme_ids
    feeds = {"input": ids, "input_lengths": all_lengths, "scales": scales.as_array()}
    if takes_sid:
        sids = [item.speaker_id or 0 for item in items] + [0] * (rows - len(items))
        feeds["sid"] = np.array(sids, dtype=np.int64)
    return feeds


def warmup_ids(voice: Voice) -> list[int]:
    """Phoneme ids of :data:`WARMUP_PHONEMES` in the voice's own id map."""
    id_map = voice.phoneme_id_map
    ids = [*id_map["^"], *id_map["_"]]
    for phoneme in WARMUP_PHONEMES:
        if phoneme in id_map:
            ids += [*id_map[phoneme], *id_map["_"]]
    return [*ids, *id_map["$"]]


def filler_ids(voice: Voice, length: int) -> list[int]:
    """A speakable id sequence of exactly ``length`` ids (the warm-up word, repeated)."""
    base = warmup_ids(voice)
    head, inner, tail = base[:2], base[2:-1], base[-1:]
    body = (inner * (length // max(len(inner), 1) + 1))[: max(length - len(head) - len(tail), 0)]
    return [*head, *body, *tail][:length]


def voice_scales(voice: Voice) -> Scales:
    """The voice's own noise, length and noise-w scales (its config's ``inference`` section)."""
    return Scales(voice.noise_scale, voice.length_scale, voice.noise_w)
