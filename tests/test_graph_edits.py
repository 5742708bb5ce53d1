"""The shared graph edits of ``synthesis.graph``: nodes put in others' places, and what is left
unread removed afterwards."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from synthesis.graph import drop_unused_nodes, replace_nodes


def _chain_of_negations(length: int) -> onnx.ModelProto:
    nodes = [helper.make_node("Neg", [f"x{i}"], [f"x{i + 1}"], name=f"neg{i}") for i in range(length)]
    graph = helper.make_graph(
        nodes,
        "negations",
        [helper.make_tensor_value_info("x0", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info(f"x{length}", TensorProto.FLOAT, [3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_each_node_is_replaced_in_its_place_and_the_rest_keep_their_order() -> None:
    model = _chain_of_negations(6)
    graph = model.graph
    # every other node, as a scan of graph.node finds it: each becomes three
    tripled = [
        (
            node,
            [
                helper.make_node("Neg", [node.input[0]], [f"{node.name}/mid"], name=f"{node.name}/a"),
                helper.make_node("Neg", [f"{node.name}/mid"], [f"{node.name}/b"], name=f"{node.name}/b"),
                helper.make_node("Neg", [f"{node.name}/b"], [node.output[0]], name=f"{node.name}/c"),
            ],
        )
        for index, node in enumerate(graph.node)
        if index % 2 == 0
    ]
    replace_nodes(graph, tripled)
    onnx.checker.check_model(model, full_check=True)  # still in topological order
    names = [node.name for node in graph.node]
    assert names == [
        *("neg0/a", "neg0/b", "neg0/c", "neg1"),
        *("neg2/a", "neg2/b", "neg2/c", "neg3"),
        *("neg4/a", "neg4/b", "neg4/c", "neg5"),
    ]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.array([1.0, -2.0, 3.0], dtype=np.float32)
    np.testing.assert_array_equal(session.run(None, {"x0": x})[0], x)  # 12 negations now, not 6


def test_what_the_replaced_nodes_alone_read_is_dropped_after() -> None:
    model = _chain_of_negations(4)
    graph = model.graph
    first, second = graph.node[0], graph.node[1]
    replace_nodes(graph, [(second, [helper.make_node("Neg", ["x0"], ["x2"], name="skip")])])
    assert any(node.name == first.name for node in graph.node)  # still there, unread
    drop_unused_nodes(graph)
    assert [node.name for node in graph.node] == ["skip", "neg2", "neg3"]
