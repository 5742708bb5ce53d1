"""What the speech tests share: the real engine, asked once per segment."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from synthesis.engine import Engine, EngineItem, Scales, Spoken
from tests.helpers_engine import EngineWrapper

SegmentKey = tuple[tuple[int, ...], int | None, Scales]


class SpokenOnce(EngineWrapper):
    """The real engine, except that a segment it has spoken already comes back as a copy of that
    audio, in an array of its own: a text that repeats one passage, or one text made again in
    another format, costs the engine the first time only."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.spoken: dict[SegmentKey, Spoken] = {}
        self.runs = 0

    def speak(self, items: Sequence[EngineItem], scales: Scales) -> list[Spoken]:
        keys = [(tuple(item.phoneme_ids), item.speaker_id, scales) for item in items]
        new = {key: item for key, item in zip(keys, items, strict=True) if key not in self.spoken}
        if new:
            self.runs += 1
            self.spoken.update(zip(new, self.engine.speak(list(new.values()), scales), strict=True))
        return [Spoken(self.spoken[key].audio.copy(), self.spoken[key].frames) for key in keys]

    def run(self, items: Sequence[EngineItem], scales: Scales) -> list[np.ndarray]:
        return [spoken.audio for spoken in self.speak(items, scales)]
