"""Giving the C heap's free memory back to the system after a burst of work in many threads.

glibc keeps an arena per thread that allocates, and memory freed in an arena stays with the
process. A GPU engine builds its 26 bucket sessions side by side (``StagedEngine.prepare``),
and the builds' scratch memory stayed: a worker held 9,975 MiB after its start against 5,643
MiB once glibc was asked to give the free memory back (docs/decisions/0041-sessions-built-side-by-side.md).
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)


def give_back_free_heap() -> bool:
    """Ask glibc to return its arenas' free memory to the system (``malloc_trim``, looked up
    among the symbols the process has loaded); false where the C library is not glibc."""
    try:
        trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    except OSError:
        trim = None
    if trim is None:
        log.debug("no malloc_trim in this C library: the heap keeps its free memory")
        return False
    trim(0)
    return True
