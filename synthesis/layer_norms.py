"""The voice's layer norms as single ``LayerNormalization`` nodes.

Piper's exporter spells every layer norm out in nine nodes (``ReduceMean``, ``Sub``, ``Pow`` 2,
``ReduceMean``, ``Add`` epsilon, ``Sqrt``, ``Div``, ``Mul`` gamma, ``Add`` beta), and
onnxruntime's own layer-norm fusion leaves joe's 36 of them as they are. On the GPU they cost
the front a kernel each: cuDNN's reductions alone were 10.9% of its kernel time on an H200 (run
19). :func:`with_fused_layer_norms` replaces each such chain, over the last axis with gamma and beta
as weights, by one ``LayerNormalization`` (ONNX opset 17; the model's opset is raised to it).

An experiment (``EngineOptions.fused_layer_norms``), off by default: on the H200 the front's GPU
time went from 9.96 to 8.58 ms per batch of 32 and the engine from 4,711 to 5,153 speech s/s, but
the fused kernel rounds differently and 9 of 79 corpus segments came out a different length from
the fp32 reference (run 20; on the CPU all 79 matched).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypeGuard

import onnx
from onnx import helper

from synthesis.graph import GraphView, copy_of, drop_unused_initializers, drop_unused_nodes, replace_nodes

LAYER_NORM_OPSET: Final = 17


@dataclass(frozen=True)
class _Chain:
    """One spelled-out layer norm: its input, weights, epsilon, output, and its nodes."""

    source: str
    gamma: str
    beta: str
    epsilon: float
    output: str
    nodes: tuple[onnx.NodeProto, ...]


def with_fused_layer_norms(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """A copy of ``model`` with each spelled-out layer norm fused; and how many were."""
    fused = copy_of(model)
    graph = fused.graph
    view = GraphView.of(graph)
    found = (_chain(node, view) for node in graph.node if node.op_type == "Pow")
    chains = [chain for chain in found if chain is not None]
    if not chains:
        return fused, 0
    replace_nodes(graph, [(chain.nodes[-1], [_layer_norm(chain)]) for chain in chains])
    drop_unused_nodes(graph)  # the chains' other nodes: only the chains read what they wrote
    drop_unused_initializers(graph)  # the epsilons and exponents
    for opset in fused.opset_import:
        if opset.domain in ("", "ai.onnx") and opset.version < LAYER_NORM_OPSET:
            opset.version = LAYER_NORM_OPSET
    return fused, len(chains)


def _layer_norm(chain: _Chain) -> onnx.NodeProto:
    return helper.make_node(
        "LayerNormalization",
        [chain.source, chain.gamma, chain.beta],
        [chain.output],
        name=f"{chain.nodes[-1].name}/fused_layer_norm",
        axis=-1,
        epsilon=chain.epsilon,
    )


def _chain(power: onnx.NodeProto, view: GraphView) -> _Chain | None:
    """The layer norm whose ``Pow`` is ``power``, if the nodes around it are one, else ``None``."""
    producers, consumers, initializers = view.producers, view.consumers, view.constants

    def only(name: str, op_type: str) -> onnx.NodeProto | None:
        readers = consumers.get(name, [])
        return readers[0] if len(readers) == 1 and readers[0].op_type == op_type else None

    def scalar(name: str) -> float | None:
        value = initializers.get(name)
        return float(value) if value is not None and value.size == 1 else None

    def last_axis_mean(node: onnx.NodeProto | None) -> TypeGuard[onnx.NodeProto]:
        if node is None or node.op_type != "ReduceMean" or len(node.input) != 1:
            return False
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        return list(attributes.get("axes", [])) == [-1] and attributes.get("keepdims", 1) == 1

    if len(power.input) != 2 or scalar(power.input[1]) != 2.0:
        return None
    difference = producers.get(power.input[0])
    if difference is None or difference.op_type != "Sub":
        return None
    source = difference.input[0]
    mean = producers.get(difference.input[1])
    if not last_axis_mean(mean) or mean.input[0] != source:
        return None
    if len(consumers.get(mean.output[0], [])) != 1:
        return None
    variance = only(power.output[0], "ReduceMean")
    if not last_axis_mean(variance):
        return None
    plus_epsilon = only(variance.output[0], "Add")
    if plus_epsilon is None or plus_epsilon.input[0] != variance.output[0]:
        return None
    epsilon = scalar(plus_epsilon.input[1])
    root = only(plus_epsilon.output[0], "Sqrt")
    if epsilon is None or root is None:
        return None
    quotient = only(root.output[0], "Div")
    readers = consumers.get(difference.output[0], [])
    if quotient is None or list(quotient.input) != [difference.output[0], root.output[0]]:
        return None
    if sorted(id(node) for node in readers) != sorted((id(power), id(quotient))):
        return None
    scaled = only(quotient.output[0], "Mul")
    if scaled is None or scaled.input[0] != quotient.output[0] or scaled.input[1] not in initializers:
        return None
    shifted = only(scaled.output[0], "Add")
    if shifted is None or shifted.input[0] != scaled.output[0] or shifted.input[1] not in initializers:
        return None
    gamma, beta = initializers[scaled.input[1]], initializers[shifted.input[1]]
    if gamma.ndim != 1 or beta.shape != gamma.shape:
        return None
    nodes = (mean, difference, power, variance, plus_epsilon, root, quotient, scaled, shifted)
    return _Chain(source, scaled.input[1], shifted.input[1], epsilon, shifted.output[0], nodes)
