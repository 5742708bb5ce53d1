"""The audiobook progress bar (tqdm on stderr): sentences done of all, chapters done, seconds
of audio produced and the time left. Parts report from several threads, so updates lock."""

from __future__ import annotations

import threading
from typing import Any

from tqdm import tqdm


class BookProgress:
    """Counts segments ("sentences") and chapters across every part of a book."""

    def __init__(self, disable: bool = False) -> None:
        self._disable = disable
        self._bar: tqdm[Any] | None = None
        self._lock = threading.Lock()
        self._parts_left: dict[int, int] = {}
        self._part_state: dict[str, tuple[int, float]] = {}
        self._chapters = 0
        self._audio = 0.0

    def __enter__(self) -> BookProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.close()

    def start(
        self, parts_left: dict[int, int], segments_total: int, segments_done: int, audio: float
    ) -> None:
        """Begin counting: ``parts_left`` maps chapter number to its parts still to render."""
        self._parts_left = dict(parts_left)
        self._chapters = len(parts_left)
        self._audio = audio
        self._bar = tqdm(
            desc="audiobook",
            total=segments_total,
            initial=segments_done,
            unit="sentence",
            disable=self._disable,
            dynamic_ncols=True,
            leave=True,
        )
        self._refresh()

    def advance(self, part: str, segments: int, audio: float) -> None:
        """A part has now ``segments`` segments and ``audio`` seconds done."""
        with self._lock:
            before_segments, before_audio = self._part_state.get(part, (0, 0.0))
            self._part_state[part] = (segments, audio)
            self._audio += audio - before_audio
            if self._bar is not None:
                self._bar.update(segments - before_segments)
            self._refresh()

    def finished(self, chapter: int, part: str, segments: int, audio: float) -> None:
        """A part is rendered and cached."""
        self.advance(part, segments, audio)
        with self._lock:
            self._parts_left[chapter] -= 1
            self._refresh()

    def stage(self, name: str) -> None:
        """Name what happens now (``mastering``, ``encoding``) once every part is rendered."""
        with self._lock:
            if self._bar is not None:
                self._bar.set_description_str(name)
                self._refresh()

    def _refresh(self) -> None:
        if self._bar is None:
            return
        chapters_done = sum(1 for left in self._parts_left.values() if left == 0)
        self._bar.set_postfix_str(
            f"chapters {chapters_done}/{self._chapters}, {self._audio:.0f} s audio", refresh=False
        )
        self._bar.refresh()
