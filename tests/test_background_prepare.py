"""A staged engine prepared in the background while its batches run (``synthesis.background``),
on the CPU with shape buckets: batches before, during and after the preparation agree, a slot
a batch ran before its capture is captured afterwards, and a closed engine stops preparing."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from synthesis.engine import EngineItem, EngineOptions
from synthesis.phonemes import Phonemizer
from synthesis.staged import StagedEngine
from tests.conftest import DETERMINISTIC
from ttsfarm.core.voices import Voice

BUCKETS = EngineOptions(provider="cpu", warmup=False, shape_buckets=True)
WAIT = 120


def _pairs(phonemizer: Phonemizer) -> list[list[EngineItem]]:
    """Batches of two items of at most 48 phoneme ids."""
    texts = ["Hi.", "Hello there, friend.", "Good day.", "Why not?"]
    items = [EngineItem(phonemizer.ids(text)) for text in texts]
    assert all(len(item.phoneme_ids) <= 48 for item in items)
    return [items[:2], items[2:], [items[1], items[2]]]


@pytest.mark.slow
def test_batches_run_before_during_and_after_a_background_preparation(
    voice: Voice, phonemizer: Phonemizer
) -> None:
    engine = StagedEngine(voice, BUCKETS)
    assert engine.waveform is not None
    held = threading.Event()
    engine.background.submit(lambda: held.wait(WAIT), "a test's hold")  # the preparation waits
    preparing = engine.prepare_later([2], max_ids=48)
    batches = _pairs(phonemizer)
    loaded = set(engine.front.sessions.keys())  # the 1-row front the load checks the device with
    engine.run(batches[0][1:], DETERMINISTIC)  # one item: it builds the 2-row buckets being prepared
    before = engine.run(batches[0], DETERMINISTIC)
    assert {rows for rows, _ in set(engine.front.sessions.keys()) - loaded} == {2}  # type: ignore[misc]
    slot_shapes = engine.waveform.slots.keys()  # a SessionCache: no iteration of its own
    assert {rows for rows, _ in slot_shapes} == {2}
    assert not preparing.done()
    held.set()
    with ThreadPoolExecutor(3) as pool:
        during = list(pool.map(lambda batch: engine.run(batch, DETERMINISTIC), batches * 2))
    assert preparing.result(WAIT) == 2 + 4  # 2 filler runs, 4 slots captured
    slots = engine.waveform.slots.keys()
    assert {(2, 64), (2, 96), (2, 128), (2, 160)} <= set(slots)
    assert all(engine.waveform.captured(rows, frames) for rows, frames in slots if frames <= 160)
    after = [engine.run(batch, DETERMINISTIC) for batch in batches]
    ran = [(batches[0], before), *zip(batches * 2, during, strict=True)]
    for batch, waves in ran:
        again = after[batches.index(batch)]
        assert len(waves) == len(again) == len(batch)
        for wave, wave_again in zip(waves, again, strict=True):
            assert len(wave) == len(wave_again) and np.abs(wave - wave_again).max() < 1e-3
            assert np.abs(wave).max() > 0.05


@pytest.mark.slow
def test_a_slot_a_batch_ran_before_its_capture_is_captured_in_the_background(
    voice: Voice, phonemizer: Phonemizer
) -> None:
    """Off CUDA a slot has no graph; with ``graphs`` set, the engine takes the path a GPU's would:
    the slot runs plainly, the batch asks for its capture, and the background thread makes it."""
    engine = StagedEngine(voice, BUCKETS)
    waveform = engine.waveform
    assert waveform is not None
    waveform.graphs = True
    batch = _pairs(phonemizer)[0]
    engine.run(batch, DETERMINISTIC)
    assert engine.last_bucket is not None
    shape = (engine.last_bucket.rows, engine.last_bucket.frames)
    engine.background.submit(lambda: None, "a test's mark").result(WAIT)  # what was asked is done
    slot = waveform.slots.find(shape)
    assert slot is not None and slot.captured
    assert slot.runs == 2  # the batch's plain run, then the capture's
    engine.run(batch, DETERMINISTIC)
    engine.background.submit(lambda: None, "a test's mark").result(WAIT)
    assert slot.runs == 3  # a captured slot asks for nothing more


def test_closing_drops_a_preparation_that_waits(voice: Voice) -> None:
    engine = StagedEngine(voice, BUCKETS)
    started, held = threading.Event(), threading.Event()
    engine.background.submit(lambda: started.set() or held.wait(WAIT), "a test's hold")
    preparing = engine.prepare_later([2], max_ids=48)
    assert started.wait(WAIT)
    closing = threading.Thread(target=engine.close)
    closing.start()
    while engine.background.open:
        time.sleep(0.01)
    held.set()  # the step under way ends; close waits for it
    closing.join(WAIT)
    assert not closing.is_alive()
    assert preparing.cancelled()
    assert engine.prepare_later([2]).cancelled()  # a closed engine prepares nothing more
    assert engine.run(_pairs(Phonemizer(voice))[0], DETERMINISTIC)  # and still runs batches


@pytest.mark.slow
def test_closing_stops_a_preparation_under_way_after_its_step(
    voice: Voice, caplog: pytest.LogCaptureFixture
) -> None:
    engine = StagedEngine(voice, BUCKETS)
    before = engine.sessions_built
    preparing = engine.prepare_later([2], max_ids=160)  # 7 fronts and 9 waveform slots to build
    while engine.sessions_built == before:  # its builds are under way
        time.sleep(0.01)
    with caplog.at_level(logging.INFO, logger="synthesis.bucket_preparation"):
        engine.close()
    assert preparing.result(0) == 0  # it stopped after its builds: no filler runs, no captures
    assert "preparation stopped after 0 runs: the engine is closed" in caplog.text
    assert "prepared in" not in caplog.text


def _finishes_only_after(release: Callable[[], None], work: Callable[[], object]) -> None:
    """``work``, in a thread, is still waiting a moment later, and ends once ``release`` ran."""
    done = threading.Event()
    thread = threading.Thread(target=lambda: (work(), done.set()))
    thread.start()
    assert not done.wait(0.5), "it ran beside what holds the device"
    release()
    assert done.wait(WAIT)
    thread.join(WAIT)


def test_a_batch_waits_while_a_capture_has_the_device(voice: Voice, phonemizer: Phonemizer) -> None:
    engine = StagedEngine(voice, BUCKETS)
    assert engine.waveform is not None
    batch = _pairs(phonemizer)[0]
    engine.run(batch, DETERMINISTIC)  # its sessions built: what is left to wait for is the gate
    capture = engine.waveform.device.gate.alone()
    capture.__enter__()
    _finishes_only_after(lambda: capture.__exit__(None, None, None), lambda: engine.run(batch, DETERMINISTIC))


def test_a_capture_waits_for_the_batches_and_builds_on_the_device(
    voice: Voice, phonemizer: Phonemizer
) -> None:
    engine = StagedEngine(voice, BUCKETS)
    assert engine.waveform is not None
    engine.run(_pairs(phonemizer)[0], DETERMINISTIC)
    assert engine.last_bucket is not None
    shape = (engine.last_bucket.rows, engine.last_bucket.frames)
    batch = engine.waveform.device.gate.shared()
    batch.__enter__()
    _finishes_only_after(lambda: batch.__exit__(None, None, None), lambda: engine.waveform.capture(*shape))
    assert engine.waveform.captured(*shape)
