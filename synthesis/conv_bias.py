"""Convolution biases as ``Add`` nodes of their own.

onnxruntime's CUDA provider adds a convolution's bias with cuDNN's generic tensor kernel
(``cudnnAddTensor``), one call per convolution. In the waveform stage (fp16, NHWC, 32 rows x 768
frames) those calls were a quarter of the GPU time: 62 of them, 8.5 ms per replay, against 5.2 ms
for the 68 residual additions of the same tensors, which read twice as much.
:func:`with_biases_apart` takes each bias out of its convolution: ``Conv(x, w, b)`` becomes ``b +
Conv(x, w)``, the bias shaped ``(channels, 1, ...)`` to broadcast
over the length, so onnxruntime's own elementwise kernel adds it. The sum is rounded once either
way, so the values are the same.

Every ``Conv`` and ``ConvTranspose`` of the staged engine on CUDA is split so
(docs/decisions/0021-conv-bias-adds.md). onnxruntime's ``ConvAddFusion`` folds ``Conv(x, w) + b``
back into the convolution when ``b`` is the ``Add``'s second input, so the bias comes first:
``b + Conv(x, w)``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

import onnx
from onnx import helper, numpy_helper

from synthesis.graph import copy_of, drop_unused_initializers, replace_nodes

CONVOLUTIONS: Final = frozenset({"Conv", "ConvTranspose"})


def with_biases_apart(
    model: onnx.ModelProto, op_types: Collection[str] = CONVOLUTIONS
) -> tuple[onnx.ModelProto, int]:
    """A copy of ``model`` with each biased node of ``op_types`` split in two; and how many were.
    A node whose bias or kernel is not a constant of the graph is left as it is."""
    split = copy_of(model)
    graph = split.graph
    initializers = {init.name: init for init in graph.initializer}
    splits: list[tuple[onnx.NodeProto, list[onnx.NodeProto]]] = []
    for node in graph.node:
        if node.op_type not in op_types or len(node.input) < 3 or node.input[2] not in initializers:
            continue  # no bias, or one computed in the graph (an empty name is no initializer)
        bias, kernel = node.input[2], initializers.get(node.input[1])
        if kernel is None:
            continue
        shaped = f"{bias}/per_channel"
        if shaped not in initializers:  # two convolutions may share one bias
            per_channel = numpy_helper.to_array(initializers[bias]).reshape(-1, *[1] * (len(kernel.dims) - 2))
            initializers[shaped] = numpy_helper.from_array(per_channel, shaped)
            graph.initializer.append(initializers[shaped])
        unbiased = f"{node.output[0]}/unbiased"
        convolution = onnx.NodeProto()
        convolution.CopyFrom(node)
        del convolution.input[2:]
        convolution.output[0] = unbiased
        bias_first = helper.make_node("Add", [shaped, unbiased], [node.output[0]], name=f"{node.name}/bias")
        splits.append((node, [convolution, bias_first]))  # the bias first: not refolded (see above)
    replace_nodes(graph, splits)
    drop_unused_initializers(graph)
    return split, len(splits)
