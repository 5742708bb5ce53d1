"""Terminal progress bars (tqdm on stderr): one job's segments (:class:`ProgressBar`) and a whole
audiobook's sentences and chapters (:class:`BookProgress`), both drawn by :func:`terminal_bar`."""

from __future__ import annotations

import threading
from typing import Any, Protocol

from tqdm import tqdm


class _Progress(Protocol):
    @property
    def segments_done(self) -> int: ...
    @property
    def segments_total(self) -> int: ...
    @property
    def audio_seconds(self) -> float: ...


def terminal_bar(label: str, unit: str, total: int, done: int, disable: bool) -> tqdm[Any]:
    """A bar that starts at ``done``: what was done before it appeared counts as its start, not
    as work done in no time, so the first rate shown is a real one."""
    return tqdm(
        desc=label, unit=unit, total=total, initial=done, disable=disable, dynamic_ncols=True, leave=True
    )


def show(bar: tqdm[Any], postfix: str) -> None:
    bar.set_postfix_str(postfix, refresh=False)
    bar.refresh()


class ProgressBar:
    """A segment counter that also shows seconds of audio produced; feed it ``Progress``.

    The bar appears with the first progress, so a job that fails its checks prints its
    one-line error and no empty bar."""

    def __init__(self, label: str, disable: bool = False) -> None:
        self.label, self.disable = label, disable
        self._bar: tqdm[Any] | None = None
        self._done = 0

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.close()

    def update(self, progress: _Progress) -> None:
        if self._bar is None:
            self._bar = terminal_bar(
                self.label, "seg", progress.segments_total, progress.segments_done, self.disable
            )
        else:
            self._bar.total = progress.segments_total
            self._bar.update(progress.segments_done - self._done)
        self._done = progress.segments_done
        show(self._bar, f"{progress.audio_seconds:.0f} s audio")


class BookProgress:
    """Counts segments ("sentences") and chapters across every part of a book, with the time
    left. Parts report from several threads, so updates lock."""

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
        self._bar = terminal_bar("audiobook", "sentence", segments_total, segments_done, self._disable)
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
        show(self._bar, f"chapters {chapters_done}/{self._chapters}, {self._audio:.0f} s audio")
