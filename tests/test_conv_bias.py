"""Convolution biases as ``Add`` nodes of their own (``synthesis.conv_bias``): the stages compute
the same, with no biased convolution of the chosen kinds left."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from synthesis.conv_bias import CONVOLUTIONS, with_biases_apart
from synthesis.stages import VoiceStages, split_voice
from ttsfarm.core.voices import Voice

JOE_UPSAMPLINGS = 3
"""The ``ConvTranspose`` layers of joe's decoder that follow the flow."""


@pytest.fixture(scope="module")
def stages(voice: Voice) -> VoiceStages:
    return split_voice(onnx.load(str(voice.model_path)))


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return [np.asarray(value) for value in session.run(None, feeds)]


def _biased(model: onnx.ModelProto, op_types: Collection[str]) -> int:
    return sum(
        1 for node in model.graph.node if node.op_type in op_types and len(node.input) > 2 and node.input[2]
    )


def _waveform_feeds(waveform: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    prior, mask = (value.name for value in waveform.graph.input)
    return {
        prior: rng.standard_normal((2, 192, 40), dtype=np.float32),
        mask: np.concatenate([np.ones((2, 1, 33)), np.zeros((2, 1, 7))], axis=2).astype(np.float32),
    }


def _assert_no_dead_weights(model: onnx.ModelProto) -> None:
    used = {name for node in model.graph.node for name in node.input}
    assert all(init.name in used for init in model.graph.initializer)  # the old biases went


def test_only_the_transposed_convolutions_lose_their_biases(stages: VoiceStages, voice: Voice) -> None:
    waveform = stages.waveform
    apart, count = with_biases_apart(waveform, {"ConvTranspose"})
    assert count == JOE_UPSAMPLINGS
    onnx.checker.check_model(apart)
    assert _biased(apart, {"ConvTranspose"}) == 0
    assert _biased(apart, {"Conv"}) == _biased(waveform, {"Conv"})
    assert with_biases_apart(apart, {"ConvTranspose"})[1] == 0
    _assert_no_dead_weights(apart)
    feeds = _waveform_feeds(waveform)
    expected, actual = _run(waveform, feeds)[0], _run(apart, feeds)[0]
    assert expected.shape == actual.shape == (2, 1, 1, 40 * voice.hop_length)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-6)


def test_the_waveform_computes_the_same_with_every_bias_apart(stages: VoiceStages) -> None:
    waveform = stages.waveform
    apart, count = with_biases_apart(waveform)
    assert count == _biased(waveform, CONVOLUTIONS) > JOE_UPSAMPLINGS
    onnx.checker.check_model(apart)
    assert _biased(apart, CONVOLUTIONS) == 0
    assert sum(node.op_type == "Add" for node in apart.graph.node) == count + sum(
        node.op_type == "Add" for node in waveform.graph.node
    )
    _assert_no_dead_weights(apart)
    feeds = _waveform_feeds(waveform)
    np.testing.assert_allclose(_run(apart, feeds)[0], _run(waveform, feeds)[0], rtol=0, atol=1e-6)


def test_the_front_predicts_the_same_durations_with_every_bias_apart(
    stages: VoiceStages, voice: Voice
) -> None:
    front = stages.front
    apart, count = with_biases_apart(front)
    assert count == _biased(front, CONVOLUTIONS) > 0
    onnx.checker.check_model(apart)
    rng = np.random.default_rng(5)
    ids = rng.integers(1, 100, size=(3, 57)).astype(np.int64)
    feeds = {
        "input": ids,
        "input_lengths": np.array([57, 50, 31], dtype=np.int64),
        "scales": np.array([0.0, 1.0, 0.0], dtype=np.float32),  # no noise: the same draw
    }
    expected, actual = _run(front, feeds), _run(apart, feeds)
    names = [output.name for output in front.graph.output]
    assert stages.names.durations in names
    for name, wanted, got in zip(names, expected, actual, strict=True):
        if name == stages.names.durations:
            np.testing.assert_array_equal(got, wanted)
        else:
            np.testing.assert_allclose(got, wanted, rtol=0, atol=1e-5)


def test_onnxruntime_does_not_fold_the_biases_back(stages: VoiceStages, tmp_path: Path) -> None:
    """``ConvAddFusion`` folds ``Conv(x, w) + b`` into the convolution (run 30); ``b + Conv(x, w)``
    it leaves alone. The optimized graph must keep every bias apart."""
    apart, count = with_biases_apart(stages.waveform)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(apart.SerializeToString(), options, providers=["CPUExecutionProvider"])
    optimized = onnx.load(str(tmp_path / "optimized.onnx"))
    biased = [
        node.name
        for node in optimized.graph.node
        if node.op_type in (*CONVOLUTIONS, "FusedConv") and len(node.input) > 2 and node.input[2]
    ]
    assert biased == []
    added = sum(node.op_type == "Add" for node in optimized.graph.node)
    assert added >= count
