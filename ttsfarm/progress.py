"""Terminal progress bars (tqdm on stderr): one job's segments (:class:`ProgressBar`) and a whole
audiobook, spoken and finished (:class:`BookProgress`), both drawn by :func:`terminal_bar`."""

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
    """A whole audiobook in one bar. Every sentence counts twice: once when it is spoken, once when
    its chapter is finished (mastered and encoded), so the bar reaches 100% when the last chapter
    is finished, and its time left covers both. Parts report from several threads, so updates lock."""

    def __init__(self, disable: bool = False) -> None:
        self._disable = disable
        self._bar: tqdm[Any] | None = None
        self._lock = threading.Lock()
        self._part_state: dict[str, tuple[int, float]] = {}
        self._chapters = self._chapters_done = 0
        self._audio = 0.0

    def __enter__(self) -> BookProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.close()

    def start(
        self, sentences: int, spoken: int, finished: int, chapters: int, chapters_done: int, audio: float
    ) -> None:
        """Begin counting: ``sentences`` in the book (an estimate for parts not yet spoken),
        ``spoken`` and ``finished`` of them done before this run."""
        self._chapters, self._chapters_done, self._audio = chapters, chapters_done, audio
        self._bar = terminal_bar("audiobook", "step", 2 * sentences, spoken + finished, self._disable)
        self._refresh()

    def spoken(self, part: str, sentences: int, audio: float) -> None:
        """A part has now ``sentences`` spoken, ``audio`` seconds of them."""
        with self._lock:
            before_sentences, before_audio = self._part_state.get(part, (0, 0.0))
            self._part_state[part] = (sentences, audio)
            self._audio += audio - before_audio
            if self._bar is not None:
                self._bar.update(sentences - before_sentences)
            self._refresh()

    def part_done(self, part: str, estimated: int, sentences: int, audio: float) -> None:
        """A part is spoken: ``sentences`` it had, where the count began from ``estimated``."""
        self.spoken(part, sentences, audio)
        with self._lock:
            if self._bar is not None and self._bar.total is not None and sentences != estimated:
                self._bar.total += 2 * (sentences - estimated)
                self._refresh()

    def chapter_done(self, sentences: int) -> None:
        """A chapter of ``sentences`` is finished: mastered, encoded and kept."""
        with self._lock:
            self._chapters_done += 1
            if self._bar is not None:
                self._bar.update(sentences)
            self._refresh()

    def stage(self, name: str) -> None:
        """Name what happens now (``joining``, ``uploading``) once every chapter is finished."""
        with self._lock:
            if self._bar is not None:
                self._bar.set_description_str(name)
                self._refresh()

    def _refresh(self) -> None:
        if self._bar is None:
            return
        show(
            self._bar, f"chapters {self._chapters_done}/{self._chapters} finished, {self._audio:.0f} s audio"
        )
