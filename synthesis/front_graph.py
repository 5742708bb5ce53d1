"""The front stage rewritten so that the GPU can capture it as a CUDA graph.

Two things in a Piper voice's front keep its shapes or its values from being replayed:

- **masked indexing**: the duration predictor's spline flows take the values inside the spline's
  interval with a boolean mask (``outputs[inside] = spline(inputs[inside])``), which ONNX exports
  as ``NonZero`` then ``GatherND`` / ``ScatterND``: shapes that depend on the data. Here every
  such ``GatherND`` takes all positions (the mask's index grid, a constant once the input shapes
  are fixed), its values outside the mask set to 0 (inside the interval, so the spline stays
  finite), and every such ``ScatterND`` becomes ``Where(mask, values, base)``. Positions outside
  the mask are computed and thrown away: the same values where the mask holds, and static shapes.
- **noise**: the duration predictor's one ``RandomNormalLike`` becomes an input, which the engine
  fills with fresh standard normal noise before each replay (a captured random op would replay
  the same numbers every time).

Both work on a front whose input shapes are fixed (``synthesis.stages.with_fixed_inputs``), one
rewrite per bucket; a front that does not fit raises :class:`UnsupportedGraph` saying why.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, NamedTuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from synthesis.graph import consumers_of, copy_of, drop_unused_nodes, replace_nodes
from synthesis.stages import NOISE_OP, UnsupportedGraph

FRONT_NOISE: Final = "stage/duration_noise"
"""The capturable front's noise input: standard normal, the shape ``RandomNormalLike`` had."""
RANDOM_OPS: Final = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial"}
)


@dataclass(frozen=True)
class CapturableFront:
    model: onnx.ModelProto
    noise_shape: tuple[int, ...]
    output_shapes: dict[str, tuple[int, ...]]
    """Every output's fixed shape, for the buffers a replay writes to."""


class Inferred(NamedTuple):
    """What ONNX's shape inference (with data propagation) says of each tensor, by name."""

    shapes: dict[str, tuple[int, ...] | None]
    """The fixed shape; ``None`` where a dimension is unknown."""
    ranks: dict[str, int]
    types: dict[str, int]


def inferred(model: onnx.ModelProto) -> Inferred:
    """Run the inference (a tenth of a second or more on a front: worth doing once)."""
    graph = onnx.shape_inference.infer_shapes(model, data_prop=True).graph
    found = Inferred({}, {}, {})
    for value in [*graph.input, *graph.value_info, *graph.output]:
        tensor = value.type.tensor_type
        found.types[value.name] = tensor.elem_type
        if not tensor.HasField("shape"):
            found.shapes[value.name] = None
            continue
        dims = tuple(dim.dim_value if dim.HasField("dim_value") else -1 for dim in tensor.shape.dim)
        found.shapes[value.name] = None if -1 in dims else dims
        found.ranks[value.name] = len(dims)
    return found


def capturable_front(front: onnx.ModelProto) -> CapturableFront:
    """``front`` (input shapes fixed) with its noise an input, its masked indexing dense and its
    shapes constants. The first two keep every tensor of ``front`` as it was, so one inference
    serves both; the folding needs its own, of the dense graph."""
    known = inferred(front)
    outputs = {value.name: known.shapes.get(value.name) for value in front.graph.output}
    fixed = {name: shape for name, shape in outputs.items() if shape is not None}
    if len(fixed) < len(outputs):
        raise UnsupportedGraph(f"the front's outputs {sorted(set(outputs) - set(fixed))} have no fixed shape")
    noisy, noise_shape = with_noise_input(front, known)
    return CapturableFront(with_shapes_folded(with_dense_masks(noisy, known)), noise_shape, fixed)


def with_shapes_folded(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` with each ``Shape`` of a tensor whose shape is fixed made a constant.

    ONNX Runtime folds a ``Shape`` only where its own shape inference knows the shape, which
    stops at the first ``Reshape`` to a computed shape; what it leaves is shape arithmetic on
    the CPU, which keeps the graph from being captured. ONNX's inference with data propagation
    follows many computed shapes through; with those constants, ONNX Runtime's own folding at
    load takes the rest (joe: no ``Shape`` left, where 47 were before).
    """
    folded = copy_of(model)
    graph = folded.graph
    shapes = inferred(folded).shapes
    constants: list[tuple[onnx.NodeProto, list[onnx.NodeProto]]] = []
    for node in [node for node in graph.node if node.op_type == "Shape" and shapes.get(node.input[0])]:
        shape = shapes[node.input[0]] or ()
        start, end = _attribute(node, "start"), _attribute(node, "end")
        window = slice(start if isinstance(start, int) else None, end if isinstance(end, int) else None)
        value = numpy_helper.from_array(np.array(shape[window], dtype=np.int64))
        constants.append((node, [helper.make_node("Constant", [], [node.output[0]], value=value)]))
    replace_nodes(graph, constants)
    drop_unused_nodes(graph)
    return folded


def with_noise_input(
    front: onnx.ModelProto, known: Inferred | None = None
) -> tuple[onnx.ModelProto, tuple[int, ...]]:
    """A copy of ``front`` whose one random op is replaced by the input :data:`FRONT_NOISE`,
    and the noise's shape (``known``: :func:`inferred` of ``front``, if the caller has it)."""
    model = copy_of(front)
    graph = model.graph
    random = [node for node in graph.node if node.op_type in RANDOM_OPS]
    if len(random) != 1 or random[0].op_type != NOISE_OP:
        raise UnsupportedGraph(f"expected one {NOISE_OP} in the front, found {[n.op_type for n in random]}")
    noise = random[0]
    attributes = {a.name: helper.get_attribute_value(a) for a in noise.attribute}
    if attributes.get("mean", 0.0) != 0.0 or attributes.get("scale", 1.0) != 1.0:
        raise UnsupportedGraph(f"the front's {NOISE_OP} is not standard normal: {attributes}")
    known = known or inferred(front)
    shape = known.shapes.get(noise.output[0])
    if shape is None:
        raise UnsupportedGraph("the front's noise has no fixed shape")
    index = list(graph.node).index(noise)
    graph.node.remove(noise)
    graph.node.insert(index, helper.make_node("Identity", [FRONT_NOISE], [noise.output[0]]))
    elem_type = attributes.get("dtype", known.types.get(noise.input[0], TensorProto.FLOAT))
    graph.input.append(helper.make_tensor_value_info(FRONT_NOISE, elem_type, list(shape)))
    return model, shape


def with_dense_masks(front: onnx.ModelProto, known: Inferred | None = None) -> onnx.ModelProto:
    """A copy of ``front`` without ``NonZero``: masked gathers and scatters made dense
    (``known``: :func:`inferred` of ``front``, or of a graph with the same tensors)."""
    model = copy_of(front)
    graph = model.graph
    shapes, ranks, types = known or inferred(front)
    consumers = consumers_of(graph.node)
    producers = {out: node for node in graph.node for out in node.output}
    names = _NameMaker(graph)
    gather_masks: set[str] = set()
    scatters: list[tuple[onnx.NodeProto, str, str]] = []
    for nonzero in [node for node in graph.node if node.op_type == "NonZero"]:
        mask = nonzero.input[0]
        shape = shapes.get(mask)
        if shape is None:
            raise UnsupportedGraph(f"{nonzero.name}: its mask has no fixed shape")
        grid = _index_grid(graph, names, shape)
        bool_mask = _as_bool(graph, names, mask, types, before=nonzero)
        for transpose in consumers.get(nonzero.output[0], []):
            if transpose.op_type != "Transpose" or _attribute(transpose, "perm") != [1, 0]:
                raise UnsupportedGraph(f"{nonzero.name}: its indices are used by {transpose.op_type}")
            for user in consumers.get(transpose.output[0], []):
                if user.op_type == "GatherND" and not _attribute(user, "batch_dims"):
                    gather_masks.add(mask)
                    data = user.input[0]
                    if data not in ranks:
                        raise UnsupportedGraph(f"{user.name}: the rank of {data} is not known")
                    if ranks[data] == len(shape):  # the values the mask picks from, not parameters
                        user.input[0] = _where_zero(graph, names, bool_mask, data, types, before=user)
                    user.input[1] = grid
                elif user.op_type == "ScatterND" and _attribute(user, "reduction") in (None, "none"):
                    if ranks.get(user.input[0]) != len(shape):
                        raise UnsupportedGraph(f"{user.name}: scatters slices, not single values")
                    scatters.append((user, mask, bool_mask))
                    user.input[1] = grid
                elif user.op_type == "Shape":
                    user.input[0] = grid
                else:
                    raise UnsupportedGraph(f"{nonzero.name}: its indices are used by {user.op_type}")
    dense: list[tuple[onnx.NodeProto, list[onnx.NodeProto]]] = []
    for scatter, mask, bool_mask in scatters:  # dense values pair up with the scatter's positions
        if _strip_expand(mask, producers) not in gather_masks:  # only if both use one mask
            raise UnsupportedGraph(f"{scatter.name}: scatters by a mask that no gather used")
        dense.append((scatter, _dense_scatter(names, scatter, bool_mask)))
    replace_nodes(graph, dense)
    drop_unused_nodes(graph)
    return model


def _strip_expand(name: str, producers: Mapping[str, onnx.NodeProto]) -> str:
    node = producers.get(name)
    while node is not None and node.op_type in ("Expand", "Identity"):
        name = node.input[0]
        node = producers.get(name)
    return name


def _dense_scatter(names: _NameMaker, scatter: onnx.NodeProto, mask: str) -> list[onnx.NodeProto]:
    """The nodes that take ``scatter``'s place: its updates laid over its base where ``mask`` is."""
    base, _, updates = scatter.input
    shape, dense = names.new("shape"), names.new("values")
    return [
        helper.make_node("Shape", [base], [shape], name=names.new("node")),
        helper.make_node("Reshape", [updates, shape], [dense], name=names.new("node")),
        helper.make_node("Where", [mask, dense, base], [scatter.output[0]], name=names.new("node")),
    ]


def _index_grid(graph: onnx.GraphProto, names: _NameMaker, shape: tuple[int, ...]) -> str:
    """An initializer holding every index of ``shape`` in row-major order, as ``NonZero`` then
    ``Transpose`` would list them for a mask that is true everywhere."""
    name = f"dense/grid/{'x'.join(map(str, shape))}"
    if name not in names.taken:
        grid = np.indices(shape, dtype=np.int64).reshape(len(shape), -1).T.copy()
        graph.initializer.append(numpy_helper.from_array(grid, name))
        names.taken.add(name)
    return name


def _as_bool(
    graph: onnx.GraphProto, names: _NameMaker, mask: str, types: Mapping[str, int], before: onnx.NodeProto
) -> str:
    if types.get(mask) == TensorProto.BOOL:
        return mask
    cast = names.new("bool_mask")
    _insert_before(graph, before, helper.make_node("Cast", [mask], [cast], to=TensorProto.BOOL, name=cast))
    return cast


def _where_zero(
    graph: onnx.GraphProto,
    names: _NameMaker,
    mask: str,
    data: str,
    types: Mapping[str, int],
    before: onnx.NodeProto,
) -> str:
    elem_type = types.get(data, TensorProto.FLOAT)
    zero = names.new("zero")
    graph.initializer.append(helper.make_tensor(zero, elem_type, [], [0]))
    picked = names.new("picked")
    _insert_before(graph, before, helper.make_node("Where", [mask, data, zero], [picked], name=picked))
    return picked


def _insert_before(graph: onnx.GraphProto, before: onnx.NodeProto, node: onnx.NodeProto) -> None:
    graph.node.insert(list(graph.node).index(before), node)


class _NameMaker:
    def __init__(self, graph: onnx.GraphProto) -> None:
        self.taken = {out for node in graph.node for out in node.output}
        self.taken |= {init.name for init in graph.initializer} | {value.name for value in graph.input}
        self._count = itertools.count()

    def new(self, label: str) -> str:
        while (name := f"dense/{label}_{next(self._count)}") in self.taken:
            pass
        self.taken.add(name)
        return name


def _attribute(node: onnx.NodeProto, name: str) -> object:
    for attribute in node.attribute:
        if attribute.name == name:
            value = helper.get_attribute_value(attribute)
            return value.decode() if isinstance(value, bytes) else list(value) if name == "perm" else value
    return None
