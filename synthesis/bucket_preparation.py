"""How a staged engine gets its shape buckets ready: every front session and waveform slot of
the batch sizes it is prepared for built, each slot's graph captured, each front run once.

A worker runs this in the engine's background thread while its first jobs run
(docs/decisions/0042-prepared-while-jobs-run.md); benchmarks run it before they time anything.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Final, Protocol

from synthesis.background import Background
from synthesis.buckets import ID_BUCKETS, row_bucket
from synthesis.frame_plan import FRAME_BUCKETS, FRAMES_PER_ID_AT_MOST, frame_bucket
from synthesis.front_stage import FrontStage
from synthesis.heap import give_back_free_heap
from synthesis.items import Scales
from synthesis.waveform_graphs import WaveformGraphs
from ttsfarm.core.voices import Voice

log = logging.getLogger(__name__)

BUILDS_AT_ONCE: Final = 8
"""Sessions built side by side: 4 took up to 1.5 s longer, 16 no shorter and held more memory
(docs/decisions/0041-sessions-built-side-by-side.md)."""
FILLER_SCALES: Final = Scales(0.0, 1.0, 0.0)


class StagedParts(Protocol):
    """What of a staged engine (``synthesis.staged.StagedEngine``) its preparation uses."""

    voice: Voice
    front: FrontStage
    waveform: WaveformGraphs | None
    background: Background

    def run_fillers(self, rows: int, max_ids: int, scales: Scales) -> int: ...


def prepare_buckets(engine: StagedParts, batch_sizes: Sequence[int], max_ids: int = ID_BUCKETS[-1]) -> int:
    """Prepare ``engine`` for batches of these sizes, in this thread; returns the runs it took.
    Up to :data:`BUILDS_AT_ONCE` sessions are built side by side, in threads (a build spends
    most of its second outside the GIL), each holding the device's gate shared; the captures
    and the filler runs follow, one at a time. Stops between steps once the engine is closed."""
    waveform = engine.waveform
    if waveform is None:
        return 0
    started = time.perf_counter()
    top = frame_bucket(int(max_ids * FRAMES_PER_ID_AT_MOST))
    row_sizes = sorted({row_bucket(size) for size in batch_sizes})
    id_sizes = [size for size in ID_BUCKETS if size <= max_ids]
    frame_sizes = [size for size in FRAME_BUCKETS if size <= top]
    builds: list[Callable[[], object]] = [
        *(partial(engine.front.session, (rows, ids)) for rows in row_sizes for ids in id_sizes),
        *(partial(waveform.build, rows, frames) for rows in row_sizes for frames in frame_sizes),
    ]

    def beside_batches(build: Callable[[], object]) -> None:
        if not engine.background.open:  # closed meanwhile: the builds left are dropped
            return
        with waveform.device.gate.shared():  # no capture while it allocates on the device
            build()

    with ThreadPoolExecutor(min(BUILDS_AT_ONCE, len(builds)), "ttsfarm-build") as pool:
        for future in [pool.submit(beside_batches, build) for build in builds]:
            future.result()
    built = time.perf_counter()
    done = 0
    for rows in row_sizes:  # first: until its capture, a slot runs plainly, slower
        for frames in frame_sizes:
            if not engine.background.open:
                return _stopped(engine, done)
            waveform.capture(rows, frames)
            done += 1
    captured = time.perf_counter()
    for rows in row_sizes:
        if not engine.background.open:
            return _stopped(engine, done)
        done += engine.run_fillers(rows, max_ids, FILLER_SCALES)
    give_back_free_heap()  # the builds' scratch, left in their threads' arenas
    log.info(
        "voice %s prepared in %.1f s: %d sessions built in %.1f s, %d graphs captured in %.1f s, "
        "%d filler runs in %.1f s",
        engine.voice.name,
        time.perf_counter() - started,
        len(builds),
        built - started,
        len(row_sizes) * len(frame_sizes),
        captured - built,
        len(row_sizes) * len(id_sizes),
        time.perf_counter() - captured,
    )
    return done


def _stopped(engine: StagedParts, done: int) -> int:
    log.info("voice %s: preparation stopped after %d runs: the engine is closed", engine.voice.name, done)
    return done
