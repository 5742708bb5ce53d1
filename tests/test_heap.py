"""The C heap's free memory is given back after a GPU engine's start (``synthesis.heap``)."""

from __future__ import annotations

import platform

import pytest

from synthesis.heap import give_back_free_heap


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_glibc_is_asked_to_give_back_its_free_heap() -> None:
    assert give_back_free_heap()
