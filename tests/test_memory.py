"""A CPU worker's memory is bounded: the arena gives back what a long run used.

Without shrinkage onnxruntime's CPU arena keeps the peak of the largest shape it has run, so a
worker's memory rose in steps as longer batches came and never fell (the issue measured 360 to 786
MiB over 600 jobs). Measured on joe: a 400-id run kept 163 MiB without it, 8 MiB with it.
"""

from __future__ import annotations

from synthesis.engine import Engine, EngineItem, EngineOptions, filler_ids
from ttsfarm.voices import Voice

KEPT_LIMIT_MIB = 60


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def test_a_long_run_does_not_keep_its_memory(voice: Voice) -> None:
    engine = Engine.load(voice, EngineOptions(provider="cpu"))  # its own arena, not the shared fixture's
    scales = engine.default_scales()
    engine.run([EngineItem(filler_ids(voice, 20))], scales)
    before = rss_mib()
    longest = engine.run([EngineItem(filler_ids(voice, 400))], scales)[0]
    engine.run([EngineItem(filler_ids(voice, 20))], scales)
    kept = rss_mib() - before
    assert len(longest) > 5 * voice.sample_rate  # the long run really ran
    assert kept < KEPT_LIMIT_MIB, f"{kept:.0f} MiB kept after one 400-id run"
