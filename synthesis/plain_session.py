"""The voice's own graph, one item at a time, speaking a fraction of a second after it is asked.

When onnxruntime builds a session it optimizes the graph and plans how the graph's values
reuse each other's memory. For a Piper voice's 2,700 nodes the two take about 1.1 s of the
1.26 s build on 2 cores. A session built without them (``synthesis.sessions.starter_options``)
is ready in about 0.13 s and runs up to a quarter slower
(docs/decisions/0039-a-starter-session-on-the-cpu.md). So a :class:`PlainSessions` first builds
such a starter session and speaks with it. From its second run on, the full session is built
beside it, in a thread, and takes over once ready. A one-sentence command never waits for the
full build; a long text runs at full speed after its first second or so.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import onnxruntime as ort

log = logging.getLogger(__name__)

SessionMaker = Callable[[bool], ort.InferenceSession]
"""Builds the session: with ``True``, the starter (no memory reuse); with ``False``, the full one."""


class PlainSessions:
    """The starter session until the full one is built, then the full one; with ``quick_start``
    false (on a GPU, or when profiling), the full one from the start."""

    def __init__(self, make: SessionMaker, name: str, quick_start: bool = True) -> None:
        self._make = make
        self._name = name
        self._quick_start = quick_start
        self._full: ort.InferenceSession | None = None
        self._starter: ort.InferenceSession | None = None
        self._starter_runs = 0
        self._builder: threading.Thread | None = None
        self._lock = threading.Lock()

    def current(self) -> ort.InferenceSession:
        """The session to inspect (inputs, outputs, providers): the starter is built if there
        is none yet; no full build is started."""
        if self._full is not None:
            return self._full
        with self._lock:
            return self._full or self._starter_locked()

    def for_run(self) -> ort.InferenceSession:
        """The session to run an item with; a second run on the starter starts the full build."""
        if self._full is not None:  # every run asks, so no lock once the full session is there
            return self._full
        with self._lock:
            if self._full is not None:
                return self._full
            starter = self._starter_locked()
            self._starter_runs += 1
            if self._starter_runs > 1 and self._builder is None:
                # Not a daemon: the interpreter waits for the build at exit instead of tearing
                # onnxruntime down under it.
                name = f"{self._name}-full"
                self._builder = threading.Thread(target=self._build_full, name=name, daemon=False)
                self._builder.start()
            return starter

    def wait(self) -> None:
        """Wait for a full build that has started."""
        if self._builder is not None:
            self._builder.join()

    def full(self) -> ort.InferenceSession:
        """The full session, built now (in this thread) if it is not there yet: for benchmarks
        that time runs, through ``Engine.prepare``."""
        self.wait()
        with self._lock:
            if self._full is None:
                self._full = self._make(False)
                self._starter = None
            return self._full

    def alive(self) -> list[ort.InferenceSession]:
        """The sessions built and not yet dropped."""
        with self._lock:
            return [session for session in (self._starter, self._full) if session is not None]

    def _starter_locked(self) -> ort.InferenceSession:
        if not self._quick_start:
            self._full = self._full or self._make(False)
            return self._full
        if self._starter is None:
            self._starter = self._make(True)
        return self._starter

    def _build_full(self) -> None:
        try:
            full = self._make(False)
        except Exception as error:  # the starter works: keep speaking with it, and say why
            log.warning("%s: no full session (%s); runs stay on the starter", self._name, error)
            return
        with self._lock:
            self._full = full
            self._starter = None  # freed once the runs that hold it end
