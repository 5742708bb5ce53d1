"""Where each word of a segment is spoken, from the durations the engine gave its phoneme ids.

A Piper voice's ids run ``^ _ p _ p _ ... $``: each phoneme followed by a pad, words parted by
the word gap (a space). The engine says how many decoder frames each id got (``Spoken.frames``),
and each frame is ``hop_length`` samples, so the audio of a word is known to the frame: it starts
at its first phoneme and ends after the pad that follows its last one. Punctuation, the pads
before a word and the gaps are silence between words, and belong to none.

Two halves, so that the worker's interpreter, which also feeds the GPU, does little:

- :func:`word_bounds`, on the text side (the text processes, with the phonemes): which ids each
  of the text's words spans. The text's words (``ttsfarm.core.timings.text_words``) pair one to one
  with the spoken words where there are as many of each. espeak-ng often speaks two words as one
  ("from the" as ``fɹʌmðə``) and reading aloud changes counts ("1998" as three words): then each
  text word gets the share of the sounding ids that its share of the characters gives, its edges
  moved to the nearest gap between spoken words where one is close.
- :func:`word_marks`, in the worker once the durations are known: those bounds in milliseconds
  from the segment's start, integers only (``SegmentTiming.words`` makes the words from them
  where they are read; docs/decisions/0040-word-marks-as-integers.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import accumulate
from pathlib import Path
from typing import Final, NamedTuple

import numpy as np

from ttsfarm.core.timings import text_words
from ttsfarm.core.voices import Voice

SILENT_SYMBOLS: Final = frozenset("^$_ !?,.;:'\"()-#\u2193")
"""Ids of these symbols are never part of a word's sound: the edges, pads, the word gap and
punctuation (which the voice speaks as a pause or a pitch change)."""

SNAP_IDS: Final = 3
"""A word edge found by share moves to a gap between spoken words at most this many sounding
ids away (about half a short word)."""

WordBounds = tuple[int, ...]
"""For each word of the text in turn, the index of its first id and of the id after its last (its
pad included): first, after, first, after..."""


class IdKinds(NamedTuple):
    """One voice's phoneme ids by kind, as lookup tables indexed by id."""

    sounding: np.ndarray
    gap: np.ndarray
    pad: np.ndarray


def _tables(id_map: Mapping[str, Sequence[int]]) -> IdKinds:
    size = 1 + max((value for values in id_map.values() for value in values), default=0)
    sounding, gap, pad = np.ones(size, dtype=bool), np.zeros(size, dtype=bool), np.zeros(size, dtype=bool)
    for symbol, values in id_map.items():
        if symbol in SILENT_SYMBOLS:
            sounding[list(values)] = False
        if symbol == " ":
            gap[list(values)] = True
        if symbol == "_":
            pad[list(values)] = True
    return IdKinds(sounding, gap, pad)


_kinds: dict[Path, IdKinds] = {}


def kinds_of(voice: Voice) -> IdKinds:
    """The voice's lookup tables, made once per voice file."""
    kinds = _kinds.get(voice.model_path)
    if kinds is None:
        kinds = _kinds[voice.model_path] = _tables(voice.phoneme_id_map)
    return kinds


def word_bounds(text: str, phoneme_ids: Sequence[int], voice: Voice) -> WordBounds:
    """Which of ``phoneme_ids`` each word of ``text`` spans (see the module's docstring)."""
    words = text_words(text)
    kinds = kinds_of(voice)
    ids = np.minimum(np.asarray(phoneme_ids, dtype=np.int64), len(kinds.sounding) - 1)
    sounding = np.flatnonzero(kinds.sounding[ids])
    if not words or not len(sounding):
        return ()
    word_of = np.cumsum(kinds.gap[ids])[sounding]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(word_of)) + 1))
    if len(starts) == len(words):
        cuts = [*starts.tolist(), len(sounding)]
    else:
        cuts = _cuts_by_share(words, len(sounding), starts)
    bounds = []
    for number in range(len(words)):
        first, last = int(sounding[cuts[number]]), int(sounding[cuts[number + 1] - 1])
        bounds += [first, last + 1 + int(last + 1 < len(ids) and kinds.pad[ids[last + 1]])]
    return tuple(bounds)


def _cuts_by_share(words: list[str], count: int, starts: np.ndarray) -> list[int]:
    """Word edges in the sounding ids: ``0``, each word's first, ``count``. By each word's share
    of the letters and digits, moved to a spoken word's start within :data:`SNAP_IDS`; strictly rising
    (every word gets an id) while there are ids enough."""
    lengths = np.array([sum(c.isalnum() for c in word) for word in words], dtype=np.float64)
    shares = np.round(np.cumsum(lengths)[:-1] / lengths.sum() * count).astype(np.int64)
    cuts = [0]
    for number, share in enumerate(shares.tolist()):
        nearest = int(starts[np.argmin(np.abs(starts - share))])
        cut = nearest if abs(nearest - share) <= SNAP_IDS else share
        room = count - (len(words) - number - 1)  # ids the later words still need
        cuts.append(min(max(cut, cuts[-1] + 1), room) if room > cuts[-1] else cuts[-1])
    return [*cuts, count]


def word_marks(bounds: WordBounds, frames: np.ndarray, voice: Voice) -> tuple[int, ...]:
    """``bounds`` (:func:`word_bounds`) in whole milliseconds from the segment's start, where
    ``frames`` are the engine's durations of its ids. Plain Python: on a few dozen numbers it
    is quicker than numpy's calls, and the worker's interpreter lock pays for every step."""
    if not bounds:
        return ()
    offsets = [0, *accumulate(frames.tolist())]
    per_frame = 1000 * voice.hop_length / voice.sample_rate
    return tuple([round(offsets[index] * per_frame) for index in bounds])


def even_frames(ids: int, seconds: float, voice: Voice) -> np.ndarray:
    """Durations for a segment whose own are not known (spoken in two halves): its ``seconds``
    shared evenly by its ``ids``."""
    return np.full(ids, seconds * voice.sample_rate / voice.hop_length / max(ids, 1))
