"""A CPU worker's memory is bounded: the arena gives back what a long run used.

Without shrinkage onnxruntime's CPU arena keeps the peak of the largest shape it has run, so a
worker's memory rose in steps as longer batches came and never fell (the issue measured 360 to 786
MiB over 600 jobs). Measured on joe: a 400-id run kept 163 MiB without it, 8 MiB with it.
"""

from __future__ import annotations

import multiprocessing

from synthesis.engine import Engine, EngineItem, EngineOptions, filler_ids
from ttsfarm.core.voices import Voice, resolve_voice

KEPT_LIMIT_MIB = 60


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def kept_after_a_long_run(model: str) -> tuple[float, float]:
    """In a fresh process, as a worker is: MiB kept after one 400-id run, and its seconds."""
    voice = resolve_voice(model)
    engine = Engine.load(voice, EngineOptions(provider="cpu"))
    # the full session, which a worker runs on: else the starter speaks first and the full
    # session's build, begun beside the long run, counted as memory that run kept
    engine.prepare([1])
    scales = engine.default_scales()
    engine.run([EngineItem(filler_ids(voice, 20))], scales)
    before = rss_mib()
    longest = engine.run([EngineItem(filler_ids(voice, 400))], scales)[0]
    engine.run([EngineItem(filler_ids(voice, 20))], scales)
    return rss_mib() - before, len(longest) / voice.sample_rate


def test_a_long_run_does_not_keep_its_memory(voice: Voice) -> None:
    """Measured in a process of its own: in the test process, what earlier tests left in the
    heap decides how much of the freed memory the system gets back."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        kept, seconds = pool.apply(kept_after_a_long_run, (str(voice.model_path),))
    assert seconds > 5  # the long run really ran
    assert kept < KEPT_LIMIT_MIB, f"{kept:.0f} MiB kept after one 400-id run"
