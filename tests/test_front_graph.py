"""The front rewritten for capture (``synthesis.front_graph``) computes what the voice's own
front computes: its masked indexing made dense, its noise an input, its shapes constants."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from synthesis.engine import EngineItem, EngineOptions, Scales
from synthesis.front_graph import FRONT_NOISE, capturable_front, with_dense_masks, with_noise_input
from synthesis.phonemes import Phonemizer
from synthesis.staged import StagedEngine
from synthesis.stages import UnsupportedGraph, split_voice, with_fixed_inputs
from tests.conftest import DETERMINISTIC
from tests.test_engine import SENTENCES
from tests.test_staged import BUCKETS, _model, _save_copy
from ttsfarm.voices import Voice

FRONT_SLOTS = EngineOptions(provider="cpu", warmup=False, shape_buckets=True, capture_front=True)
"""The staged engine with rewritten fronts on their own lane (uncaptured on the CPU)."""


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _ops(model: onnx.ModelProto) -> set[str]:
    return {node.op_type for node in model.graph.node}


def _as_loaded(model: onnx.ModelProto, folder: Path) -> onnx.ModelProto:
    """``model`` as ONNX Runtime runs it after its device-independent rewrites (folding)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(folder / "loaded.onnx")
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return onnx.load(options.optimized_model_filepath)


@pytest.fixture(scope="module")
def front(voice: Voice) -> onnx.ModelProto:
    return split_voice(_model(voice)).front


@pytest.mark.parametrize(("rows", "ids"), [(1, 32), (3, 96)])
def test_the_rewritten_front_computes_the_same(
    front: onnx.ModelProto, rows: int, ids: int, tmp_path: Path
) -> None:
    fixed = with_fixed_inputs(front, {"input": (rows, ids), "input_lengths": (rows,)})
    noisy, noise_shape = with_noise_input(fixed)
    rewritten = capturable_front(fixed)
    assert rewritten.noise_shape == noise_shape == (rows, 2, ids)  # the duration predictor's noise
    assert not _ops(rewritten.model) & {"NonZero", "RandomNormalLike"}
    assert "NonZero" in _ops(noisy) and "RandomNormalLike" not in _ops(noisy)
    assert "Shape" in _ops(_as_loaded(noisy, tmp_path))  # shape arithmetic at run time, on the CPU
    assert not _ops(_as_loaded(rewritten.model, tmp_path)) & {"Shape", "NonZero"}  # none: capturable
    assert rewritten.output_shapes[rewritten.model.graph.output[0].name] == (rows, ids, 192)
    rng = np.random.default_rng(7)
    lengths = np.array([ids - 5 * row for row in range(rows)], dtype=np.int64)
    ids_in = rng.integers(1, 120, (rows, ids), dtype=np.int64)
    reference, dense = _session(noisy), _session(rewritten.model)
    for noise_w in (0.0, 0.8):
        feeds = {
            "input": ids_in,
            "input_lengths": lengths,
            "scales": np.array([0.667, 1.0, noise_w], dtype=np.float32),
            FRONT_NOISE: rng.standard_normal(noise_shape, dtype=np.float32),
        }
        for expected, actual in zip(reference.run(None, feeds), dense.run(None, feeds), strict=True):
            assert expected.shape == actual.shape
            assert np.array_equal(expected, actual)


def _masked_graph(consumer: str = "GatherND") -> onnx.ModelProto:
    """``y = x`` with ``y[x > 0] = 2 * x[x > 0]``, as PyTorch exports masked assignment."""
    nodes = [
        helper.make_node("Greater", ["x", "zero"], ["mask"]),
        helper.make_node("NonZero", ["mask"], ["where"]),
        helper.make_node("Transpose", ["where"], ["index"], perm=[1, 0]),
        helper.make_node(consumer, ["x", "index"], ["picked"]),
        helper.make_node("Mul", ["picked", "two"], ["doubled"]),
        helper.make_node("Expand", ["mask", "shape"], ["mask_again"]),
        helper.make_node("NonZero", ["mask_again"], ["where_again"]),
        helper.make_node("Transpose", ["where_again"], ["index_again"], perm=[1, 0]),
        helper.make_node("ScatterND", ["x", "index_again", "doubled"], ["y"]),
    ]
    initializers = [
        numpy_helper.from_array(np.array(0, dtype=np.float32), "zero"),
        numpy_helper.from_array(np.array(2, dtype=np.float32), "two"),
        numpy_helper.from_array(np.array([2, 5], dtype=np.int64), "shape"),
    ]
    graph = helper.make_graph(
        nodes,
        "masked",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what this onnxruntime reads
    return model


def test_masked_assignment_made_dense() -> None:
    model = _masked_graph()
    dense = with_dense_masks(model)
    assert "NonZero" not in _ops(dense) and "ScatterND" not in _ops(dense)
    x = np.array([[-1.0, 2.0, 0.0, 3.5, -4.0], [5.0, -6.0, 7.0, 0.25, -0.5]], dtype=np.float32)
    expected = np.where(x > 0, 2 * x, x)
    assert np.array_equal(_session(model).run(None, {"x": x})[0], expected)
    assert np.array_equal(_session(dense).run(None, {"x": x})[0], expected)


def test_masked_indexing_it_does_not_know_is_refused() -> None:
    with pytest.raises(UnsupportedGraph, match="indices are used by Gather"):
        with_dense_masks(_masked_graph(consumer="Gather"))


def test_a_front_whose_noise_is_not_standard_normal_runs_plain(
    voice: Voice, phonemizer: Phonemizer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = _model(voice)
    noise = next(node for node in model.graph.node if node.name == "/dp/RandomNormalLike")
    noise.attribute.append(helper.make_attribute("scale", 0.5))
    scaled = _save_copy(voice, model, tmp_path / "scaled.onnx")
    with caplog.at_level(logging.WARNING, logger="synthesis.staged"):
        engine = StagedEngine(scaled, FRONT_SLOTS)  # found at load, before any batch is in flight
    assert "no CUDA graph for the front" in caplog.text and "not standard normal" in caplog.text
    items = [EngineItem(phonemizer.ids("A short sentence, then another one."))] * 2
    waves = engine.run(items, DETERMINISTIC)
    assert not engine._front_slots and engine._fronts  # plain fronts throughout
    assert len(waves) == 2 and all(np.abs(wave).max() > 0.05 for wave in waves)
    noisy = engine.run(items, Scales(0.667, 1.0, 0.8))  # and with the (scaled) noise on
    assert len(noisy) == 2 and all(np.isfinite(wave).all() and np.abs(wave).max() > 0.05 for wave in noisy)


def test_front_slots_speak_as_the_plain_fronts(voice: Voice, phonemizer: Phonemizer) -> None:
    plain, slots = StagedEngine(voice, BUCKETS), StagedEngine(voice, FRONT_SLOTS)
    assert slots.prepare([2], max_ids=48) == 2 + 4
    assert set(slots._front_slots) == {(1, 32), (2, 32), (2, 48)}  # (1, 32): built at load
    assert not slots.front_graphs  # no CUDA here
    items = [EngineItem(phonemizer.ids(text)) for text in SENTENCES]
    for batch in (items[:2], items[2:], items[:1]):
        expected, actual = plain.run(batch, DETERMINISTIC), slots.run(batch, DETERMINISTIC)
        assert [len(wave) for wave in actual] == [len(wave) for wave in expected]
        for reference, wave in zip(expected, actual, strict=True):
            assert np.max(np.abs(wave - reference)) <= 1e-6


def test_front_slots_run_from_several_threads_as_from_one(voice: Voice, phonemizer: Phonemizer) -> None:
    """Runs share the front slots and waveform slots: three at once give what one at a time gives."""
    engine = StagedEngine(voice, FRONT_SLOTS)
    items = [EngineItem(phonemizer.ids(text)) for text in SENTENCES]
    batches = [[items[i % 4], items[(i + 1) % 4]] for i in range(8)]  # a few buckets, each used often
    alone = [engine.run(batch, DETERMINISTIC) for batch in batches]
    with ThreadPoolExecutor(3) as pool:
        together = list(pool.map(lambda batch: engine.run(batch, DETERMINISTIC), batches))
    for expected, actual in zip(alone, together, strict=True):
        assert [len(wave) for wave in actual] == [len(wave) for wave in expected]
        for reference, wave in zip(expected, actual, strict=True):
            assert np.array_equal(wave, reference)
