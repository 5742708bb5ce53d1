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
    """A segment counter that also shows seconds of audio produced; feed it ``Progress``."""

    def __init__(self, label: str, disable: bool = False) -> None:
        self._bar = tqdm(desc=label, unit="seg", disable=disable, dynamic_ncols=True, leave=True)

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._bar.close()

    def update(self, progress: _Progress) -> None:
        self._bar.total = progress.segments_total
        self._bar.n = progress.segments_done
        self._bar.set_postfix_str(f"{progress.audio_seconds:.0f} s audio", refresh=False)
        self._bar.refresh()
