"""Edits to a Piper (VITS) ONNX graph made at load time, before the session is built.

- :func:`expose_durations` adds the per-phoneme durations (the graph's only ``Ceil``) as an output,
  so each batched item can be trimmed to exactly ``sum(durations) * hop_length`` samples.
- :func:`add_frame_floor` lets the caller fix the decoder's length in frames. The CUDA provider
  rebuilds a cuDNN plan for every convolution whenever its input shape differs from the previous
  run's, which costs more than the synthesis itself; with a floor chosen per shape bucket, every run
  of a session sees the same shapes. Frames past an item's own length are padding and get trimmed.

And the helpers the other graph edits share (``synthesis.relative_positions``,
``synthesis.conv_bias``): who writes and
reads each tensor (:class:`GraphView`), nodes put in others' places (:func:`replace_nodes`), and
the removal of what an edit left unread.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from synthesis.buckets import MIN_FRAMES_INPUT


def expose_durations(model: onnx.ModelProto) -> str:
    """Add the ``Ceil`` durations tensor to the graph outputs; return its name."""
    ceil_outputs = [out for node in model.graph.node if node.op_type == "Ceil" for out in node.output]
    if len(ceil_outputs) != 1:
        raise ValueError(f"expected one Ceil node in a Piper voice, found {len(ceil_outputs)}")
    name = str(ceil_outputs[0])
    if all(output.name != name for output in model.graph.output):
        model.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [None, None, None]))
    return name


def add_frame_floor(model: onnx.ModelProto, granularity: int) -> str:
    """Make the decoder length ``max(min_frames, round_up(longest item, granularity))``.

    Piper computes the number of output frames as the ``ReduceMax`` of the items' lengths and
    feeds it to a ``Range`` that builds the frame mask; everything after (flow, decoder) takes its
    length from that mask. The new value is fed to the same consumers. Returns the input's name.
    """
    if granularity < 1:
        raise ValueError("granularity must be at least 1")
    if any(i.name == MIN_FRAMES_INPUT for i in model.graph.input):
        return MIN_FRAMES_INPUT
    maxima = [node for node in model.graph.node if node.op_type == "ReduceMax"]
    if len(maxima) != 1:
        raise ValueError(f"expected one ReduceMax node in a Piper voice, found {len(maxima)}")
    longest = maxima[0].output[0]
    prefix = "/ttsfarm/frame_floor"
    step = helper.make_tensor(f"{prefix}/step", TensorProto.INT64, [], [granularity])
    step_less_one = helper.make_tensor(f"{prefix}/step_less_one", TensorProto.INT64, [], [granularity - 1])
    model.graph.initializer.extend([step, step_less_one])
    nodes = [
        helper.make_node("Add", [longest, step_less_one.name], [f"{prefix}/sum"], name=f"{prefix}/Add"),
        helper.make_node("Div", [f"{prefix}/sum", step.name], [f"{prefix}/steps"], name=f"{prefix}/Div"),
        helper.make_node("Mul", [f"{prefix}/steps", step.name], [f"{prefix}/rounded"], name=f"{prefix}/Mul"),
        helper.make_node(
            "Max", [f"{prefix}/rounded", MIN_FRAMES_INPUT], [f"{prefix}/frames"], name=f"{prefix}/Max"
        ),
    ]
    for node in model.graph.node:
        for index, name in enumerate(node.input):
            if name == longest:
                node.input[index] = f"{prefix}/frames"
    position = list(model.graph.node).index(maxima[0]) + 1
    for offset, node in enumerate(nodes):
        model.graph.node.insert(position + offset, node)
    model.graph.input.append(helper.make_tensor_value_info(MIN_FRAMES_INPUT, TensorProto.INT64, []))
    return MIN_FRAMES_INPUT


def consumers_of(nodes: Iterable[onnx.NodeProto]) -> dict[str, list[onnx.NodeProto]]:
    """The nodes that read each tensor, by the tensor's name."""
    found: dict[str, list[onnx.NodeProto]] = {}
    for node in nodes:
        for name in node.input:
            found.setdefault(name, []).append(node)
    return found


def copy_of(model: onnx.ModelProto) -> onnx.ModelProto:
    """A deep copy of ``model``, for edits that leave the caller's model as it was."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy


def replace_nodes(
    graph: onnx.GraphProto, replacements: Sequence[tuple[onnx.NodeProto, Sequence[onnx.NodeProto]]]
) -> None:
    """Put each ``(node, by)``'s ``by`` in the place of ``node``, a node of ``graph.node`` (in
    place; the other nodes keep their order). What only the replaced nodes read stays: drop it
    with :func:`drop_unused_nodes` and :func:`drop_unused_initializers`."""
    by_node = {id(node): by for node, by in replacements}  # ids hold: the nodes are referenced
    nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        nodes.extend(by_node.get(id(node), (node,)))
    del graph.node[:]
    graph.node.extend(nodes)


def drop_unused_initializers(graph: onnx.GraphProto) -> None:
    """Remove the initializers no node reads (in place: the kept ones are not copied)."""
    used = {name for node in graph.node for name in node.input}
    for index in reversed(range(len(graph.initializer))):
        if graph.initializer[index].name not in used:
            del graph.initializer[index]


def drop_unused_nodes(graph: onnx.GraphProto) -> None:
    """Remove the nodes that no graph output depends on, in one pass back from the outputs."""
    producers = {output: node for node in graph.node for output in node.output}
    needed: set[int] = set()
    pending = [value.name for value in graph.output]
    while pending:
        node = producers.get(pending.pop())
        if node is not None and id(node) not in needed:
            needed.add(id(node))
            pending.extend(node.input)
    kept = [node for node in graph.node if id(node) in needed]
    if len(kept) < len(graph.node):
        del graph.node[:]
        graph.node.extend(kept)


class _Values(Mapping[str, np.ndarray]):
    """Initializers' values by name, each converted to numpy when first asked for: a matcher
    reads a few small constants, and converting every weight up front cost more than the match."""

    def __init__(self, initializers: Iterable[onnx.TensorProto]) -> None:
        self._tensors = {init.name: init for init in initializers}
        self._values: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._values:
            self._values[name] = numpy_helper.to_array(self._tensors[name])
        return self._values[name]

    def __contains__(self, name: object) -> bool:
        return name in self._tensors

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)


@dataclass(frozen=True)
class GraphView:
    """A graph's nodes by what they write and read, and its initializers' values, for matching."""

    producers: dict[str, onnx.NodeProto]
    consumers: dict[str, list[onnx.NodeProto]]
    constants: Mapping[str, np.ndarray]
    """The initializers' values, by name (converted when read)."""

    @classmethod
    def of(cls, graph: onnx.GraphProto) -> GraphView:
        return cls(
            {output: node for node in graph.node for output in node.output},
            consumers_of(graph.node),
            _Values(graph.initializer),
        )
