"""fp16 conversion of the waveform half and the audio distance used to judge it, on the CPU."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from bench.log_mel import log_mel_distance
from synthesis.graph import MIN_FRAMES_INPUT, add_frame_floor, expose_durations
from synthesis.phonemes import Phonemizer
from synthesis.precision import convert_to_fp16
from tests.conftest import DETERMINISTIC
from ttsfarm.core.voices import Voice

SENTENCE = "Children learned to swim off the wooden dock behind the post office."


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


@pytest.mark.slow
def test_fp16_model_is_valid_and_speaks_like_fp32(voice: Voice, phonemizer: Phonemizer) -> None:
    model = onnx.load(str(voice.model_path))
    expose_durations(model)
    add_frame_floor(model, 32)
    half = convert_to_fp16(model)  # runs onnx.checker with full type checking
    assert sum(init.data_type == onnx.TensorProto.FLOAT16 for init in half.graph.initializer) > 50
    assert [i.name for i in half.graph.input] == [i.name for i in model.graph.input]
    ids = phonemizer.ids(SENTENCE)
    feeds = {
        "input": np.array([ids], dtype=np.int64),
        "input_lengths": np.array([len(ids)], dtype=np.int64),
        "scales": DETERMINISTIC.as_array(),
        MIN_FRAMES_INPUT: np.array(0, dtype=np.int64),
    }
    full_audio, full_durations = _session(model).run(None, feeds)
    half_audio, half_durations = _session(half).run(None, feeds)
    assert half_audio.dtype == np.float32
    np.testing.assert_array_equal(full_durations, half_durations)  # the duration half stays fp32
    samples = int(full_durations.sum()) * voice.hop_length
    reference, converted = full_audio.reshape(-1)[:samples], half_audio.reshape(-1)[:samples]
    assert log_mel_distance(reference, converted, voice.sample_rate) < 0.05


def test_log_mel_distance_grows_with_the_difference() -> None:
    rate = 22050
    time = np.arange(rate) / rate
    tone = (0.3 * np.sin(2 * np.pi * 220 * time)).astype(np.float32)
    noise = np.random.default_rng(0).standard_normal(rate).astype(np.float32)
    assert log_mel_distance(tone, tone, rate) == 0.0
    slightly = log_mel_distance(tone, tone + 0.001 * noise, rate)
    clearly = log_mel_distance(tone, tone + 0.1 * noise, rate)
    assert 0.0 < slightly < clearly
    with pytest.raises(ValueError, match="lengths differ"):
        log_mel_distance(tone, tone[:-1], rate)


def test_frame_floor_is_added_once(voice: Voice) -> None:
    model = onnx.load(str(voice.model_path))
    assert add_frame_floor(model, 32) == MIN_FRAMES_INPUT
    nodes = len(model.graph.node)
    assert add_frame_floor(model, 32) == MIN_FRAMES_INPUT
    assert len(model.graph.node) == nodes
    with pytest.raises(ValueError):
        add_frame_floor(onnx.load(str(voice.model_path)), 0)
