"""Terminal progress bars for long jobs (tqdm on stderr)."""

from __future__ import annotations

from typing import Any, Protocol

from tqdm import tqdm


class _Progress(Protocol):
    @property
    def segments_done(self) -> int: ...
    @property
    def segments_total(self) -> int: ...
    @property
    def audio_seconds(self) -> float: ...


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
            # What was done before the bar appeared counts as its start, not as work done in
            # no time: the first rate shown is then a real one.
            self._bar = tqdm(
                desc=self.label,
                unit="seg",
                total=progress.segments_total,
                initial=progress.segments_done,
                disable=self.disable,
                dynamic_ncols=True,
                leave=True,
            )
        else:
            self._bar.total = progress.segments_total
            self._bar.update(progress.segments_done - self._done)
        self._done = progress.segments_done
        self._bar.set_postfix_str(f"{progress.audio_seconds:.0f} s audio", refresh=False)
        self._bar.refresh()
