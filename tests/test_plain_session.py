"""A CPU engine speaks first with a starter session and moves to the full one once it is built."""

from __future__ import annotations

import logging
import threading

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from synthesis.engine import Engine, EngineItem, EngineOptions
from synthesis.phonemes import Phonemizer
from synthesis.plain_session import PlainSessions
from synthesis.sessions import build_session, session_options, starter_options
from tests.conftest import DETERMINISTIC
from tests.helpers_engine import SENTENCES
from ttsfarm.core.voices import Voice


def doubling_graph() -> bytes:
    node = helper.make_node("Add", ["x", "x"], ["y"])
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        [node], "double", [value("x", TensorProto.FLOAT, [None])], [value("y", TensorProto.FLOAT, [None])]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


class Maker:
    """Builds real sessions of a small graph, as the engine builds the voice's; counts them."""

    def __init__(self, full_fails: bool = False) -> None:
        self.model = doubling_graph()
        self.full_fails = full_fails
        self.built: list[str] = []

    def __call__(self, starter: bool) -> ort.InferenceSession:
        self.built.append("starter" if starter else "full")
        if not starter and self.full_fails:
            raise RuntimeError("out of something")
        options = starter_options(1) if starter else session_options(1, False)
        return build_session(self.model, options, ["CPUExecutionProvider"])


def reuses_memory(session: ort.InferenceSession) -> bool:
    return bool(session.get_session_options().enable_mem_reuse)


def test_one_run_stays_on_the_starter_and_builds_nothing_more() -> None:
    maker = Maker()
    sessions = PlainSessions(maker, "tiny")
    session = sessions.for_run()
    assert not reuses_memory(session)
    assert session.run(None, {"x": np.ones(3, np.float32)})[0].tolist() == [2.0, 2.0, 2.0]
    sessions.wait()
    assert maker.built == ["starter"]
    assert not [t for t in threading.enumerate() if t.name == "tiny-full"]


def test_a_second_run_builds_the_full_session_which_then_takes_over() -> None:
    maker = Maker()
    sessions = PlainSessions(maker, "tiny")
    assert sessions.current() is sessions.for_run()  # inspecting builds the starter, once
    second = sessions.for_run()  # starts the full build; the starter answers meanwhile
    assert not reuses_memory(second)
    sessions.wait()
    full = sessions.for_run()
    assert reuses_memory(full)
    assert sessions.alive() == [full]  # the starter is dropped
    assert maker.built == ["starter", "full"]


def test_without_a_quick_start_the_full_session_is_the_only_one() -> None:
    """On a GPU, or when profiling: no starter, so nothing is timed or profiled on it."""
    maker = Maker()
    sessions = PlainSessions(maker, "tiny", quick_start=False)
    assert reuses_memory(sessions.current()) and reuses_memory(sessions.for_run())
    assert reuses_memory(sessions.for_run())
    sessions.wait()
    assert maker.built == ["full"]


def test_full_builds_the_full_session_at_once_for_benchmarks() -> None:
    maker = Maker()
    sessions = PlainSessions(maker, "tiny")
    sessions.for_run()
    assert reuses_memory(sessions.full())
    assert reuses_memory(sessions.for_run()) and sessions.alive() == [sessions.full()]
    assert maker.built == ["starter", "full"]


def test_a_full_build_that_fails_leaves_the_starter_speaking(caplog: pytest.LogCaptureFixture) -> None:
    sessions = PlainSessions(Maker(full_fails=True), "tiny")
    sessions.for_run()
    with caplog.at_level(logging.WARNING):
        sessions.for_run()
        sessions.wait()
    assert "tiny: no full session (out of something); runs stay on the starter" in caplog.text
    assert not reuses_memory(sessions.for_run())


def test_the_starter_and_the_full_session_speak_the_same(voice: Voice, phonemizer: Phonemizer) -> None:
    """Same lengths to the sample, and the same audio within float rounding (the full graph is
    optimized, the starter's is not)."""
    engine = Engine.load(voice, EngineOptions(provider="cpu", warmup=False))
    assert engine.sessions_built == 1  # the starter only
    items = [EngineItem(phonemizer.ids(sentence)) for sentence in SENTENCES]
    first = [engine.speak([item], DETERMINISTIC)[0] for item in items]  # the 2nd starts the build
    engine.prepare([1])  # the full session, waited for
    assert engine.sessions_built == 2
    again = [engine.speak([item], DETERMINISTIC)[0] for item in items]
    for starter, full in zip(first, again, strict=True):
        assert starter.frames is not None and full.frames is not None
        assert np.array_equal(starter.frames, full.frames)
        assert len(starter.audio) == len(full.audio)
        assert np.max(np.abs(starter.audio - full.audio)) < 1e-3
