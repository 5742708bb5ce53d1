"""A shared engine: the host's batcher served over its Unix socket to a consumer's RemoteBatcher,
with the real CPU engine (host and consumer in this one process; the farm test runs them apart)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from synthesis.batcher import Batcher
from synthesis.engine import Engine, EngineItem, EngineOptions, Scales, Spoken
from synthesis.engine_host import EngineHost
from synthesis.engine_link import EngineLost, RemoteBatcher
from synthesis.phonemes import Phonemizer
from synthesis.pipeline import Synthesizer
from tests.conftest import DETERMINISTIC
from tests.helpers_engine import EngineWrapper, waiting_connections
from ttsfarm.core.errors import VoiceNotFound
from ttsfarm.core.jobs import JobRequest
from ttsfarm.core.voices import Voice, resolve_voice
from ttsfarm.storage.local import LocalStorage

TEXTS = [f"Consumer sentence {n}, spoken by the shared engine." for n in range(10)]


@pytest.fixture
def host(engine: Engine, tmp_path: Path) -> Iterator[EngineHost]:
    with Batcher(lambda voice: engine, max_batch=4, max_wait=0.05) as batcher:
        served = EngineHost(batcher, temp_dir=str(tmp_path))
        served.serve(on_gpu=False)
        yield served
        served.close()


def test_consumers_that_connect_before_the_engine_is_served_wait_for_it(
    engine: Engine, tmp_path: Path
) -> None:
    """A worker starts its consumers while its engine loads: their connections wait on the
    socket, then each is told the engine's facts."""
    with Batcher(lambda voice: engine, max_batch=4, max_wait=0.05) as batcher:
        host = EngineHost(batcher, temp_dir=str(tmp_path))
        try:
            connected: list[RemoteBatcher] = []
            waiting = [
                threading.Thread(target=lambda: connected.append(RemoteBatcher(host.address, host.authkey)))
                for _ in range(3)
            ]
            for thread in waiting:
                thread.start()
            deadline = time.monotonic() + 10
            while waiting_connections(host.address) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert waiting_connections(host.address) == 3 and connected == []
            host.serve(on_gpu=False)
            for thread in waiting:
                thread.join(10)
            assert len(connected) == 3 and all(c.host.on_gpu is False and c.max_batch == 4 for c in connected)
            for consumer in connected:
                consumer.close()
        finally:
            host.close()


def test_a_consumer_gone_before_the_engine_is_served_does_not_stop_the_others(
    engine: Engine, tmp_path: Path
) -> None:
    with Batcher(lambda voice: engine, max_batch=4, max_wait=0.05) as batcher:
        host = EngineHost(batcher, temp_dir=str(tmp_path))
        try:
            gone = socket.socket(socket.AF_UNIX)
            gone.connect(host.address)
            gone.close()  # it hangs up before the handshake
            host.serve(on_gpu=False)
            connected: list[RemoteBatcher] = []
            joining = threading.Thread(
                target=lambda: connected.append(RemoteBatcher(host.address, host.authkey)), daemon=True
            )
            joining.start()
            joining.join(10)
            assert connected and connected[0].max_batch == 4, "the next consumer was never taken"
            connected[0].close()
        finally:
            host.close()


@pytest.mark.slow
def test_segments_through_the_link_match_the_engine_and_share_its_batches(
    host: EngineHost, engine: Engine, voice: Voice, phonemizer: Phonemizer
) -> None:
    seen: list[int] = []
    first, second = (RemoteBatcher(host.address, host.authkey) for _ in range(2))
    for consumer in (first, second):
        consumer.observe(lambda lengths, seconds: seen.append(len(lengths)))
    items = [EngineItem(phonemizer.ids(text)) for text in TEXTS]
    futures = [
        (first if n % 2 else second).submit(voice, item, DETERMINISTIC) for n, item in enumerate(items)
    ]
    waves = [future.result(60).audio for future in futures]
    for item, wave in zip(items, waves, strict=True):
        alone = engine.run([item], DETERMINISTIC)[0]
        assert len(wave) == len(alone)  # exact lengths, as in the engine's own process
        assert np.allclose(wave, alone, atol=1e-4)
    stats = first.stats
    assert stats.items == len(TEXTS) and stats.batches < len(TEXTS), "both consumers' segments shared batches"
    assert sum(seen) == len(TEXTS), "each batch is told to one consumer: their counts add up"
    assert (first.max_batch, first.runners) == (4, 1)
    facts = first.engine(voice)
    assert (facts.provider, facts.precision, facts.kind, facts.on_gpu) == (
        engine.provider,
        engine.precision,
        "Engine",
        False,
    )
    first.close()
    second.close()


def test_a_whole_job_runs_through_a_consumer_synthesizer(host: EngineHost, tmp_path: Path) -> None:
    consumer = Synthesizer(RemoteBatcher(host.address, host.authkey))
    try:
        result = consumer.synthesize(
            JobRequest(job_id="linked", text=" ".join(TEXTS[:3])),
            LocalStorage(str(tmp_path / "out")),
            "linked.wav",
        )
    finally:
        consumer.close()
    assert result.duration > 3 and len(result.segments) >= 1
    assert (tmp_path / "out" / "linked.wav").stat().st_size > 44


def test_the_hosts_errors_reach_the_consumer_as_they_were(voice: Voice, tmp_path: Path) -> None:
    (tmp_path / "garbage.onnx").write_bytes(b"not a model")
    (tmp_path / "garbage.onnx.json").write_text(voice.config_path.read_text())
    broken = resolve_voice(str(tmp_path / "garbage.onnx"))
    with Batcher(lambda v: Engine.load(v, EngineOptions(provider="cpu"))) as batcher:
        host = EngineHost(batcher, temp_dir=str(tmp_path))
        host.serve(on_gpu=False)
        consumer = RemoteBatcher(host.address, host.authkey)
        with pytest.raises(VoiceNotFound, match="is not a Piper voice model"):
            consumer.engine(broken)
        with pytest.raises(VoiceNotFound, match="is not a Piper voice model"):
            consumer.submit(broken, EngineItem([1, 2, 3]), DETERMINISTIC).result(60)
        consumer.close()
        host.close()


class GatedEngine(EngineWrapper):
    """The real engine, whose runs wait at a gate: a segment stays in flight while the test acts."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.gate = threading.Event()
        self.runs: list[int] = []

    def speak(self, items: Sequence[EngineItem], scales: Scales) -> list[Spoken]:
        self.runs.append(len(items))
        self.gate.wait(30)
        return self.engine.speak(items, scales)


def test_a_lost_host_fails_what_waits_and_says_so_once(
    engine: Engine, voice: Voice, phonemizer: Phonemizer, tmp_path: Path
) -> None:
    gated = GatedEngine(engine)
    lost = threading.Event()
    calls: list[int] = []
    with Batcher(lambda v: gated, max_wait=0.0) as batcher:  # type: ignore[arg-type,return-value]
        host = EngineHost(batcher, temp_dir=str(tmp_path))
        host.serve(on_gpu=False)
        consumer = RemoteBatcher(host.address, host.authkey, on_lost=lambda: (calls.append(1), lost.set()))
        waiting = consumer.submit(voice, EngineItem(phonemizer.ids(TEXTS[0])), DETERMINISTIC)
        host.close()
        assert lost.wait(10), "the consumer noticed the host going away"
        with pytest.raises(EngineLost):
            waiting.result(10)  # in flight when the host went: failed, not left hanging
        with pytest.raises(EngineLost):
            consumer.submit(voice, EngineItem(phonemizer.ids(TEXTS[1])), DETERMINISTIC).result(10)
        gated.gate.set()
    assert calls == [1]
    consumer.close()


def test_a_cancelled_segment_never_runs_in_the_host(
    engine: Engine, voice: Voice, phonemizer: Phonemizer, tmp_path: Path
) -> None:
    gated = GatedEngine(engine)
    with Batcher(lambda v: gated, max_batch=1, max_wait=0.0) as batcher:  # type: ignore[arg-type,return-value]
        host = EngineHost(batcher, temp_dir=str(tmp_path))
        host.serve(on_gpu=False)
        consumer = RemoteBatcher(host.address, host.authkey)
        running = consumer.submit(voice, EngineItem(phonemizer.ids(TEXTS[0])), DETERMINISTIC)
        deadline = time.monotonic() + 30
        while not gated.runs and time.monotonic() < deadline:  # the one runner is busy with it
            time.sleep(0.01)
        queued = consumer.submit(voice, EngineItem(phonemizer.ids(TEXTS[1])), DETERMINISTIC)
        assert queued.cancel()  # as a job that stopped cancels its segments still in flight
        time.sleep(1.0)  # for the cancel to cross the socket before the runner is free
        gated.gate.set()
        assert len(running.result(60).audio) > 0
        time.sleep(0.5)
        assert gated.runs == [1], "the cancelled segment was taken out of the host's batcher"
        consumer.close()
        host.close()


def test_a_wrong_key_is_refused(host: EngineHost) -> None:
    from multiprocessing import AuthenticationError

    with pytest.raises(AuthenticationError):
        RemoteBatcher(host.address, b"not the key")
