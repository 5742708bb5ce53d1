"""A ``ConvTranspose``'s bias moved to an ``Add`` (``synthesis.transpose_bias``): the waveform
stage computes the same, with no biased ``ConvTranspose`` left for cuDNN's frontend to refuse."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort

from synthesis.stages import split_voice
from synthesis.transpose_bias import with_transpose_biases_apart
from ttsfarm.voices import Voice

JOE_UPSAMPLINGS = 3
"""The ``ConvTranspose`` layers of joe's decoder that follow the flow."""


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, feeds)[0])


def test_the_waveform_stage_computes_the_same_with_its_biases_apart(voice: Voice) -> None:
    waveform = split_voice(onnx.load(str(voice.model_path))).waveform
    apart, count = with_transpose_biases_apart(waveform)
    assert count == JOE_UPSAMPLINGS
    onnx.checker.check_model(apart)
    assert not [node for node in apart.graph.node if node.op_type == "ConvTranspose" and len(node.input) > 2]
    assert with_transpose_biases_apart(apart)[1] == 0
    used = {name for node in apart.graph.node for name in node.input}
    assert all(init.name in used for init in apart.graph.initializer)  # the old biases went
    rng = np.random.default_rng(11)
    prior, mask = (value.name for value in waveform.graph.input)
    feeds = {
        prior: rng.standard_normal((2, 192, 40), dtype=np.float32),
        mask: np.concatenate([np.ones((2, 1, 33)), np.zeros((2, 1, 7))], axis=2).astype(np.float32),
    }
    expected, actual = _run(waveform, feeds), _run(apart, feeds)
    assert expected.shape == actual.shape == (2, 1, 1, 40 * voice.hop_length)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-6)
