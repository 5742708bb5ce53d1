"""What a process keeps once per device and shares among its engines: the one owner of it.

- the *graph lane*: the one thread that replays every captured waveform graph on a CUDA device.
  Those graphs share one arena: a replay writes to the addresses it was captured with, so no two
  may run at once, and nothing else may allocate from that arena (weights live outside it);
- the pool of host buffers that audio is copied into (``synthesis.host_buffers``);
- the gate that lets batches and builds run side by side and a graph capture alone
  (``synthesis.run_gate``);
- which kind of engine shares the device's one registered CUDA arena (:data:`ArenaUser`).

``device(None)`` is the CPU: no lane, plain host buffers, no arena.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

import onnxruntime as ort

from synthesis.host_buffers import HostBuffers
from synthesis.run_gate import RunGate
from synthesis.sessions import CUDA

log = logging.getLogger(__name__)

ArenaUser = Literal["buckets", "graphs"]
"""Who shares a device's arena: the single-session engine's bucket sessions, which run at
once from several threads, or the staged engine's captured waveform graphs, which run one at a
time on the device's graph lane. The two cannot share: a replayed graph writes to the addresses
it was captured with, which the arena may since have lent to a run in another thread."""


class Device:
    """One device's shared resources, made when first asked for."""

    def __init__(self, device_id: int | None) -> None:
        self.device_id = device_id
        self.host = HostBuffers(device_id)
        """Host memory for audio copied off this device: page-locked on CUDA, reused."""
        self.gate = RunGate()
        """Batches and session builds on this device share it; a graph capture takes it alone."""
        self._lane: ThreadPoolExecutor | None = None
        self._arena_user: ArenaUser | None = None
        self._lock = threading.Lock()

    def graph_lane(self) -> ThreadPoolExecutor:
        """The one thread that runs every captured waveform graph of this process here."""
        with self._lock:
            if self._lane is None:
                name = f"ttsfarm-graphs{self.device_id if self.device_id is not None else '-cpu'}"
                self._lane = ThreadPoolExecutor(1, thread_name_prefix=name)
            return self._lane

    def share_arena(self, user: ArenaUser) -> bool:
        """Register one CUDA memory arena on this device that the ``user``'s sessions share.

        With one session per shape bucket, per-session arenas would each grow to their bucket's
        peak; a shared one grows only to the largest single batch. False off CUDA, if this build
        cannot do it, or if the other kind of user has the device's arena already."""
        if self.device_id is None:
            return False
        with self._lock:
            if self._arena_user is not None:
                return self._arena_user == user
            try:
                info = ort.OrtMemoryInfo(
                    "Cuda", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, self.device_id, ort.OrtMemType.DEFAULT
                )
                provider_options = {"device_id": str(self.device_id)}
                ort.create_and_register_allocator_v2(CUDA, info, provider_options, ort.OrtArenaCfg({}))
            except Exception as error:  # onnxruntime raises its own untyped errors
                log.warning("no shared GPU arena (%s): each session keeps its own", error)
                return False
            self._arena_user = user
            return True


_devices: dict[int | None, Device] = {}
_devices_lock = threading.Lock()


def device(device_id: int | None) -> Device:
    """The process's :class:`Device` for CUDA device ``device_id`` (``None``: the CPU)."""
    with _devices_lock:
        if device_id not in _devices:
            _devices[device_id] = Device(device_id)
        return _devices[device_id]
