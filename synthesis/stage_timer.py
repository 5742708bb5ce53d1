"""Where the staged engine's batches spend their time, stage by stage."""

from __future__ import annotations

import threading
from typing import Final

STAGES: Final = (
    "front",
    "plan",
    "slot_wait",
    "expand",
    "lane_wait",
    "waveform",
    "lane_return",
    "copy",
    "cut",
)
"""What :class:`StageTimer` adds up, in a batch's order: ``front`` (its inputs padded and bound,
and its run), ``plan`` (the frame bucket from the durations), ``slot_wait`` (for the waveform slot
of the batch's shape to be free), ``expand``, ``lane_wait`` (from the replay's submit to its
start on the graph lane), ``waveform`` (the replay), ``lane_return`` (from the replay's end to
the runner going on: the hand-back and the interpreter lock), ``copy`` (to the host) and
``cut`` (the items' audio copied out of the lent host buffer, and the buffer given back).
Without buckets (no slots, no lane) only the front, the plan and the cut are counted."""


class StageTimer:
    """Seconds spent in each of :data:`STAGES` so far; the runners add to it at once."""

    def __init__(self) -> None:
        self._seconds = dict.fromkeys(STAGES, 0.0)
        self._lock = threading.Lock()

    def spent(self, **seconds: float) -> None:
        """Add these seconds, by stage name."""
        with self._lock:
            for stage, spent in seconds.items():
                self._seconds[stage] += spent

    def totals(self) -> dict[str, float]:
        with self._lock:
            return dict(self._seconds)
