"""Half precision for the GPU: convert a Piper voice's waveform half (flow and decoder) to fp16.

Only the part of the graph after the latent noise is converted: the normalising flow and the
HiFi-GAN decoder, where nearly all the arithmetic is. The text encoder and the duration
predictor stay fp32, so every item gets exactly the same durations, and therefore the same
length, as with the fp32 model; the audio differs only by rounding, measured with
``bench.log_mel.log_mel_distance``. Inputs and outputs keep their fp32 types.

The generic converter (``onnxruntime.transformers.float16``) gave an invalid model for these
graphs (their node names are not unique); this one converts one closed region and checks the
result with ``onnx.checker``.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Final

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from synthesis.graph import consumers_of, copy_of

FLOAT: Final = TensorProto.FLOAT
HALF: Final = TensorProto.FLOAT16
REGION_START_OP: Final = "RandomNormalLike"
"""The waveform half starts at the noise added to the prior (``z_p = m_p + noise * std``)."""


def _waveform_region(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Nodes downstream of the prior's noise: the flow and the decoder."""
    consumers = consumers_of(graph.node)
    producers = {out: node for node in graph.node for out in node.output}
    starts = [n for n in graph.node if n.op_type == REGION_START_OP and _downstream_of_ceil(n, producers)]
    if len(starts) != 1:
        raise ValueError(f"expected one {REGION_START_OP} after the durations, found {len(starts)}")
    region: dict[int, onnx.NodeProto] = {}
    frontier = list(starts[0].output)
    while frontier:
        for node in consumers.get(frontier.pop(), []):
            if id(node) not in region:
                region[id(node)] = node
                frontier.extend(node.output)
    return [node for node in graph.node if id(node) in region]


def _downstream_of_ceil(node: onnx.NodeProto, producers: dict[str, onnx.NodeProto]) -> bool:
    seen: set[str] = set()
    stack = list(node.input)
    while stack:
        name = stack.pop()
        producer = producers.get(name)
        if producer is None or name in seen:
            continue
        seen.add(name)
        if producer.op_type == "Ceil":
            return True
        stack.extend(producer.input)
    return False


def _element_types(model: onnx.ModelProto) -> dict[str, int]:
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    types = {
        info.name: info.type.tensor_type.elem_type
        for info in [*graph.value_info, *graph.input, *graph.output]
    }
    types.update({init.name: init.data_type for init in graph.initializer})
    for node in graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    types[node.output[0]] = attr.t.data_type
    return types


def _unique_node_names(graph: onnx.GraphProto) -> None:
    seen: set[str] = set()
    for index, node in enumerate(graph.node):
        if not node.name or node.name in seen:
            node.name = f"{node.name or node.op_type}/ttsfarm_{index}"
        seen.add(node.name)


def _to_half_attributes(node: onnx.NodeProto) -> None:
    for attr in node.attribute:
        if node.op_type == "Cast" and attr.name == "to" and attr.i == FLOAT:
            attr.i = HALF
        elif attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == FLOAT:
            half = numpy_helper.from_array(numpy_helper.to_array(attr.t).astype(np.float16), attr.t.name)
            attr.t.CopyFrom(half)


def convert_to_fp16(model: onnx.ModelProto, whole_graph: bool = False) -> onnx.ModelProto:
    """A copy of ``model`` whose flow and decoder compute in fp16; checked before it is returned.

    ``whole_graph`` converts every node: for the waveform stage cut out by ``synthesis.stages``,
    which holds only the flow and the decoder.
    """
    converted = copy_of(model)
    graph = converted.graph
    _unique_node_names(graph)
    types = _element_types(converted)
    region = list(graph.node) if whole_graph else _waveform_region(graph)
    in_region = {id(node) for node in region}
    produced_inside = {out for node in region for out in node.output}
    initializers = {init.name: init for init in graph.initializer}
    consumers = consumers_of(graph.node)
    casts: dict[str, str] = {}
    new_nodes: list[onnx.NodeProto] = []

    def half_of(name: str) -> str:
        """The fp16 version of a float tensor made outside the region."""
        if name in casts:
            return casts[name]
        init = initializers.get(name)
        if init is not None and all(id(user) in in_region for user in consumers[name]):
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), name))
            casts[name] = name
        else:
            casts[name] = f"{name}/fp16"
            new_nodes.append(helper.make_node("Cast", [name], [casts[name]], to=HALF, name=f"{name}/to_fp16"))
        return casts[name]

    for node in region:
        for index, name in enumerate(node.input):
            if name and name not in produced_inside and types.get(name) == FLOAT:
                node.input[index] = half_of(name)
        _to_half_attributes(node)
    outputs = {out.name for out in graph.output}
    for node in region:
        for index, name in enumerate(node.output):
            if name in outputs and types.get(name) == FLOAT:
                node.output[index] = f"{name}/fp16"
                _rename_inputs(region, name, f"{name}/fp16")
                cast = helper.make_node("Cast", [f"{name}/fp16"], [name], to=FLOAT, name=f"{name}/to_fp32")
                new_nodes.append(cast)
    _check_region_types(region, types, produced_inside)
    graph.node.extend(new_nodes)
    _topological_sort(graph)
    del graph.value_info[:]
    onnx.checker.check_model(converted, full_check=True)
    return converted


def _rename_inputs(nodes: Iterable[onnx.NodeProto], old: str, new: str) -> None:
    for node in nodes:
        for index, name in enumerate(node.input):
            if name == old:
                node.input[index] = new


def _check_region_types(region: list[onnx.NodeProto], types: dict[str, int], inside: set[str]) -> None:
    unknown = [out for node in region for out in node.output if out in inside and out not in types]
    if unknown:
        raise ValueError(f"fp16 conversion: no element type inferred for {unknown[:5]}")


def _topological_sort(graph: onnx.GraphProto) -> None:
    """Order the nodes so each comes after the producers of its inputs (Kahn, stable)."""
    nodes = list(graph.node)
    producer = {out: index for index, node in enumerate(nodes) for out in node.output}
    waiting = [0] * len(nodes)
    users: dict[int, list[int]] = {}
    for index, node in enumerate(nodes):
        for source in {producer[name] for name in node.input if name in producer}:
            waiting[index] += 1
            users.setdefault(source, []).append(index)
    ready = [index for index, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        index = heapq.heappop(ready)
        order.append(index)
        for user in users.get(index, []):
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, user)
    if len(order) != len(nodes):
        raise ValueError("fp16 conversion left a cycle in the graph")
    copies = [onnx.NodeProto() for _ in order]
    for copy, index in zip(copies, order, strict=True):
        copy.CopyFrom(nodes[index])
    del graph.node[:]
    graph.node.extend(copies)
