"""Is the engine able to run? The answer behind the worker's container health check.

A Celery ping only shows that the worker's consumer answers; an engine whose device failed (a
sticky CUDA error, a hung run) fails every job while the ping still answers. Here a worker is
healthy when a batch succeeded lately, or when a one-word batch run now through the batcher (the
same path as jobs, behind the jobs already waiting) comes back with audio in time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Final

from synthesis.engine import EngineItem, warmup_ids
from synthesis.pipeline import Synthesizer
from ttsfarm.core.settings import PROBE_TIMEOUT_SECONDS

RECENT_BATCH_SECONDS: Final = 30.0
"""A batch that succeeded this recently is proof enough: a busy worker is not probed."""


class EngineHealth:
    """Tracks the batcher's successful runs and probes the engine when there were none lately."""

    def __init__(self, synthesizer: Synthesizer, voice: str) -> None:
        self.synthesizer = synthesizer
        self.voice = voice
        self._last_batch = 0.0
        self._lock = threading.Lock()
        synthesizer.batcher.observe(self._batch_ran)

    def _batch_ran(self, lengths: Sequence[int], seconds: float) -> None:
        with self._lock:
            self._last_batch = time.monotonic()

    def check(self, timeout: float = PROBE_TIMEOUT_SECONDS) -> dict[str, Any]:
        """``{"ok": bool, ...}``: how it was decided, and on failure why."""
        with self._lock:
            since = time.monotonic() - self._last_batch
        if since < RECENT_BATCH_SECONDS:
            return {**self._ok(), "checked": "recent batch", "seconds_ago": round(since, 1)}
        started = time.monotonic()
        try:
            voice = self.synthesizer.voice(self.voice)
            engine = self.synthesizer.batcher.engine(voice)
            future = self.synthesizer.batcher.submit(
                voice, EngineItem(warmup_ids(voice)), engine.default_scales()
            )
            try:
                wave = future.result(timeout).audio
            finally:
                future.cancel()  # a probe that timed out must not run later for nobody
        except FutureTimeout:
            return {"ok": False, "error": f"a one-word batch did not finish within {timeout:.0f} s"}
        except Exception as error:  # whatever the engine raises is the answer
            return {"ok": False, "error": f"a one-word batch failed: {type(error).__name__}: {error}"}
        if not len(wave):
            return {"ok": False, "error": "a one-word batch gave no audio"}
        return {**self._ok(), "checked": "probe batch", "seconds": round(time.monotonic() - started, 3)}

    def _ok(self) -> dict[str, Any]:
        providers = sorted({engine.provider for engine in self.synthesizer.batcher.engines.values()})
        return {"ok": True, "provider": ",".join(providers)}
