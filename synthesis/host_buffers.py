"""Host memory that a batch's audio is copied into from the GPU: reused, and page-locked on CUDA.

The staged engine copies each waveform replay's audio (rows x samples, float32: 25 MB for 32 rows
of 768 frames) to host memory before it cuts out each item's samples. Into fresh pageable memory
the CUDA driver stages the copy through a pinned buffer of its own, with the CPU copying every
byte a second time: 2.0 ms for those 25 MB on an idle H200 host, 7.0-7.6 ms under CUDA's profiler
(docs/decisions/0020-page-locked-host-buffers.md), on the graph lane, whose next replay waits for it. Into
page-locked memory the GPU writes directly: 0.51 ms, 50 GB/s.

Page-locking is slow and the memory is the host's, so buffers are kept and reused:
:meth:`HostBuffers.take` lends an array of the asked shape backed by the smallest free buffer that
holds it (new ones are made in powers of two), :meth:`HostBuffers.give` takes it back. A buffer is
in use from the copy until the engine has cut the items out of it, so as many are lent at once as
batches are in flight (the batcher's runners); at most :data:`KEPT_FREE` free ones are kept, the
smallest let go first. Each buffer is memory of its own from ``mmap``, page-aligned, since
``cudaHostRegister`` locks whole pages and two buffers must never share one. It is locked with the
CUDA runtime's ``cudaHostRegister`` (through ``ctypes``, from the runtime library the CUDA provider
loaded where it can be found); where that library or call is not there, the buffers are plain
memory, still reused. One pool serves every engine of a process on one device
(``synthesis.devices``): a buffer is lent only while a batch is in flight, and the batches of a
device are the batcher's, whatever the voice.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
import threading
import weakref
from collections.abc import Sequence
from typing import Final

import numpy as np

log = logging.getLogger(__name__)

CUDA_RUNTIMES: Final = ("libcudart.so.13", "libcudart.so.12", "libcudart.so")
"""The CUDA runtime's library names, newest first."""
PORTABLE: Final = 1
"""``cudaHostRegisterPortable``: the memory counts as page-locked for every CUDA context."""
SMALLEST: Final = 1 << 20
"""Bytes of the smallest buffer made."""
KEPT_FREE: Final = 6
"""Free buffers kept for later batches; past that, the smallest given back is let go."""
FLOAT_BYTES: Final = np.dtype(np.float32).itemsize


def cuda_runtime() -> ctypes.CDLL | None:
    """The CUDA runtime library: the one already loaded in this process if there is one (the
    CUDA provider's), else the newest that loads; ``None`` where none can be."""
    for mode in (getattr(os, "RTLD_NOLOAD", 0) | ctypes.DEFAULT_MODE, ctypes.DEFAULT_MODE):
        for name in CUDA_RUNTIMES:
            try:
                return ctypes.CDLL(name, mode=mode)
            except OSError:
                continue
    return None


def _size_for(nbytes: int) -> int:
    return max(SMALLEST, 1 << (max(nbytes, 1) - 1).bit_length())


def _page_aligned(size: int) -> np.ndarray:
    """``size`` bytes of zeroed, page-aligned memory no other buffer shares, freed with the array."""
    return np.frombuffer(mmap.mmap(-1, size), dtype=np.uint8)


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
        self._free: list[np.ndarray] = []
        """Free buffers, smallest first."""
        self._lent: dict[int, np.ndarray] = {}
        self._locked: dict[int, np.ndarray] = {}
        """Every buffer page-locked and not let go, by address; kept alive until it is unlocked."""
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

    @property
    def free(self) -> int:
        """Buffers kept for reuse."""
        with self._lock:
            return len(self._free)

    def take(self, shape: Sequence[int]) -> np.ndarray:
        """A float32 array of ``shape`` in a buffer no one else holds, until :meth:`give`."""
        nbytes = int(np.prod(shape)) * FLOAT_BYTES
        with self._lock:
            fits = next((i for i, kept in enumerate(self._free) if kept.size >= nbytes), None)
            buffer = self._free.pop(fits) if fits is not None else None
        if buffer is None:
            buffer = self._new(_size_for(nbytes))
        array = buffer[:nbytes].view(np.float32).reshape(shape)
        with self._lock:
            self._lent[array.ctypes.data] = buffer
        return array

    def give(self, array: np.ndarray) -> None:
        """Take back an array :meth:`take` lent; its memory may be written again at once."""
        with self._lock:
            buffer = self._lent.pop(array.ctypes.data)
            self._free.append(buffer)
            self._free.sort(key=lambda kept: kept.size)
            dropped = self._free.pop(0) if len(self._free) > KEPT_FREE else None
        if dropped is not None:
            self._let_go(dropped)

    def close(self) -> None:
        """Unlock every buffer; new ones are plain memory (and those lent must not be used)."""
        with self._lock:
            self._locking = False
            self._free.clear()
        self._finalizer()

    def _new(self, size: int) -> np.ndarray:
        buffer = _page_aligned(size)
        runtime = self._runtime
        if runtime is None or not self._locking:
            return buffer
        assert self.device_id is not None  # a runtime is loaded only for a device
        status = runtime.cudaSetDevice(self.device_id)  # this thread's device, as the copy's
        if status == 0:
            address, length = ctypes.c_void_p(buffer.ctypes.data), ctypes.c_size_t(size)
            status = runtime.cudaHostRegister(address, length, PORTABLE)
        if status != 0:
            runtime.cudaGetLastError()  # clear it, or the thread's next CUDA check reports it
            log.warning("page-locking host memory failed (CUDA error %d): pageable memory then", status)
            self._locking = False
            return buffer
        with self._lock:
            self._locked[buffer.ctypes.data] = buffer
        return buffer

    def _let_go(self, buffer: np.ndarray) -> None:
        with self._lock:
            locked = self._locked.pop(buffer.ctypes.data, None) is not None
        if locked and self._runtime is not None:
            self._runtime.cudaHostUnregister(ctypes.c_void_p(buffer.ctypes.data))


def _unlock_all(runtime: ctypes.CDLL | None, locked: dict[int, np.ndarray]) -> None:
    """Unlock ``locked`` (before their memory can be freed); errors, at exit, are of no use."""
    if runtime is not None:
        for address in locked:
            runtime.cudaHostUnregister(ctypes.c_void_p(address))
    locked.clear()
