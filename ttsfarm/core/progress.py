"""Terminal progress bars (tqdm on stderr): one job's segments (:class:`ProgressBar`) and a whole
audiobook, spoken and finished (:class:`BookProgress`), both drawn by :func:`terminal_bar`."""

from __future__ import annotations

import threading
import time
from typing import Any, Final, Protocol

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


BOOK_BAR_STEPS: Final = 1000
BOOK_BAR_FORMAT: Final = "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}{postfix}]"


class BookProgress:
    """A whole audiobook in one bar, from its first part spoken to its last chapter finished.

    A book is spoken and finished at once (a chapter is mastered and encoded as soon as its parts
    are spoken), at rates that differ by machine: a CPU speaks slower than it finishes, a GPU much
    faster. The time left is the longer of the two: the sentences still to speak at the speaking
    rate so far, and the chapters still to finish at the time finished chapters took per sentence,
    shared among the places that finish chapters at once. The bar shows the share of the time
    gone, so that the time left it shows is that one. Parts report from several threads."""

    def __init__(self, disable: bool = False) -> None:
        self._disable = disable
        self._bar: tqdm[Any] | None = None
        self._lock = threading.Lock()
        self._part_state: dict[str, tuple[int, float]] = {}
        self._chapters = self._chapters_done = 0
        self._audio = 0.0
        self._started = time.monotonic()
        self.sentences = self.spoken_now = self.finished_now = 0
        self._spoken_before = self._finished_before = 0
        self._places = 1
        self._finishing: dict[int, tuple[float, int]] = {}
        """Chapters being finished: when each began, and its sentences."""
        self._finished_seconds = 0.0
        """Time the chapters finished in this run took, one by one."""
        self.fraction = 0.0
        """The share of the time gone, 0 to 1: 1 once the last chapter is finished."""

    def __enter__(self) -> BookProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.close()

    def start(
        self,
        sentences: int,
        spoken: int,
        finished: int,
        chapters: int,
        chapters_done: int,
        audio: float,
        places: int = 1,
    ) -> None:
        """Begin counting: ``sentences`` in the book (an estimate for parts not yet spoken),
        ``spoken`` and ``finished`` of them done before this run; ``places``: chapters finished
        at once."""
        self._chapters, self._chapters_done, self._audio = chapters, chapters_done, audio
        self.sentences, self._spoken_before, self._finished_before = sentences, spoken, finished
        self._places = max(1, places)
        self._started = time.monotonic()
        self._bar = tqdm(
            desc="audiobook",
            total=BOOK_BAR_STEPS,
            disable=self._disable,
            dynamic_ncols=True,
            leave=True,
            smoothing=0,  # the bar moves with the share of time: its average rate gives the time left
            bar_format=BOOK_BAR_FORMAT,
        )
        self._update()

    def time_left(self) -> float | None:
        """Seconds left (``None`` before anything was done to tell)."""
        now = time.monotonic()
        to_speak = self.sentences - self._spoken_before - self.spoken_now
        to_finish = self.sentences - self._finished_before - self.finished_now
        if not to_finish:
            return 0.0
        speaking = to_speak * (now - self._started) / self.spoken_now if self.spoken_now else None
        finishing = None
        per_sentence = None  # seconds a place takes to finish a sentence
        if self.finished_now:
            per_sentence = self._finished_seconds / self.finished_now
        elif self._finishing:  # none finished yet: at least as long as the slowest so far has run
            per_sentence = max((now - began) / max(count, 1) for began, count in self._finishing.values())
        if per_sentence is not None:
            running = [
                max(0.0, per_sentence * count - (now - began)) for began, count in self._finishing.values()
            ]
            waiting = to_finish - sum(count for _, count in self._finishing.values())
            work = per_sentence * max(0, waiting) + sum(running)
            finishing = max(work / self._places, max(running, default=0.0))
        known = [t for t in (speaking, finishing) if t is not None]
        return max(known) if known else None

    def spoken(self, part: str, sentences: int, audio: float) -> None:
        """A part has now ``sentences`` spoken, ``audio`` seconds of them."""
        with self._lock:
            before_sentences, before_audio = self._part_state.get(part, (0, 0.0))
            self._part_state[part] = (sentences, audio)
            self._audio += audio - before_audio
            self.spoken_now += sentences - before_sentences
            self._update()

    def part_done(self, part: str, estimated: int, sentences: int, audio: float) -> None:
        """A part is spoken: ``sentences`` it had, where the count began from ``estimated``."""
        self.spoken(part, sentences, audio)
        with self._lock:
            self.sentences += sentences - estimated
            self._update()

    def chapter_started(self, chapter: int, sentences: int) -> None:
        """Chapter number ``chapter``, of ``sentences``, is handed over to be finished."""
        with self._lock:
            self._finishing[chapter] = (time.monotonic(), sentences)

    def chapter_done(self, chapter: int, sentences: int) -> None:
        """A chapter of ``sentences`` is finished: mastered, encoded and kept."""
        with self._lock:
            began, _ = self._finishing.pop(chapter, (time.monotonic(), sentences))
            self._finished_seconds += time.monotonic() - began
            self._chapters_done += 1
            self.finished_now += sentences
            self._update()

    def stage(self, name: str) -> None:
        """Name what happens now (``joining``, ``uploading``) once every chapter is finished."""
        with self._lock:
            if self._bar is not None:
                self._bar.set_description_str(name)
                self._update()

    def _update(self) -> None:
        left = self.time_left()
        if left is not None:
            elapsed = time.monotonic() - self._started
            self.fraction = 1.0 if left == 0 else elapsed / (elapsed + left)  # back too, when a rate falls
        if self._bar is None:
            return
        self._bar.update(round(self.fraction * BOOK_BAR_STEPS) - self._bar.n)
        show(
            self._bar, f"chapters {self._chapters_done}/{self._chapters} finished, {self._audio:.0f} s audio"
        )
