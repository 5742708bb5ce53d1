"""Host buffers for the audio copied off the GPU (``synthesis.host_buffers``): lent, given back,
reused, each on pages of its own; plain memory where there is no GPU to page-lock them for."""

from __future__ import annotations

import ctypes
import logging
import mmap

import numpy as np
import pytest

from synthesis.devices import device
from synthesis.host_buffers import KEPT_FREE, SMALLEST, HostBuffers, cuda_runtime


def _gpu_here() -> bool:
    runtime = cuda_runtime()
    count = ctypes.c_int(0)
    return runtime is not None and runtime.cudaGetDeviceCount(ctypes.byref(count)) == 0 and count.value > 0


def test_a_buffer_given_back_is_lent_again() -> None:
    buffers = HostBuffers(None)
    first = buffers.take((4, 1000))
    assert (first.shape, buffers.lent) == ((4, 1000), 1)
    assert first.dtype == np.float32
    first[:] = 1.0
    address = first.ctypes.data
    buffers.give(first)
    assert (buffers.lent, buffers.free) == (0, 1)
    again = buffers.take((2, 300))  # smaller: the same buffer holds it
    assert again.ctypes.data == address and again.shape == (2, 300)
    buffers.give(again)


def test_buffers_lent_at_once_do_not_overlap_or_share_a_page() -> None:
    buffers = HostBuffers(None)
    arrays = [buffers.take((n,)) for n in (10, 300_000, 5, SMALLEST // 4 + 1)]
    for value, array in enumerate(arrays):
        array[:] = value
    pages = [
        (a.ctypes.data // mmap.PAGESIZE, (a.ctypes.data + a.nbytes - 1) // mmap.PAGESIZE) for a in arrays
    ]
    for value, array in enumerate(arrays):
        assert array.ctypes.data % mmap.PAGESIZE == 0
        assert np.all(array == value)
        others = [span for index, span in enumerate(pages) if index != value]
        assert all(pages[value][1] < first or last < pages[value][0] for first, last in others)
        buffers.give(array)


def test_the_smallest_free_buffer_that_holds_it_is_taken_and_few_are_kept() -> None:
    buffers = HostBuffers(None)
    big = buffers.take((SMALLEST // 4 + 1,))  # one float past the smallest size
    small = buffers.take((10,))
    assert big.base is not None and big.base.nbytes == 2 * SMALLEST
    assert small.base is not None and small.base.nbytes == SMALLEST
    big_address, small_address = big.ctypes.data, small.ctypes.data
    buffers.give(big)
    buffers.give(small)
    assert buffers.take((20,)).ctypes.data == small_address  # the small one fits: the big one stays
    assert buffers.take((20,)).ctypes.data == big_address  # the next fits only in the big one
    many = [buffers.take((10,)) for _ in range(KEPT_FREE + 3)]
    for array in many:
        buffers.give(array)
    assert (buffers.free, buffers.lent) == (KEPT_FREE, 2)


def test_an_array_not_lent_is_refused() -> None:
    buffers = HostBuffers(None)
    with pytest.raises(KeyError):
        buffers.give(np.zeros(10, dtype=np.float32))


def test_where_memory_cannot_be_locked_the_buffers_are_plain(caplog: pytest.LogCaptureFixture) -> None:
    if _gpu_here():
        pytest.skip("a GPU is here: memory can be locked")
    with caplog.at_level(logging.WARNING, logger="synthesis.host_buffers"):
        buffers = HostBuffers(0)  # no runtime library, or one that finds no GPU: either says so
        array = buffers.take((3, 3))
    assert not buffers.pinned
    assert "pageable" in caplog.text
    array[:] = 2.0
    buffers.give(array)
    buffers.close()


def test_on_a_gpu_every_buffer_is_locked() -> None:
    if not _gpu_here():
        pytest.skip("no GPU here")
    buffers = HostBuffers(0)
    arrays = [buffers.take((n,)) for n in (10, 300_000, 5, SMALLEST // 4 + 1, 2_000_000) * 2]
    assert buffers.pinned
    for array in arrays:
        buffers.give(array)
    buffers.close()


def test_one_pool_per_device() -> None:
    plain = device(None).host
    assert device(None).host is plain
    assert not plain.pinned  # off CUDA: plain memory
