"""The engine on the real voice: batched output equals one-by-one output, trimmed exactly."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnxruntime as ort
import pytest

from synthesis.engine import Engine, EngineItem, EngineOptions, cut_items, is_missing_fp16_plan
from synthesis.gpus import gpu_present
from synthesis.graph import expose_durations
from synthesis.phonemes import Phonemizer
from synthesis.sessions import (
    CUDA,
    build_session,
    check_device,
    providers_for,
    session_options,
    wants_cuda,
)
from tests.conftest import DETERMINISTIC
from tests.helpers_engine import SENTENCES
from ttsfarm.core.errors import DeviceUnavailable
from ttsfarm.core.voices import Voice


def test_batched_equals_one_by_one(engine: Engine, phonemizer: Phonemizer) -> None:
    items = [EngineItem(phonemizer.ids(s)) for s in SENTENCES]
    alone = [engine.run([item], DETERMINISTIC)[0] for item in items]
    together = engine.run(items, DETERMINISTIC)
    for single, batched in zip(alone, together, strict=True):
        assert len(batched) == len(single)  # exact length: no padding tail left
        assert np.max(np.abs(batched - single)) < 1e-3
    longest = max(len(w) for w in together)
    assert any(len(w) < longest for w in together)  # shorter items really were trimmed


def test_length_is_durations_times_hop(engine: Engine, phonemizer: Phonemizer) -> None:
    wave = engine.run([EngineItem(phonemizer.ids("Good evening."))], DETERMINISTIC)[0]
    assert len(wave) % engine.voice.hop_length == 0
    assert 0.5 < len(wave) / engine.voice.sample_rate < 2.0
    assert wave.dtype == np.float32


def test_slower_length_scale_gives_longer_audio(engine: Engine, phonemizer: Phonemizer) -> None:
    item = EngineItem(phonemizer.ids("Speak slowly, please."))
    normal = engine.run([item], DETERMINISTIC)[0]
    slow = engine.run([item], DETERMINISTIC.__class__(0.0, 1.5, 0.0))[0]
    assert 1.3 < len(slow) / len(normal) < 1.7


def test_reports_provider_and_warms_up(engine: Engine) -> None:
    assert engine.provider == "CPUExecutionProvider"
    assert engine.warmup_seconds > 0


def test_expose_durations_is_idempotent(voice) -> None:  # type: ignore[no-untyped-def]
    import onnx

    model = onnx.load(str(voice.model_path))
    first = expose_durations(model)
    outputs = len(model.graph.output)
    assert expose_durations(model) == first
    assert len(model.graph.output) == outputs == 2


def test_concurrent_runs_from_threads_match_serial_runs(voice: Voice, phonemizer: Phonemizer) -> None:
    engine = Engine.load(voice, EngineOptions(provider="cpu", concurrent_runs=2, cpu_threads=1))
    texts = [f"Thread {n} reads a sentence of its own." for n in range(6)]
    serial = [engine.run([EngineItem(phonemizer.ids(t))], DETERMINISTIC)[0] for t in texts]

    def one(text: str) -> np.ndarray:
        return engine.run([EngineItem(phonemizer.ids(text))], DETERMINISTIC)[0]

    with ThreadPoolExecutor(max_workers=3) as pool:
        threaded = list(pool.map(one, texts))
    for a, b in zip(serial, threaded, strict=True):
        assert len(a) == len(b)
        assert np.allclose(a, b, atol=1e-4)


def test_only_a_missing_fp16_plan_moves_a_bucket_to_fp32() -> None:
    seen_on_h200 = "CudaCall ... CUDNN_FE failure 8: HEURISTIC_QUERY_FAILED ; GPU=0 ; file=conv.cc"
    assert is_missing_fp16_plan(RuntimeError(seen_on_h200))
    assert not is_missing_fp16_plan(RuntimeError("CUDA failure 700: an illegal memory access"))


def test_a_new_bucket_meeting_two_runners_is_built_once(voice: Voice, phonemizer: Phonemizer) -> None:
    engine = Engine.load(
        voice, EngineOptions(provider="cpu", shape_buckets=True, concurrent_runs=2, cpu_threads=1)
    )
    built = engine.sessions_built
    item = EngineItem(phonemizer.ids("Two runners meet one new shape."))
    with ThreadPoolExecutor(max_workers=2) as pool:
        waves = list(pool.map(lambda _: engine.run([item, item], DETERMINISTIC), range(2)))
    assert engine.sessions_built == built + 1
    assert len(waves) == 2


def test_a_graph_that_is_not_a_piper_voice_is_refused_at_load(voice, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    import onnx
    from onnx import TensorProto, helper

    from ttsfarm.core.voices import resolve_voice

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "not-piper",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # loadable by onnxruntime: only the interface is wrong
    onnx.save(model, tmp_path / "identity.onnx")
    shutil.copy(voice.config_path, tmp_path / "identity.onnx.json")
    with pytest.raises(ValueError, match=r"where a Piper voice takes \['input', 'input_lengths', 'scales'\]"):
        Engine.load(resolve_voice(str(tmp_path / "identity.onnx")), EngineOptions(provider="cpu"))


@pytest.mark.skipif(gpu_present(), reason="checks a machine without a GPU")
def test_cuda_asked_for_without_a_gpu_is_an_error_not_a_quiet_cpu_run(voice: Voice) -> None:
    with pytest.raises(DeviceUnavailable, match=r"a GPU was asked for .* run the worker on a GPU host"):
        wants_cuda("cuda")
    assert wants_cuda("auto") is False  # auto settles for the CPU where there is no GPU
    if CUDA not in ort.get_available_providers():
        pytest.skip("needs the GPU build of onnxruntime, which falls back to the CPU by itself")
    # onnxruntime itself builds a CPU session when CUDA cannot start: the engine must notice
    session = build_session(str(voice.model_path), session_options(1, False), providers_for(True, 0))
    assert session.get_providers()[0] != CUDA
    with pytest.raises(DeviceUnavailable, match="GPU 0 was asked for but onnxruntime could not start CUDA"):
        check_device(session, True, 0)
    check_device(session, False, 0)  # asked for the CPU: fine


def test_cut_items_gives_each_row_its_own_copy_to_its_length() -> None:
    audio = np.arange(24, dtype=np.float32).reshape(4, 6)
    samples = np.array([6, 2, 0, 5])
    items = cut_items(audio, samples, 3)  # the fourth row is padding
    assert [item.tolist() for item in items] == [[0, 1, 2, 3, 4, 5], [6, 7], []]
    assert all(item.dtype == np.float32 for item in items)
    items[0][:] = -1  # writable, and its own: neither the batch nor another item changes
    assert audio[0, 0] == 0 and items[1].tolist() == [6, 7]
    assert cut_items(audio, samples, 0) == []
