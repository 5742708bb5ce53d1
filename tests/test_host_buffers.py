"""Host buffers for the audio copied off the GPU (``synthesis.host_buffers``): lent, given back,
reused; plain memory where there is no CUDA runtime to page-lock it with."""

from __future__ import annotations

import ctypes
import logging

import numpy as np
import pytest

from synthesis.host_buffers import KEPT_PER_SIZE, SMALLEST, HostBuffers, cuda_runtime


def test_a_buffer_given_back_is_lent_again() -> None:
    buffers = HostBuffers(None)
    first = buffers.take((4, 1000))
    assert (first.shape, buffers.lent) == ((4, 1000), 1)
    assert first.dtype == np.float32
    first[:] = 1.0
    address = first.ctypes.data
    buffers.give(first)
    assert buffers.lent == 0
    again = buffers.take((2, 300))  # smaller: the same size class
    assert again.ctypes.data == address and again.shape == (2, 300)
    buffers.give(again)


def test_buffers_lent_at_once_do_not_overlap() -> None:
    buffers = HostBuffers(None)
    arrays = [buffers.take((8, 5000)) for _ in range(3)]
    for value, array in enumerate(arrays):
        array[:] = value
    for value, array in enumerate(arrays):
        assert np.all(array == value)
        buffers.give(array)


def test_sizes_go_in_powers_of_two_and_the_free_ones_are_bounded() -> None:
    buffers = HostBuffers(None)
    big = buffers.take((SMALLEST // 4 + 1,))  # one float past the smallest size
    small = buffers.take((10,))
    assert big.base is not None and big.base.nbytes == 2 * SMALLEST
    assert small.base is not None and small.base.nbytes == SMALLEST
    many = [buffers.take((10,)) for _ in range(KEPT_PER_SIZE + 2)]
    for array in [big, small, *many]:
        buffers.give(array)
    assert len(buffers._free[SMALLEST]) == KEPT_PER_SIZE
    assert len(buffers._free[2 * SMALLEST]) == 1


def test_an_array_not_lent_is_refused() -> None:
    buffers = HostBuffers(None)
    with pytest.raises(KeyError):
        buffers.give(np.zeros(10, dtype=np.float32))


def _gpu_here() -> bool:
    runtime = cuda_runtime()
    count = ctypes.c_int(0)
    return runtime is not None and runtime.cudaGetDeviceCount(ctypes.byref(count)) == 0 and count.value > 0


@pytest.mark.skipif(_gpu_here(), reason="a GPU is here: memory can be locked")
def test_where_memory_cannot_be_locked_the_buffers_are_plain(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="synthesis.host_buffers"):
        buffers = HostBuffers(0)  # no runtime library, or one that finds no GPU: either says so
        array = buffers.take((3, 3))
    assert not buffers.pinned
    assert "pageable" in caplog.text
    array[:] = 2.0
    buffers.give(array)
    buffers.close()
