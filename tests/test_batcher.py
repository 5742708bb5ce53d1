"""The dynamic batcher with the real engine; out-of-memory is injected at the runtime edge."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest

from synthesis.batcher import Batcher, split_phoneme_ids
from synthesis.engine import Engine, EngineItem, EngineOutOfMemory, Scales, Spoken
from synthesis.phonemes import Phonemizer
from tests.conftest import DETERMINISTIC
from tests.helpers_engine import EngineWrapper
from ttsfarm.core.voices import Voice

TEXTS = [f"Sentence number {n} is here, and it is spoken." for n in range(12)] + [
    "Short.",
    "A much longer sentence that rambles on about the river, the mill and the ferry boat.",
]


class LimitedMemoryEngine(EngineWrapper):
    """The real engine behind a runtime that runs out of memory past a batch budget,
    the way CUDA does on a full GPU (the only thing faked here)."""

    def __init__(self, engine: Engine, max_items: int, max_ids: int = 10_000) -> None:
        super().__init__(engine)
        self.max_items, self.max_ids = max_items, max_ids
        self.calls: list[int] = []

    def speak(self, items: Sequence[EngineItem], scales: Scales) -> list[Spoken]:
        self.calls.append(len(items))
        if len(items) > self.max_items or max(len(i.phoneme_ids) for i in items) > self.max_ids:
            raise EngineOutOfMemory("CUDA failure 2: out of memory")
        return self.engine.speak(items, scales)


class GatedEngine(EngineWrapper):
    """The real engine; its first run waits at a gate, and every run notes its thread."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.running, self.gate = threading.Event(), threading.Event()
        self.threads: set[int] = set()

    def speak(self, items: Sequence[EngineItem], scales: Scales) -> list[Spoken]:
        self.threads.add(threading.get_ident())
        if not self.running.is_set():
            self.running.set()
            self.gate.wait(30)
        return self.engine.speak(items, scales)


@pytest.fixture(scope="module")
def alone(engine: Engine, phonemizer: Phonemizer) -> list[np.ndarray]:
    """Each of ``TEXTS`` spoken on its own: what a batch must give back for it."""
    return [engine.run([EngineItem(phonemizer.ids(t))], DETERMINISTIC)[0] for t in TEXTS]


def submit_all(
    batcher: Batcher, voice: Voice, phonemizer: Phonemizer, texts: list[str], scales: Scales = DETERMINISTIC
) -> list[np.ndarray]:
    futures = [batcher.submit(voice, EngineItem(phonemizer.ids(t)), scales) for t in texts]
    return [f.result(timeout=120).audio for f in futures]


def test_concurrent_jobs_share_batches(
    engine: Engine, voice: Voice, phonemizer: Phonemizer, alone: list[np.ndarray]
) -> None:
    results: dict[int, np.ndarray] = {}

    def job(n: int) -> None:
        item = EngineItem(phonemizer.ids(TEXTS[n]))
        results[n] = batcher.submit(voice, item, DETERMINISTIC).result(120).audio

    with Batcher(lambda v: engine, max_batch=8, max_wait=0.2) as batcher:
        threads = [threading.Thread(target=job, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(results) == 8
    assert batcher.stats.mean_batch_size > 1
    for n in range(8):  # each job got its own audio back, not a neighbour's of similar length
        assert len(results[n]) == len(alone[n])
        assert np.allclose(results[n], alone[n], atol=1e-3)


def test_batches_group_by_scales_and_respect_max(
    engine: Engine, voice: Voice, phonemizer: Phonemizer
) -> None:
    slow = Scales(0.0, 1.4, 0.0)
    with Batcher(lambda v: engine, max_batch=4, max_wait=0.3) as batcher:
        futures = [
            batcher.submit(voice, EngineItem(phonemizer.ids(t)), DETERMINISTIC if n % 2 else slow)
            for n, t in enumerate(TEXTS[:8])
        ]
        waves = [f.result(120).audio for f in futures]
    assert max(batcher.stats.batch_sizes) <= 4
    assert batcher.stats.batches >= 2
    for n in (0, 1):  # each item ran at its own scales, not at those of the batch's oldest
        alone = engine.run([EngineItem(phonemizer.ids(TEXTS[n]))], DETERMINISTIC if n % 2 else slow)[0]
        assert len(waves[n]) == len(alone)


def test_similar_lengths_go_together(engine: Engine, voice: Voice, phonemizer: Phonemizer) -> None:
    short = ["Hi.", "Yes.", "No.", "Ok."]
    long = [TEXTS[13], TEXTS[13] + " Again.", TEXTS[13] + " More.", TEXTS[13] + " Yes."]
    interleaved = [text for pair in zip(short, long, strict=True) for text in pair]  # FIFO would mix them
    gated = GatedEngine(engine)
    loose = dict(max_batch=4, max_wait=0.05, max_padding_ratio=0.5)
    with Batcher(lambda v: gated, **loose) as batcher:  # type: ignore[arg-type]
        blocker = batcher.submit(voice, EngineItem(phonemizer.ids("Wait.")), Scales(0.0, 1.2, 0.0))
        assert gated.running.wait(30)  # the runner is busy: everything below queues up
        futures = [batcher.submit(voice, EngineItem(phonemizer.ids(t)), DETERMINISTIC) for t in interleaved]
        gated.gate.set()
        blocker.result(120)
        for f in futures:
            f.result(120)
    assert batcher.stats.batch_sizes == Counter({4: 2, 1: 1})
    assert batcher.stats.padding_ratio < 0.25


def test_padding_cap_keeps_far_lengths_apart(engine: Engine, voice: Voice, phonemizer: Phonemizer) -> None:
    texts = ["Hi.", TEXTS[13], "Yes.", TEXTS[13] + " More."]
    gate = threading.Event()
    with Batcher(
        lambda v: (gate.wait(), engine)[1], max_batch=4, max_wait=0.5, max_padding_ratio=0.15
    ) as batcher:
        futures = [batcher.submit(voice, EngineItem(phonemizer.ids(t)), DETERMINISTIC) for t in texts]
        gate.set()
        for f in futures:
            f.result(120)
    assert batcher.stats.batch_sizes == Counter({2: 2})
    assert batcher.stats.padding_ratio <= 0.15


def test_out_of_memory_halves_the_batch(engine: Engine, voice: Voice, phonemizer: Phonemizer) -> None:
    limited = LimitedMemoryEngine(engine, max_items=2)
    with Batcher(lambda v: limited, max_batch=8, max_wait=0.3) as batcher:  # type: ignore[arg-type,return-value]
        waves = submit_all(batcher, voice, phonemizer, TEXTS[:8])
    assert limited.calls[:3] == [8, 4, 2]
    assert all(len(w) > 0 for w in waves)


def test_out_of_memory_on_one_long_item_splits_it(
    engine: Engine, voice: Voice, phonemizer: Phonemizer
) -> None:
    long_text = TEXTS[13] + " " + TEXTS[13]
    ids = phonemizer.ids(long_text)
    limited = LimitedMemoryEngine(engine, max_items=8, max_ids=len(ids) - 10)
    with Batcher(lambda v: limited, max_batch=8, max_wait=0.05) as batcher:  # type: ignore[arg-type,return-value]
        short, long_wave = submit_all(batcher, voice, phonemizer, ["Fine.", long_text])
    whole = engine.run([EngineItem(ids)], DETERMINISTIC)[0]
    assert 0.85 < len(long_wave) / len(whole) < 1.15
    assert len(short) > 0


def test_item_that_cannot_fit_fails_alone(engine: Engine, voice: Voice, phonemizer: Phonemizer) -> None:
    limited = LimitedMemoryEngine(engine, max_items=8, max_ids=40)
    with Batcher(lambda v: limited, max_batch=8, max_wait=0.2) as batcher:  # type: ignore[arg-type,return-value]
        ok = batcher.submit(voice, EngineItem(phonemizer.ids("Hi.")), DETERMINISTIC)
        bad = batcher.submit(voice, EngineItem(phonemizer.ids(TEXTS[13])), DETERMINISTIC)
        assert len(ok.result(60).audio) > 0
        with pytest.raises(EngineOutOfMemory):
            bad.result(60)


def test_split_phoneme_ids_cuts_at_a_word_gap(voice: Voice, phonemizer: Phonemizer) -> None:
    ids = phonemizer.ids("one two three four")
    left, right = split_phoneme_ids(ids, voice)
    assert left[:2] == ids[:2] and right[-1] == ids[-1]
    space = voice.phoneme_id_map[" "][0]
    assert left[-2] != space and right[2] != space
    assert len(left) + len(right) == len(ids) + 1  # lost the gap and its pad; gained EOS, BOS, pad


@pytest.mark.slow
def test_two_runners_give_every_item_its_own_audio(
    engine: Engine, voice: Voice, phonemizer: Phonemizer, alone: list[np.ndarray]
) -> None:
    recording = GatedEngine(engine)
    recording.running.set()  # no gate: only the threads are noted
    with Batcher(lambda v: recording, max_batch=3, max_wait=0.01, runners=2) as batcher:  # type: ignore[arg-type, return-value]
        got = submit_all(batcher, voice, phonemizer, TEXTS * 3)
    assert batcher.stats.items == len(TEXTS) * 3
    assert len(recording.threads) == 2  # both runners ran batches
    for wave, reference in zip(got, alone * 3, strict=True):
        assert len(wave) == len(reference)
        assert np.allclose(wave, reference, atol=1e-3)


def test_a_model_that_cannot_load_fails_its_batch_once(voice: Voice, phonemizer: Phonemizer) -> None:
    loads: list[Voice] = []

    def load(v: Voice) -> Engine:
        loads.append(v)
        raise RuntimeError("the model file is damaged")

    with Batcher(load, max_batch=4, max_wait=0.2) as batcher:
        futures = [batcher.submit(voice, EngineItem(phonemizer.ids(t)), DETERMINISTIC) for t in TEXTS[:4]]
        for future in futures:
            with pytest.raises(RuntimeError, match="damaged"):
                future.result(30)
    assert len(loads) == 1  # not once more per item while looking for a bad one
