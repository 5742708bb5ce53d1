"""Each ``ConvTranspose``'s bias as an ``Add`` of its own, so that cuDNN can fuse the other biases.

onnxruntime's CUDA provider adds a convolution's bias in a kernel of its own: in the waveform
stage (fp16, NHWC) that kernel was 28% of the GPU time, 62 calls per replay (docs/benchmarks.md,
run 24). With the provider option ``fuse_conv_bias`` cuDNN's frontend folds the bias into the
convolution, but it cannot build a ``ConvTranspose`` with a bias (run 17: "Failed to initialize
CUDNN Frontend" at the decoder's first upsampling). :func:`with_transpose_biases_apart` moves
those biases out: ``ConvTranspose(x, w, b)`` becomes ``ConvTranspose(x, w) + b``, the bias shaped
to broadcast over the length. Used with ``EngineOptions.fused_conv_bias`` (an experiment).
"""

from __future__ import annotations

import onnx
from onnx import helper, numpy_helper

from synthesis.graph import copy_of, drop_unused_initializers


def with_transpose_biases_apart(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """A copy of ``model`` with each biased ``ConvTranspose`` split in two; and how many were."""
    split = copy_of(model)
    graph = split.graph
    initializers = {init.name: init for init in graph.initializer}
    nodes: list[onnx.NodeProto] = []
    count = 0
    for node in graph.node:
        bias = node.input[2] if node.op_type == "ConvTranspose" and len(node.input) > 2 else ""
        if not bias or bias not in initializers:
            nodes.append(node)
            continue
        values = numpy_helper.to_array(initializers[bias])
        kernel = numpy_helper.to_array(initializers[node.input[1]]) if node.input[1] in initializers else None
        spatial = kernel.ndim - 2 if kernel is not None else 1
        shaped = f"{bias}/per_channel"
        graph.initializer.append(numpy_helper.from_array(values.reshape(-1, *[1] * spatial), shaped))
        unbiased = f"{node.output[0]}/unbiased"
        transposed = onnx.NodeProto()
        transposed.CopyFrom(node)
        del transposed.input[2:]
        transposed.output[0] = unbiased
        nodes.append(transposed)
        nodes.append(helper.make_node("Add", [unbiased, shaped], [node.output[0]], name=f"{node.name}/bias"))
        count += 1
    del graph.node[:]
    graph.node.extend(nodes)
    drop_unused_initializers(graph)
    return split, count
