"""Batches and session builds on a device go side by side; a CUDA graph capture goes alone.

onnxruntime captures a graph in CUDA's global capture mode: while it captures, another thread
that allocates device memory or copies on the legacy stream fails, and breaks the capture. So a
capture waits until no batch runs and no session is being built on the device, and those wait
until the capture is done (``synthesis.waveform_graphs``). A capture waiting goes first: new
batches wait behind it, so a steady stream of batches cannot keep it out.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class RunGate:
    """Shared for batches and builds, alone for captures (a readers-writer lock that favours the
    writer). Neither side may be taken again inside itself: a batch inside a batch would wait
    behind a capture that waits for the outer one."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._batches = 0
        self._waiting_alone = 0
        self._alone = False

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Held while one batch or build uses the device, beside others."""
        with self._changed:
            while self._alone or self._waiting_alone:
                self._changed.wait()
            self._batches += 1
        try:
            yield
        finally:
            with self._changed:
                self._batches -= 1
                if not self._batches:
                    self._changed.notify_all()

    @contextmanager
    def alone(self) -> Iterator[None]:
        """Held while nothing else uses the device: once the batches on it are done."""
        with self._changed:
            self._waiting_alone += 1
            try:
                while self._alone or self._batches:
                    self._changed.wait()
            finally:
                self._waiting_alone -= 1
                self._changed.notify_all()  # batches held back by this wait look again
            self._alone = True
        try:
            yield
        finally:
            with self._changed:
                self._alone = False
                self._changed.notify_all()

    @property
    def batches(self) -> int:
        """Batches and builds on the device now."""
        with self._changed:
            return self._batches

    @property
    def waiting_alone(self) -> int:
        """Captures waiting for the device."""
        with self._changed:
            return self._waiting_alone
