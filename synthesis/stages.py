"""A Piper (VITS) voice cut into stages with static shapes, so the GPU can replay each.

The whole graph has data-dependent shapes in its middle: the decoder's length is the sum of the
predicted durations. That one dynamic step is taken out of the graph, and what is left falls
into two halves with fixed shapes per bucket:

- **front**: phoneme ids to the text encoder's prior (mean and log-std per phoneme, transposed
  to ``(rows, ids, channels)``), the per-phoneme durations (the graph's only ``Ceil``) and any
  conditioning the flow needs (a multi-speaker voice's speaker embedding). Shapes depend on
  ``(rows, phoneme ids)`` only.
- **expand** (built here, not cut out): the prior repeated frame by frame by the durations, as a
  ``Gather`` with an index it computes from them, and the prior's noise added
  (``z_p = m_p + noise * exp(logs_p) * noise_scale``, as the voice does it). It holds the only
  random op, so it is never captured: every run draws new noise.
- **waveform**: ``z_p`` and the frame mask to audio: the flow and the HiFi-GAN decoder, where
  nearly all the arithmetic is. Shapes depend on ``(rows, frames)`` only, and nothing in it is
  random, so a CUDA graph of it can be replayed.

The cut points are found from the graph's structure (the ``Ceil`` durations, the prior's
``RandomNormalLike``, the ``MatMul`` that expands mean and log-std), not from node names, so any
Piper voice exported the usual way splits, single- or multi-speaker. A graph that does not match
raises :class:`UnsupportedGraph`, saying what was missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import onnx
from onnx import TensorProto, helper
from onnx.utils import Extractor

from synthesis.graph import consumers_of, copy_of

NOISE_OP: Final = "RandomNormalLike"
DURATION_OP: Final = "Ceil"
EXPAND_MEAN: Final = "stage/mean_t"
EXPAND_LOG_STD: Final = "stage/log_std_t"
EXPAND_DURATIONS: Final = "stage/durations"
EXPAND_FRAMES: Final = "stage/frames"
EXPAND_NOISE_SCALE: Final = "stage/noise_scale"
PLAN_INDEX: Final = "plan/index"
"""Inside expand: each frame's row-major index into the ``(rows * ids)`` prior."""
PLAN_MASK: Final = "plan/mask"
"""Inside expand: the frame mask, ``(rows, 1, frames)``."""
AUDIO_OUTPUT: Final = "output"
COPY_INPUT: Final = "stage/device_audio"
COPY_OUTPUT: Final = "stage/host_audio"


class UnsupportedGraph(ValueError):
    """The voice's graph does not have the structure the stages are cut along."""


@dataclass(frozen=True)
class StageNames:
    """Tensor names at the cuts, as they are in the voice's graph."""

    mean_t: str
    """Front output: the prior's mean per phoneme, ``(rows, ids, channels)``."""
    log_std_t: str
    """Front output: the prior's log standard deviation per phoneme, same shape."""
    durations: str
    """Front output: frames per phoneme, ``(rows, 1, ids)``, float."""
    extras: tuple[str, ...]
    """Front outputs that the waveform stage takes as they are (a speaker embedding)."""
    prior: str
    """Waveform input: ``z_p``, ``(rows, channels, frames)``."""
    mask: str
    """Waveform input: the frame mask, ``(rows, 1, frames)``, 1 for frames an item speaks."""
    channels: int


@dataclass(frozen=True)
class VoiceStages:
    front: onnx.ModelProto
    expand: onnx.ModelProto
    waveform: onnx.ModelProto
    names: StageNames


def split_voice(model: onnx.ModelProto) -> VoiceStages:
    """Cut ``model`` into front, expand and waveform stages (see the module docstring)."""
    try:
        return _split(onnx.shape_inference.infer_shapes(model))
    except UnsupportedGraph:
        raise
    except (ValueError, KeyError, onnx.checker.ValidationError) as error:
        raise UnsupportedGraph(f"the stages could not be cut out: {error}") from error


def _split(model: onnx.ModelProto) -> VoiceStages:
    graph = model.graph
    producers = {out: node for node in graph.node for out in node.output}
    consumers = consumers_of(graph.node)
    ceils = [node for node in graph.node if node.op_type == DURATION_OP]
    if len(ceils) != 1:
        raise UnsupportedGraph(f"expected one {DURATION_OP} (the durations), found {len(ceils)}")
    durations = ceils[0].output[0]
    after_durations = _downstream(durations, consumers)
    noises = [node for node in graph.node if node.op_type == NOISE_OP and id(node) in after_durations]
    if len(noises) != 1:
        raise UnsupportedGraph(f"expected one {NOISE_OP} after the durations, found {len(noises)}")
    mean_expanded = noises[0].input[0]
    prior, log_std_expanded = _prior_sum(mean_expanded, noises[0].output[0], consumers, producers)
    mean_t = _unexpanded(mean_expanded, producers, after_durations)
    log_std_t = _unexpanded(log_std_expanded, producers, after_durations)
    waveform_nodes = _downstream(prior, consumers)
    boundary = _boundary(graph, waveform_nodes, producers)
    timed = [
        name
        for name in boundary
        if name != prior and name in producers and id(producers[name]) in after_durations
    ]
    if len(timed) != 1:
        raise UnsupportedGraph(f"expected one frame mask into the flow, found {timed}")
    mask = timed[0]
    extras = tuple(name for name in boundary if name not in (prior, mask))
    _check_extras(model, extras)
    channels = _channels(model, mean_t)
    names = StageNames(mean_t, log_std_t, durations, extras, prior, mask, channels)
    inputs = tuple(i.name for i in graph.input)
    extractor = Extractor(model)
    front = extractor.extract_model(list(inputs), [mean_t, log_std_t, durations, *extras])
    waveform = extractor.extract_model([prior, mask, *extras], [AUDIO_OUTPUT])
    _check_closed(waveform, "waveform")
    _name_dims(waveform, {prior: ("rows", channels, "frames"), mask: ("rows", 1, "frames")})
    _name_dims(front, {mean_t: ("rows", "ids", channels), log_std_t: ("rows", "ids", channels)})
    return VoiceStages(front, expand_model(names, front), waveform, names)


def _downstream(start: str, consumers: Mapping[str, Sequence[onnx.NodeProto]]) -> set[int]:
    found: set[int] = set()
    frontier = [start]
    while frontier:
        for node in consumers.get(frontier.pop(), []):
            if id(node) not in found:
                found.add(id(node))
                frontier.extend(node.output)
    return found


def _prior_sum(
    mean: str,
    noise: str,
    consumers: Mapping[str, Sequence[onnx.NodeProto]],
    producers: Mapping[str, onnx.NodeProto],
) -> tuple[str, str]:
    """``z_p = mean + noise * exp(log_std) * scale``: returns z_p and the expanded log-std."""
    adds = [node for node in consumers.get(mean, []) if node.op_type == "Add"]
    if len(adds) != 1:
        raise UnsupportedGraph("expected the prior's noise to be added to its mean once")
    other = next(name for name in adds[0].input if name != mean)
    leaves = _product_leaves(other, producers)
    exps = [producers[name] for name in leaves if name in producers and producers[name].op_type == "Exp"]
    if noise not in leaves or len(exps) != 1 or len(leaves) != 3:
        raise UnsupportedGraph("expected noise * exp(log_std) * noise_scale in the prior")
    return adds[0].output[0], exps[0].input[0]


def _product_leaves(name: str, producers: Mapping[str, onnx.NodeProto]) -> list[str]:
    node = producers.get(name)
    if node is None or node.op_type != "Mul":
        return [name]
    return [leaf for factor in node.input for leaf in _product_leaves(factor, producers)]


def _unexpanded(expanded: str, producers: Mapping[str, onnx.NodeProto], after_durations: set[int]) -> str:
    """The per-phoneme tensor behind ``Transpose(MatMul(path, per_phoneme))``."""
    transpose = producers.get(expanded)
    if transpose is None or transpose.op_type != "Transpose":
        raise UnsupportedGraph(f"expected {expanded} to come from a Transpose")
    matmul = producers.get(transpose.input[0])
    if matmul is None or matmul.op_type != "MatMul":
        raise UnsupportedGraph(f"expected {expanded} to be expanded by a MatMul")
    per_phoneme = [
        name for name in matmul.input if name not in producers or id(producers[name]) not in after_durations
    ]
    if len(per_phoneme) != 1:
        raise UnsupportedGraph(f"expected one per-phoneme input to the MatMul behind {expanded}")
    return str(per_phoneme[0])


def _boundary(graph: onnx.GraphProto, nodes: set[int], producers: Mapping[str, onnx.NodeProto]) -> list[str]:
    """Tensors the nodes read that are made outside them from the graph's inputs."""
    inside = {out for node in graph.node if id(node) in nodes for out in node.output}
    initializers = {init.name for init in graph.initializer}
    names: list[str] = []
    for node in graph.node:
        if id(node) not in nodes:
            continue
        for name in node.input:
            fresh = name and name not in inside and name not in initializers and name not in names
            if fresh and not _constant(name, producers, initializers):
                names.append(name)
    return names


def _constant(name: str, producers: Mapping[str, onnx.NodeProto], initializers: set[str]) -> bool:
    """Whether ``name`` is computed from constants alone (the extractor copies those along)."""
    stack, seen = [name], set()
    while stack:
        current = stack.pop()
        if current in seen or current in initializers or not current:
            continue
        seen.add(current)
        node = producers.get(current)
        if node is None:
            return False  # a graph input
        stack.extend(node.input)
    return True


def _check_extras(model: onnx.ModelProto, extras: Sequence[str]) -> None:
    """Extras get fixed buffers per bucket: rows first, every other size known."""
    shapes = {info.name: info.type.tensor_type.shape for info in model.graph.value_info}
    for name in extras:
        dims = shapes[name].dim if name in shapes else []
        if not dims or any(not dim.HasField("dim_value") for dim in dims[1:]):
            raise UnsupportedGraph(f"the flow's input {name} has no fixed size past the batch")


def _channels(model: onnx.ModelProto, mean_t: str) -> int:
    for info in model.graph.value_info:
        if info.name == mean_t:
            dims = info.type.tensor_type.shape.dim
            if len(dims) == 3 and dims[2].HasField("dim_value"):
                return int(dims[2].dim_value)
    raise UnsupportedGraph(f"no static channel count for {mean_t}")


def _name_dims(model: onnx.ModelProto, dims: Mapping[str, Sequence[int | str]]) -> None:
    """Give the stage's inputs and outputs at the cuts their shapes (inference leaves some out)."""
    for value in [*model.graph.input, *model.graph.output]:
        if value.name in dims:
            shape = value.type.tensor_type.shape
            del shape.dim[:]
            for size in dims[value.name]:
                if isinstance(size, int):
                    shape.dim.add().dim_value = size
                else:
                    shape.dim.add().dim_param = size


def _check_closed(model: onnx.ModelProto, stage: str) -> None:
    graph = model.graph
    known = {i.name for i in graph.input} | {init.name for init in graph.initializer}
    known |= {out for node in graph.node for out in node.output}
    missing = sorted({name for node in graph.node for name in node.input if name and name not in known})
    if missing:
        raise UnsupportedGraph(f"the {stage} stage reads tensors made outside it: {missing[:5]}")


def expand_model(names: StageNames, front: onnx.ModelProto) -> onnx.ModelProto:
    """The expand stage: per-phoneme prior to per-frame ``z_p`` and the frame mask; extras
    passed through.

    The host gives the integer durations ``(rows, ids)`` and the frame count; the graph works out
    each frame's phoneme (:func:`_frame_plan_nodes`). Frames past an item's length get mean 0 and
    log-std 0, as the voice's own expansion gives them.
    """
    channels = names.channels
    nodes = _frame_plan_nodes()
    per_frame = {}
    for source, label in ((EXPAND_MEAN, "mean"), (EXPAND_LOG_STD, "log_std")):
        nodes += [
            helper.make_node("Flatten", [source], [f"{label}/flat"], axis=2),
            helper.make_node("Gather", [f"{label}/flat", PLAN_INDEX], [f"{label}/frames"], axis=0),
            helper.make_node("Transpose", [f"{label}/frames"], [f"{label}/channels_first"], perm=[0, 2, 1]),
            helper.make_node("Mul", [f"{label}/channels_first", PLAN_MASK], [f"{label}/masked"]),
        ]
        per_frame[label] = f"{label}/masked"
    nodes += [
        helper.make_node(NOISE_OP, [per_frame["mean"]], ["noise"]),
        helper.make_node("Exp", [per_frame["log_std"]], ["std"]),
        helper.make_node("Mul", ["noise", "std"], ["scaled_noise"]),
        helper.make_node("Mul", ["scaled_noise", EXPAND_NOISE_SCALE], ["noise_term"]),
        helper.make_node("Add", [per_frame["mean"], "noise_term"], [names.prior]),
        helper.make_node("Identity", [PLAN_MASK], [names.mask]),
    ]
    extra_types = {out.name: out.type for out in front.graph.output if out.name in names.extras}
    inputs = [
        helper.make_tensor_value_info(EXPAND_MEAN, TensorProto.FLOAT, ["rows", "ids", channels]),
        helper.make_tensor_value_info(EXPAND_LOG_STD, TensorProto.FLOAT, ["rows", "ids", channels]),
        helper.make_tensor_value_info(EXPAND_DURATIONS, TensorProto.INT64, ["rows", "ids"]),
        helper.make_tensor_value_info(EXPAND_FRAMES, TensorProto.INT64, []),
        helper.make_tensor_value_info(EXPAND_NOISE_SCALE, TensorProto.FLOAT, []),
    ]
    outputs = [
        helper.make_tensor_value_info(names.prior, TensorProto.FLOAT, ["rows", channels, "frames"]),
        helper.make_tensor_value_info(names.mask, TensorProto.FLOAT, ["rows", 1, "frames"]),
    ]
    for extra in names.extras:
        nodes.append(helper.make_node("Identity", [extra_input(extra)], [extra]))
        for values, name in ((inputs, extra_input(extra)), (outputs, extra)):
            value = onnx.ValueInfoProto(name=name)
            value.type.CopyFrom(extra_types[extra])
            values.append(value)
    graph = helper.make_graph(nodes, "ttsfarm_expand", inputs, outputs, initializer=_plan_constants())
    opset = [helper.make_opsetid("", 17)]
    model = helper.make_model(graph, opset_imports=opset, producer_name="ttsfarm")
    model.ir_version = min(model.ir_version, 8)
    onnx.checker.check_model(model, full_check=True)
    return model


def _frame_plan_nodes() -> list[onnx.NodeProto]:
    """Nodes from :data:`EXPAND_DURATIONS` and :data:`EXPAND_FRAMES` to :data:`PLAN_INDEX` and
    :data:`PLAN_MASK` (1 for the frames an item speaks).

    A frame ``f`` of a row speaks the row's first id whose cumulative duration exceeds ``f``: its
    index is the number of ids whose cumulative duration is at most ``f``, counted over a
    ``(rows, frames, ids)`` comparison, as bools and then as floats (exact for counts under
    2**24; CUDA sums floats along the last axis without a copy, integers it copies to floats
    first). That takes 5 bytes per element while expand runs: 26 MB at 32 rows x 1,024 frames x
    160 ids, 262 MB at the most a run of several items takes (``max_batch_frames`` 131,072 x 400
    ids). The row totals are a ReduceSum on int64, over the durations only (``rows x ids``). Every
    op has CUDA kernels for its types. A frame past its row's length points at the row's first id
    and is masked.
    """
    node = helper.make_node
    return [
        node("CumSum", [EXPAND_DURATIONS, "plan/one"], ["plan/ends"]),
        node("Range", ["plan/zero", EXPAND_FRAMES, "plan/one"], ["plan/positions"]),
        node("Unsqueeze", ["plan/ends", "plan/one_axis"], ["plan/ends_by_row"]),
        node("Unsqueeze", ["plan/positions", "plan/one_axis"], ["plan/position_column"]),
        node("LessOrEqual", ["plan/ends_by_row", "plan/position_column"], ["plan/passed"]),
        node("Cast", ["plan/passed"], ["plan/passed_counts"], to=TensorProto.FLOAT),
        node("ReduceSum", ["plan/passed_counts", "plan/two_axis"], ["plan/id_counts"], keepdims=0),
        node("Cast", ["plan/id_counts"], ["plan/id_in_row"], to=TensorProto.INT64),
        node("ReduceSum", [EXPAND_DURATIONS, "plan/one_axis"], ["plan/totals"], keepdims=1),
        node("Less", ["plan/positions", "plan/totals"], ["plan/spoken"]),
        node("Where", ["plan/spoken", "plan/id_in_row", "plan/zero"], ["plan/spoken_id"]),
        node("Shape", [EXPAND_DURATIONS], ["plan/shape"]),
        node("Gather", ["plan/shape", "plan/zero"], ["plan/rows"], axis=0),
        node("Gather", ["plan/shape", "plan/one"], ["plan/ids"], axis=0),
        node("Mul", ["plan/rows", "plan/ids"], ["plan/all_ids"]),
        node("Range", ["plan/zero", "plan/all_ids", "plan/ids"], ["plan/row_starts"]),
        node("Unsqueeze", ["plan/row_starts", "plan/one_axis"], ["plan/row_start_column"]),
        node("Add", ["plan/spoken_id", "plan/row_start_column"], [PLAN_INDEX]),
        node("Cast", ["plan/spoken"], ["plan/spoken_float"], to=TensorProto.FLOAT),
        node("Unsqueeze", ["plan/spoken_float", "plan/one_axis"], [PLAN_MASK]),
    ]


def _plan_constants() -> list[onnx.TensorProto]:
    scalar = {"plan/zero": 0, "plan/one": 1}
    axes = {"plan/one_axis": [1], "plan/two_axis": [2]}
    return [
        *(helper.make_tensor(name, TensorProto.INT64, [], [value]) for name, value in scalar.items()),
        *(helper.make_tensor(name, TensorProto.INT64, [1], value) for name, value in axes.items()),
    ]


def extra_input(name: str) -> str:
    """The expand stage's input name for a passed-through front output."""
    return f"stage/in/{name}"


def with_fixed_inputs(model: onnx.ModelProto, dims: Mapping[str, Sequence[int]]) -> onnx.ModelProto:
    """A copy of ``model`` whose named inputs have these fixed dimensions.

    With every input shape known, ONNX Runtime folds the graph's shape arithmetic away at load,
    which leaves no CPU node in between: the condition for capturing a CUDA graph.
    """
    fixed = copy_of(model)
    for value in fixed.graph.input:
        if value.name in dims:
            shape = value.type.tensor_type.shape
            del shape.dim[:]
            for size in dims[value.name]:
                shape.dim.add().dim_value = int(size)
    return fixed


def copy_model() -> onnx.ModelProto:
    """``Identity`` on float tensors of any shape: run with its output bound to host memory, it
    copies a device buffer there inside a session run, which releases the GIL."""
    graph = helper.make_graph(
        [helper.make_node("Identity", [COPY_INPUT], [COPY_OUTPUT])],
        "copy",
        [helper.make_tensor_value_info(COPY_INPUT, TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info(COPY_OUTPUT, TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
