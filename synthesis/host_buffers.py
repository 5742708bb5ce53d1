"""Host memory that a batch's audio is copied into from the GPU: reused, and page-locked on CUDA.

The staged engine copies each waveform replay's audio (rows x samples, float32: 25 MB for 32 rows
of 768 frames) to host memory before it cuts out each item's samples. Into fresh pageable memory
the CUDA driver stages the copy through a pinned buffer of its own, with the CPU copying every
byte a second time: 2.0 ms for those 25 MB on an idle H200 host, 7.0-7.6 ms under the profiler
(docs/benchmarks.md, run 30), on the graph lane, whose next replay waits for it. Into page-locked
memory the GPU writes directly: 0.51 ms, 50 GB/s.

Page-locking is slow and the memory is the host's, so buffers are kept and reused:
:meth:`HostBuffers.take` lends an array of the asked shape backed by a free buffer at least that
large (sizes go in powers of two), :meth:`HostBuffers.give` takes it back. A buffer is in use from
the copy until the engine has cut the items out of it, so the pool grows to the batches in flight
at once (the batcher's runners), no further. The memory is locked with the CUDA runtime's
``cudaHostRegister`` (through ``ctypes``, from the CUDA runtime library onnxruntime's CUDA provider
loaded); where that library or call is not there, the buffers are plain memory, still reused.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import weakref
from collections.abc import Sequence
from typing import Final

import numpy as np

log = logging.getLogger(__name__)

CUDA_RUNTIMES: Final = ("libcudart.so.13", "libcudart.so.12", "libcudart.so")
"""The CUDA runtime's library names, newest first (loaded already where the CUDA provider is)."""
PORTABLE: Final = 1
"""``cudaHostRegisterPortable``: the memory counts as page-locked for every CUDA context."""
SMALLEST: Final = 1 << 20
KEPT_PER_SIZE: Final = 4
"""Free buffers kept per size; more in use at once are made and, once given back, let go."""


def cuda_runtime() -> ctypes.CDLL | None:
    """The CUDA runtime library, or ``None`` where it cannot be loaded."""
    for name in CUDA_RUNTIMES:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def _size_for(nbytes: int) -> int:
    return max(SMALLEST, 1 << (max(nbytes, 1) - 1).bit_length())


class HostBuffers:
    """Reused host buffers for float32 audio; page-locked for CUDA device ``device_id``, plain
    memory with ``device_id=None`` (or where locking is not possible, which it logs once)."""

    def __init__(self, device_id: int | None) -> None:
        self.device_id = device_id
        self._runtime = cuda_runtime() if device_id is not None else None
        """Unlocks what was locked; ``None`` off CUDA."""
        self._locking = self._runtime is not None
        if device_id is not None and self._runtime is None:
            log.warning("no CUDA runtime library found: audio is copied to pageable host memory")
        self._free: dict[int, list[np.ndarray]] = {}
        self._lent: dict[int, np.ndarray] = {}
        self._locked: list[np.ndarray] = []
        """Every buffer page-locked so far; kept alive until the finalizer unlocks it."""
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _unlock_all, self._runtime, self._locked)

    @property
    def pinned(self) -> bool:
        """Whether new buffers are page-locked (false off CUDA, or once locking failed)."""
        return self._locking

    @property
    def lent(self) -> int:
        """Arrays lent and not given back yet."""
        with self._lock:
            return len(self._lent)

    def take(self, shape: Sequence[int]) -> np.ndarray:
        """A float32 array of ``shape`` in a buffer no one else holds, until :meth:`give`."""
        count = int(np.prod(shape))
        size = _size_for(count * 4)
        with self._lock:
            free = self._free.get(size)
            buffer = free.pop() if free else None
        if buffer is None:
            buffer = self._new(size)
        array = buffer[: count * 4].view(np.float32).reshape(shape)
        with self._lock:
            self._lent[array.ctypes.data] = buffer
        return array

    def give(self, array: np.ndarray) -> None:
        """Take back an array :meth:`take` lent; its memory may be written again at once."""
        with self._lock:
            buffer = self._lent.pop(array.ctypes.data)
            free = self._free.setdefault(buffer.size, [])
            if len(free) < KEPT_PER_SIZE:
                free.append(buffer)
                return
        self._let_go(buffer)

    def close(self) -> None:
        """Unlock and let go of every buffer (those lent out must not be used after this)."""
        self._finalizer()

    def _new(self, size: int) -> np.ndarray:
        buffer = np.empty(size, dtype=np.uint8)
        runtime = self._runtime
        if runtime is None or not self._locking:
            return buffer
        assert self.device_id is not None  # a runtime is loaded only for a device
        status = runtime.cudaSetDevice(self.device_id)  # this thread's device, as the copy's
        if status == 0:
            address, length = ctypes.c_void_p(buffer.ctypes.data), ctypes.c_size_t(size)
            status = runtime.cudaHostRegister(address, length, PORTABLE)
        if status != 0:
            log.warning("page-locking host memory failed (CUDA error %d): pageable memory then", status)
            self._locking = False
            return buffer
        with self._lock:
            self._locked.append(buffer)
        return buffer

    def _let_go(self, buffer: np.ndarray) -> None:
        with self._lock:
            locked = any(kept is buffer for kept in self._locked)
            if locked:
                self._locked[:] = [kept for kept in self._locked if kept is not buffer]
        if locked and self._runtime is not None:
            self._runtime.cudaHostUnregister(ctypes.c_void_p(buffer.ctypes.data))


def _unlock_all(runtime: ctypes.CDLL | None, locked: list[np.ndarray]) -> None:
    """Unlock ``locked`` (before their memory can be freed); errors, at exit, are of no use."""
    if runtime is not None:
        for buffer in locked:
            runtime.cudaHostUnregister(ctypes.c_void_p(buffer.ctypes.data))
    locked.clear()
