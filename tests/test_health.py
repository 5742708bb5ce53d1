"""The engine health check: the real engine, with a device failure or a hung run injected at the
runtime edge (what a sticky CUDA error or a stuck GPU does, and a Celery ping cannot see)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import pytest

from synthesis.batcher import Batcher
from synthesis.engine import Engine, EngineItem, Scales, Spoken
from synthesis.pipeline import Synthesizer
from tests.helpers_engine import EngineWrapper
from worker.health import EngineHealth


class FaultyDevice(EngineWrapper):
    """The real engine until ``fail`` or ``hang`` is set."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.fail, self.hang, self.release = False, False, threading.Event()

    def default_scales(self) -> Scales:
        return self.engine.default_scales()

    def speak(self, items: Sequence[EngineItem], scales: Scales) -> list[Spoken]:
        if self.fail:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        if self.hang:
            self.release.wait(30)
        return self.engine.speak(items, scales)


@pytest.fixture
def device(engine: Engine) -> Iterator[tuple[FaultyDevice, EngineHealth]]:
    faulty = FaultyDevice(engine)
    with Batcher(lambda voice: faulty, max_batch=4, max_wait=0.01) as batcher:  # type: ignore[arg-type, return-value]
        yield faulty, EngineHealth(Synthesizer(batcher), "joe")
        faulty.release.set()


def test_a_healthy_engine_passes_with_a_probe_batch(device: tuple[FaultyDevice, EngineHealth]) -> None:
    _, health = device
    report = health.check()
    assert (
        report["ok"] and report["checked"] == "probe batch" and report["provider"] == "CPUExecutionProvider"
    )
    assert health.check()["checked"] == "recent batch"  # the probe itself counts as a batch


def test_an_engine_that_fails_every_run_fails_the_check(device: tuple[FaultyDevice, EngineHealth]) -> None:
    faulty, health = device
    faulty.fail = True
    report = health.check()
    assert not report["ok"] and "illegal memory access" in report["error"]


def test_a_hung_engine_fails_the_check_in_time(device: tuple[FaultyDevice, EngineHealth]) -> None:
    faulty, health = device
    faulty.hang = True
    report = health.check(timeout=1.0)
    assert not report["ok"] and "did not finish within 1 s" in report["error"]
