"""Spelled-out layer norms fused into one node: the same durations, nearly the same audio."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from synthesis.graph import expose_durations
from synthesis.layer_norms import LAYER_NORM_OPSET, with_fused_layer_norms
from synthesis.phonemes import Phonemizer
from ttsfarm.voices import Voice

SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "Is it true that Professor Nakamura will give the opening lecture?",
    "On the second of February, 1882, the village was too small to appear on most maps.",
)


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _spelled_out(prefix: str, source: str, axes: list[int], gamma: str, beta: str) -> list[onnx.NodeProto]:
    """A layer norm as Piper's exporter writes it, reading ``source``, writing ``prefix``/out."""
    return [
        helper.make_node("ReduceMean", [source], [f"{prefix}/mean"], axes=axes),
        helper.make_node("Sub", [source, f"{prefix}/mean"], [f"{prefix}/centred"]),
        helper.make_node("Pow", [f"{prefix}/centred", "two"], [f"{prefix}/squared"]),
        helper.make_node("ReduceMean", [f"{prefix}/squared"], [f"{prefix}/variance"], axes=axes),
        helper.make_node("Add", [f"{prefix}/variance", "epsilon"], [f"{prefix}/shifted"]),
        helper.make_node("Sqrt", [f"{prefix}/shifted"], [f"{prefix}/deviation"]),
        helper.make_node("Div", [f"{prefix}/centred", f"{prefix}/deviation"], [f"{prefix}/normed"]),
        helper.make_node("Mul", [f"{prefix}/normed", gamma], [f"{prefix}/scaled"]),
        helper.make_node("Add", [f"{prefix}/scaled", beta], [f"{prefix}/out"]),
    ]


def _two_norms() -> onnx.ModelProto:
    """One layer norm over the last axis, then one over axis 1, which is not fused."""
    rng = np.random.default_rng(3)
    weights = {
        "gamma": rng.standard_normal(6).astype(np.float32),
        "beta": rng.standard_normal(6).astype(np.float32),
        "two": np.array(2.0, dtype=np.float32),
        "epsilon": np.array(1e-5, dtype=np.float32),
    }
    nodes = _spelled_out("last", "x", [-1], "gamma", "beta")
    nodes += _spelled_out("first", "last/out", [1], "gamma", "beta")
    graph = helper.make_graph(
        nodes,
        "norms",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 6])],
        [helper.make_tensor_value_info("first/out", TensorProto.FLOAT, [2, 6, 6])],
        [numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)


def test_a_last_axis_layer_norm_is_fused_and_computes_the_same() -> None:
    model = _two_norms()
    fused, count = with_fused_layer_norms(model)
    assert count == 1
    ops = [node.op_type for node in fused.graph.node]
    assert ops.count("LayerNormalization") == 1 and ops.count("Pow") == 1  # the axis-1 norm stays
    assert fused.opset_import[0].version == LAYER_NORM_OPSET
    onnx.checker.check_model(fused, full_check=True)
    x = np.random.default_rng(4).standard_normal((2, 6, 6)).astype(np.float32)
    expected = _session(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(_session(fused).run(None, {"x": x})[0], expected, atol=1e-5)
    assert len(model.graph.node) == 18  # the model given is left as it was


def test_a_norm_whose_centred_input_is_read_elsewhere_is_left_alone() -> None:
    model = _two_norms()
    model.graph.output.append(helper.make_tensor_value_info("last/centred", TensorProto.FLOAT, None))
    model.graph.node.append(helper.make_node("Identity", ["last/centred"], ["peek"]))
    assert with_fused_layer_norms(model)[1] == 0


@pytest.fixture(scope="module")
def joe(voice: Voice) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    model = onnx.load(str(voice.model_path))
    expose_durations(model)
    fused, count = with_fused_layer_norms(model)
    assert count == 36  # the text encoder's and the duration predictor's
    powers = [node.name for node in fused.graph.node if node.op_type == "Pow"]
    assert powers and all(name.startswith("/dp/flows.") for name in powers)  # the splines' own
    return model, fused


def test_joe_fused_speaks_the_same_lengths(
    joe: tuple[onnx.ModelProto, onnx.ModelProto], phonemizer: Phonemizer
) -> None:
    model, fused = joe
    original, changed = _session(model), _session(fused)
    scales = np.array([0.0, 1.0, 0.0], dtype=np.float32)  # no noise: the same input, the same output
    for sentence in SENTENCES:
        ids = np.array([phonemizer.ids(sentence)], dtype=np.int64)
        feeds = {"input": ids, "input_lengths": np.array([ids.shape[1]], dtype=np.int64), "scales": scales}
        (audio, durations), (fused_audio, fused_durations) = (
            [outputs[0], outputs[-1]] for outputs in (original.run(None, feeds), changed.run(None, feeds))
        )
        np.testing.assert_array_equal(fused_durations, durations)
        assert np.max(np.abs(fused_audio - audio)) < 1e-3
