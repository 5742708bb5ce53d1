"""The relative-position chains as one ``Gather`` each (``synthesis.relative_positions``): the
voice computes the same bits, with its big pads gone, in every engine and in a captured front."""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from synthesis.engine import EngineItem, EngineOptions
from synthesis.graph import expose_durations
from synthesis.phonemes import Phonemizer
from synthesis.relative_positions import expected_positions, with_gathered_relative_positions
from synthesis.staged import StagedEngine
from tests.conftest import DETERMINISTIC
from tests.helpers_engine import SENTENCES
from ttsfarm.core.voices import Voice

ATTENTION_LAYERS = 6
"""Joe's text encoder: each layer turns relative logits absolute, and its weights relative."""


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _pads(model: onnx.ModelProto) -> int:
    return sum(node.op_type == "Pad" for node in model.graph.node)


@pytest.fixture(scope="module")
def exported(voice: Voice) -> onnx.ModelProto:
    model = onnx.load(str(voice.model_path))
    expose_durations(model)
    return model


@pytest.fixture(scope="module")
def gathered(exported: onnx.ModelProto) -> onnx.ModelProto:
    model, chains = with_gathered_relative_positions(exported)
    assert chains == 2 * ATTENTION_LAYERS
    return model


def test_each_chain_becomes_one_gather(exported: onnx.ModelProto, gathered: onnx.ModelProto) -> None:
    onnx.checker.check_model(gathered)
    # four big pads per layer went, one pad of a single zero column per layer came
    assert _pads(exported) - _pads(gathered) == 3 * ATTENTION_LAYERS
    assert len(gathered.graph.node) < len(exported.graph.node)
    assert with_gathered_relative_positions(gathered)[1] == 0  # nothing left to rewrite


@pytest.mark.slow
@pytest.mark.parametrize(("rows", "ids"), [(1, 1), (1, 9), (3, 60), (2, 211)])
def test_the_whole_voice_computes_the_same_bits(
    exported: onnx.ModelProto, gathered: onnx.ModelProto, rows: int, ids: int
) -> None:
    """Audio and durations, with padded rows: lengths shorter than the batch's widest."""
    rng = np.random.default_rng(ids)
    feeds = {
        "input": rng.integers(1, 120, (rows, ids), dtype=np.int64),
        "input_lengths": np.array([max(ids - 7 * row, 1) for row in range(rows)], dtype=np.int64),
        "scales": np.array([0.0, 1.0, 0.0], dtype=np.float32),
    }
    outputs = (_session(model).run(None, feeds) for model in (exported, gathered))
    for expected, actual in zip(*outputs, strict=True):
        assert expected.shape == actual.shape
        assert np.array_equal(expected, actual)


@pytest.mark.slow
def test_the_staged_engine_speaks_the_same_with_and_without(voice: Voice) -> None:
    options = EngineOptions(provider="cpu", warmup=False, shape_buckets=True)
    engines = [StagedEngine(voice, options), StagedEngine(voice, replace(options, gathered_positions=False))]
    phonemizer = Phonemizer(voice)
    items = [EngineItem(phonemizer.ids(text)) for text in SENTENCES]
    waves = [engine.run(items, DETERMINISTIC) for engine in engines]
    for ours, exported_wave in zip(*waves, strict=True):
        assert np.array_equal(ours, exported_wave)


def _chain_model(slice_axes: list[int], slice_start: int) -> onnx.ModelProto:
    """``Pad → Reshape → Pad → Reshape → Slice`` with constant pads, as a foreign graph might have."""
    constants = {
        "pads": np.array([0, 0, 0, 0, 0, 0, 0, 1], dtype=np.int64),
        "flat": np.array([1, 1, 20], dtype=np.int64),
        "more": np.array([0, 0, 0, 0, 0, 4], dtype=np.int64),
        "square": np.array([1, 1, 4, 6], dtype=np.int64),
        "starts": np.array([slice_start], dtype=np.int64),
        "ends": np.array([2**63 - 1], dtype=np.int64),
        "axes": np.array(slice_axes, dtype=np.int64),
    }
    nodes = [
        helper.make_node("Pad", ["x", "pads"], ["padded"], mode="constant"),
        helper.make_node("Reshape", ["padded", "flat"], ["flat_x"]),
        helper.make_node("Pad", ["flat_x", "more"], ["longer"], mode="constant"),
        helper.make_node("Reshape", ["longer", "square"], ["squared"]),
        helper.make_node("Slice", ["squared", "starts", "ends", "axes"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(value, name) for name, value in constants.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)


@pytest.mark.parametrize(
    ("axes", "start", "looks_like_one"), [([3], 2, False), ([2], 1, False), ([3], 1, True), ([2, 3], 1, True)]
)
def test_other_pad_and_slice_chains_are_left_alone(
    axes: list[int], start: int, looks_like_one: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Two of these look like VITS's chains to the matcher; run alone, none computes what
    VITS's does, so none is replaced, and a log line says so for those two."""
    model = _chain_model(axes, start)
    with caplog.at_level(logging.INFO, logger="synthesis.relative_positions"):
        rewritten, count = with_gathered_relative_positions(model)
    assert count == 0
    assert rewritten.graph == model.graph
    assert ("left as exported" in caplog.text) == looks_like_one


def _vits_to_absolute(x: np.ndarray) -> np.ndarray:
    """VITS's ``_relative_position_to_absolute_position``, pad for pad, in numpy."""
    rows, heads, ids, _ = x.shape
    x = np.pad(x, [(0, 0), (0, 0), (0, 0), (0, 1)]).reshape(rows, heads, ids * 2 * ids)
    x = np.pad(x, [(0, 0), (0, 0), (0, ids - 1)])
    return x.reshape(rows, heads, ids + 1, 2 * ids - 1)[:, :, :ids, ids - 1 :]


def _vits_to_relative(x: np.ndarray) -> np.ndarray:
    """VITS's ``_absolute_position_to_relative_position``, pad for pad, in numpy."""
    rows, heads, ids, _ = x.shape
    x = np.pad(x, [(0, 0), (0, 0), (0, 0), (0, ids - 1)]).reshape(rows, heads, ids**2 + ids * (ids - 1))
    x = np.pad(x, [(0, 0), (0, 0), (ids, 0)])
    return x.reshape(rows, heads, ids, 2 * ids)[:, :, :, 1:]


@pytest.mark.parametrize("ids", [1, 2, 3, 8, 17])
def test_the_definition_is_what_vits_computes(ids: int) -> None:
    rng = np.random.default_rng(ids)
    relative = rng.standard_normal((2, 2, ids, 2 * ids - 1)).astype(np.float32)
    absolute = rng.standard_normal((2, 2, ids, ids)).astype(np.float32)
    assert np.array_equal(expected_positions(relative, to_absolute=True), _vits_to_absolute(relative))
    assert np.array_equal(expected_positions(absolute, to_absolute=False), _vits_to_relative(absolute))
