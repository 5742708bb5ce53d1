"""Where each word of a segment is spoken, from the durations the engine gave its phoneme ids.

A Piper voice's ids run ``^ _ p _ p _ ... $``: each phoneme followed by a pad, words parted by
the word gap (a space). The engine says how many decoder frames each id got (``Spoken.frames``),
and each frame is ``hop_length`` samples, so the audio of a word is known to the frame: it starts
at its first phoneme and ends after the pad that follows its last one. Punctuation, the pads
before a word and the gaps are silence between words, and belong to none.

The text's words (runs of non-space characters with a letter or digit) are matched to the
spoken words one to one where there are as many of each. Where reading aloud changed the count
("1998" spoken as three words, ``[[ phonemes ]]`` in the text), or where no durations are known,
each text word gets the share of the segment's phonemes that its share of the characters gives,
timed through the same frames: still monotonic, still within the segment, only less exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from ttsfarm.jobs import WordTiming
from ttsfarm.voices import Voice

SILENT_SYMBOLS: Final = frozenset("^$_ !?,.;:'\"()-#\u2193")
"""Ids of these symbols are never part of a word's sound: the edges, pads, the word gap and
punctuation (which the voice speaks as a pause or a pitch change)."""


def text_words(text: str) -> list[str]:
    """The words of a segment's text that are read aloud: non-space runs with a letter or digit."""
    return [word for word in text.split() if any(character.isalnum() for character in word)]


def word_timings(
    text: str,
    phoneme_ids: Sequence[int],
    frames: np.ndarray | None,
    voice: Voice,
    span: tuple[float, float],
) -> tuple[WordTiming, ...]:
    """Each of ``text``'s words with its start and end, in seconds; the segment's audio is
    ``span`` (start, end). ``frames`` are the engine's durations of ``phoneme_ids`` (``None``:
    unknown, the segment's phonemes are then taken as equally long)."""
    words = text_words(text)
    if not words or not phoneme_ids:
        return ()
    ids = np.asarray(phoneme_ids)
    per_id = np.ones(len(ids), dtype=np.int64) if frames is None else np.asarray(frames, dtype=np.int64)
    if len(per_id) != len(ids):
        raise ValueError(f"{len(per_id)} durations for {len(ids)} phoneme ids")
    start, end = span
    hop = voice.hop_length / voice.sample_rate
    seconds_per_frame = hop if frames is not None else (end - start) / len(ids)
    offsets = np.concatenate([[0], np.cumsum(per_id)]) * seconds_per_frame + start
    spoken = _spoken_words(ids, voice)
    if frames is not None and len(spoken) == len(words):
        pairs = zip(words, spoken, strict=True)
        return tuple(WordTiming(word, float(offsets[a]), float(offsets[b])) for word, (a, b) in pairs)
    return _by_share(words, ids, voice, offsets)


def _silent_ids(voice: Voice) -> frozenset[int]:
    id_map = voice.phoneme_id_map
    return frozenset(value for symbol in SILENT_SYMBOLS for value in id_map.get(symbol, ()))


def _spoken_words(ids: np.ndarray, voice: Voice) -> list[tuple[int, int]]:
    """``(first, end)`` index pairs of each spoken word's ids: from its first sounding id to
    after the pad that follows its last (the pad carries the phoneme's tail)."""
    silent = _silent_ids(voice)
    gap = set(voice.phoneme_id_map.get(" ", ()))
    pads = set(voice.phoneme_id_map.get("_", ()))
    words: list[tuple[int, int]] = []
    first = last = -1
    for index, value in enumerate(ids.tolist()):
        if value in gap:
            if first >= 0:
                words.append((first, last))
            first = last = -1
        elif value not in silent:
            first = index if first < 0 else first
            last = index + 1 + (index + 1 < len(ids) and int(ids[index + 1]) in pads)
    if first >= 0:
        words.append((first, last))
    return words


def _by_share(words: list[str], ids: np.ndarray, voice: Voice, offsets: np.ndarray) -> tuple[WordTiming, ...]:
    """Each word over the sounding ids its share of the characters gives, timed by ``offsets``."""
    silent = _silent_ids(voice)
    sounding = [index for index, value in enumerate(ids.tolist()) if value not in silent]
    if not sounding:
        return ()
    count = len(sounding)
    lengths = np.array([len(word) for word in words], dtype=np.float64)
    cuts = np.round(np.concatenate([[0.0], np.cumsum(lengths)]) / lengths.sum() * count).astype(int)
    timings = []
    for number, word in enumerate(words):
        first = min(int(cuts[number]), count - 1)
        after = min(max(int(cuts[number + 1]), first + 1), count)
        start, end = offsets[sounding[first]], offsets[sounding[after - 1] + 1]
        timings.append(WordTiming(word, float(start), float(end)))
    return tuple(timings)
