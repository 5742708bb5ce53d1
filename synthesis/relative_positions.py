"""The text encoder's relative-position bookkeeping as one ``Gather`` each way, bit for bit.

VITS's text encoder adds relative-position terms to its attention. It turns relative logits
``(rows, heads, ids, 2 ids - 1)`` into absolute ones ``(rows, heads, ids, ids)``, and the
attention weights back, by padding, reshaping, padding, reshaping and slicing: Piper's exporter
writes each as ``Pad → Reshape → Pad → Reshape → Slice``. Each step copies a tensor of rows x
heads x ids x 2 ids floats (52 MB at 32 rows of 317 ids), and onnxruntime's ``Pad`` was the
front's largest kernel on an H200: 17.6% of its GPU time (docs/decisions/0017-gathered-relative-positions.md).

Both are fixed permutations of positions, with zeros where the padding shows through:

- relative to absolute: ``absolute[i, j] = relative[i, ids - 1 + j - i]``;
- absolute to relative: ``relative[i, k] = absolute[i, k + i - (ids - 1)]`` where that column
  exists, else 0 (read from one zero column padded on).

:func:`with_gathered_relative_positions` replaces each chain by one ``Gather`` over the flattened
last two axes, with the index computed from ``ids`` inside the graph (a constant once a
bucket's shapes are fixed). The matcher goes by the chain's shape (its ops, and the ``Slice``
that ends it); before anything is replaced each chain found is run alone on the CPU at two
lengths against the definition above (:func:`expected_positions`), and a graph whose chains do
not all match it is left as it is. Only values move, so every output is the same to the bit: on
the CPU for the whole voice (``tests/test_relative_positions.py``), and on an H200 the same
lengths and log-mel distances to the last digit (docs/decisions/0017-gathered-relative-positions.md).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from synthesis.graph import GraphView, copy_of, drop_unused_initializers, drop_unused_nodes, replace_nodes

log = logging.getLogger(__name__)

LONG_END: Final = 2**62
"""A ``Slice`` end at least this large runs to the end of its axis."""
CHECK_IDS: Final = (3, 5)
"""Lengths each chain is run at before it is replaced (two: a chain right at one length by
chance is caught at the other)."""


@dataclass(frozen=True)
class _Chain:
    """One ``Pad → Reshape → Pad → Reshape → Slice`` chain, and which way it turns."""

    source: str
    output: str
    to_absolute: bool
    nodes: tuple[onnx.NodeProto, ...]


def with_gathered_relative_positions(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """A copy of ``model`` with each relative-position chain as one ``Gather``; and how many were."""
    gathered = copy_of(model)
    graph = gathered.graph
    view = GraphView.of(graph)
    found = [chain for node in graph.node if node.op_type == "Slice" and (chain := _chain(node, view))]
    chains = _checked(gathered, view, found)
    if not chains:
        if found:
            log.info(
                "%d relative-position chains left as exported: run alone, they differ from VITS's", len(found)
            )
        return gathered, 0
    graph.initializer.extend(
        [numpy_helper.from_array(np.array(value, dtype=np.int64), name) for name, value in _CONSTANTS.items()]
    )
    replace_nodes(graph, [(chain.nodes[-1], _gather(chain)) for chain in chains])
    drop_unused_nodes(graph)
    drop_unused_initializers(graph)
    return gathered, len(chains)


def _checked(model: onnx.ModelProto, view: GraphView, chains: list[_Chain]) -> list[_Chain]:
    """The chains that compute what their direction says: each run alone on the CPU, with its
    shape arithmetic, at :data:`CHECK_IDS` ids, against :func:`expected_positions`. None if any
    chain reads more than its source (then they cannot be run alone) or comes out different."""
    if not chains:
        return []
    graph = model.graph
    sources = {chain.source for chain in chains}
    if len(sources) < len(chains):
        return []
    nodes = _nodes_between(view, sources, [chain.output for chain in chains])
    if nodes is None:
        return []
    order = {id(node): index for index, node in enumerate(graph.node)}
    used = {name for node in nodes for name in node.input}
    part = helper.make_graph(
        sorted(nodes, key=lambda node: order[id(node)]),
        "relative_positions_check",
        [helper.make_tensor_value_info(source, TensorProto.FLOAT, None) for source in sorted(sources)],
        [helper.make_tensor_value_info(chain.output, TensorProto.FLOAT, None) for chain in chains],
        [init for init in graph.initializer if init.name in used],
    )
    alone = helper.make_model(part, opset_imports=model.opset_import, ir_version=model.ir_version)
    try:
        session = ort.InferenceSession(alone.SerializeToString(), providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        for ids in CHECK_IDS:
            widths = {chain.source: 2 * ids - 1 if chain.to_absolute else ids for chain in chains}
            feeds = {
                source: rng.standard_normal((1, 2, ids, width), np.float32)
                for source, width in widths.items()
            }
            outputs = session.run([chain.output for chain in chains], feeds)
            for chain, output in zip(chains, outputs, strict=True):
                if not np.array_equal(output, expected_positions(feeds[chain.source], chain.to_absolute)):
                    return []
    except Exception:  # onnxruntime raises its own untyped errors: not a chain it can run alone
        return []
    return chains


def expected_positions(values: np.ndarray, to_absolute: bool) -> np.ndarray:
    """What VITS's conversion computes, by definition: ``values`` of ``(..., ids, 2 ids - 1)``
    relative logits made absolute, or ``(..., ids, ids)`` weights made relative."""
    ids = values.shape[-2]
    rows = np.arange(ids)[:, None]
    if to_absolute:  # absolute[i, j] = relative[i, ids - 1 + j - i]
        taken = ids - 1 + np.arange(ids)[None, :] - rows
        inside = np.ones(taken.shape, dtype=bool)
    else:  # relative[i, k] = absolute[i, k + i - (ids - 1)] where that column exists, else 0
        taken = rows + np.arange(2 * ids - 1)[None, :] - (ids - 1)
        inside = (taken >= 0) & (taken < ids)
    index = np.broadcast_to(np.where(inside, taken, 0), (*values.shape[:-1], taken.shape[1]))
    return np.where(inside, np.take_along_axis(values, index, -1), np.float32(0))


def _nodes_between(view: GraphView, sources: set[str], outputs: list[str]) -> list[onnx.NodeProto] | None:
    """The nodes that compute ``outputs`` from ``sources`` and constants; ``None`` if they read
    anything else (a graph input or another computed tensor)."""
    nodes: dict[int, onnx.NodeProto] = {}
    pending = list(outputs)
    while pending:
        name = pending.pop()
        if not name or name in sources or name in view.constants:
            continue
        node = view.producers.get(name)
        if node is None:
            return None
        if id(node) not in nodes:
            nodes[id(node)] = node
            pending.extend(node.input)
    return list(nodes.values())


def _chain(last: onnx.NodeProto, view: GraphView) -> _Chain | None:
    """The chain that ends in the ``Slice`` ``last``, if it is one of the two, else ``None``."""
    nodes = [last]
    for op_type in ("Reshape", "Pad", "Reshape", "Pad"):
        node = view.producers.get(nodes[0].input[0])
        if node is None or node.op_type != op_type or len(view.consumers.get(node.output[0], [])) != 1:
            return None
        nodes.insert(0, node)
    if not all(_zero_padding(pad) for pad in (nodes[0], nodes[2])):
        return None
    to_absolute = _slices_last_two_axes(last, view.constants)
    if not to_absolute and not _drops_first_column(last, view.constants):
        return None
    return _Chain(nodes[0].input[0], last.output[0], to_absolute, tuple(nodes))


def _zero_padding(pad: onnx.NodeProto) -> bool:
    """A ``Pad`` with zeros (constant mode, no fill value) and no axes input."""
    modes = [helper.get_attribute_value(a) for a in pad.attribute if a.name == "mode"]
    constant_mode = not modes or modes[0] in (b"constant", "constant")
    return constant_mode and all(not name for name in pad.input[2:])


def _slice_inputs(
    node: onnx.NodeProto, constants: Mapping[str, np.ndarray]
) -> tuple[list[int], list[int]] | None:
    """A ``Slice``'s constant axes and steps (steps of 1 when absent), or ``None``."""
    if len(node.input) < 4 or node.input[3] not in constants:
        return None
    axes = [int(axis) for axis in constants[node.input[3]].reshape(-1)]
    if len(node.input) > 4 and node.input[4]:
        if node.input[4] not in constants:
            return None
        steps = [int(step) for step in constants[node.input[4]].reshape(-1)]
    else:
        steps = [1] * len(axes)
    return axes, steps


def _slices_last_two_axes(node: onnx.NodeProto, constants: Mapping[str, np.ndarray]) -> bool:
    """A ``Slice`` over the last two axes, as relative to absolute's ``[:, :, :ids, ids - 1:]``
    (its starts and ends, computed from ``ids``, are left to :func:`_checked`)."""
    found = _slice_inputs(node, constants)
    return found is not None and found[0] in ([2, 3], [-2, -1]) and found[1] == [1, 1]


def _drops_first_column(node: onnx.NodeProto, constants: Mapping[str, np.ndarray]) -> bool:
    """``[:, :, :, 1:]`` of absolute to relative."""
    found = _slice_inputs(node, constants)
    if found is None or found[0] not in ([3], [-1]) or found[1] != [1]:
        return False
    starts, ends = constants.get(node.input[1]), constants.get(node.input[2])
    return (
        starts is not None
        and ends is not None
        and starts.reshape(-1).tolist() == [1]
        and int(ends.reshape(-1)[0]) >= LONG_END
    )


_CONSTANTS: Final = {
    "relative_positions/zero": 0,
    "relative_positions/one": 1,
    "relative_positions/ids_axis": 2,
    "relative_positions/flat": [0, 0, -1],
    "relative_positions/first": [0],
    "relative_positions/second": [1],
    "relative_positions/one_column": [0, 0, 0, 0, 0, 0, 0, 1],
}
"""The int64 constants the gathers read, as initializers by name."""
_ZERO, _ONE, _IDS_AXIS, _FLAT, _FIRST, _SECOND, _ONE_COLUMN = _CONSTANTS


def _gather(chain: _Chain) -> list[onnx.NodeProto]:
    """The nodes that compute ``chain.output`` from ``chain.source`` with one ``Gather``."""
    prefix = f"{chain.nodes[-1].name or chain.output}/gathered"
    nodes: list[onnx.NodeProto] = []

    def add(op_type: str, inputs: Sequence[str], label: str, **attributes: Any) -> str:
        output = f"{prefix}/{label}"
        nodes.append(helper.make_node(op_type, list(inputs), [output], name=output, **attributes))
        return output

    shape = add("Shape", [chain.source], "shape")
    ids = add("Gather", [shape, _IDS_AXIS], "ids", axis=0)
    before_last = add("Sub", [ids, _ONE], "ids_minus_one")
    rows = add("Range", [_ZERO, ids, _ONE], "rows")
    row = add("Unsqueeze", [rows, _SECOND], "row")
    if chain.to_absolute:
        source = chain.source
        step = add("Add", [before_last, before_last], "step")  # row i starts at i (2 ids - 1) - i
        column = add("Unsqueeze", [rows, _FIRST], "column")
        start = add("Add", [add("Mul", [row, step], "row_start"), before_last], "start")
        index = add("Add", [start, column], "index")
    else:
        source = add("Pad", [chain.source, _ONE_COLUMN], "zero_column", mode="constant")
        relative = add("Add", [ids, before_last], "relative")
        column = add("Unsqueeze", [add("Range", [_ZERO, relative, _ONE], "offsets"), _FIRST], "column")
        taken = add("Sub", [add("Add", [row, column], "shifted"), before_last], "taken")
        inside = add(
            "And",
            [add("GreaterOrEqual", [taken, _ZERO], "from_first"), add("Less", [taken, ids], "before_end")],
            "inside",
        )
        padded_width = add("Add", [ids, _ONE], "padded_width")
        read = add("Where", [inside, taken, ids], "read")  # column ids is the zero column
        index = add("Add", [add("Mul", [row, padded_width], "row_start"), read], "index")
    flat = add("Reshape", [source, _FLAT], "flat")
    nodes.append(helper.make_node("Gather", [flat, index], [chain.output], name=f"{prefix}/gather", axis=2))
    return nodes
