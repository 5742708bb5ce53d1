"""Timing an engine: what a benchmark waits for before it starts the clock."""

from __future__ import annotations

import contextlib
from concurrent.futures import CancelledError

from synthesis.background import Background


def until_prepared(background: Background) -> None:
    """Return once every step given to ``background`` so far has run (at once if it is closed):
    an engine's buckets, captures and fillers, so that what is timed next is a prepared engine."""
    with contextlib.suppress(CancelledError):
        background.submit(lambda: None, "a benchmark's wait for the preparation").result()
