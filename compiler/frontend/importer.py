"""QONNX (and QCDQ) -> the untyped IR.

Cleans the model with qonnx's own transformations (:mod:`.clean`), then walks it once: every
node the graph output depends on goes to the handler registered for its op type and domain
(:mod:`.registry`, handlers in :mod:`.handlers`), after its attributes are checked against
what the flow models (:mod:`.attributes`).  Anything without a handler is refused with the op
type and node name.  Only errors about the model are one-line model errors; an exception of
any other kind is a bug of ours and reaches the caller as it is.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import numpy_helper

from ..errors import UnsupportedModelError
from ..ir.graph import Graph
from ..exact.rounding import Rounding
from ..ir.types import MAX_ELEMENTS
from ..ops import quant
from . import handlers  # noqa: F401 - fills the handler table
from .attributes import check_attributes
from .clean import clean
from .load import RECURRENT_OPS, input_datatype, normalize_domains, parse_input_type
from .real import affine_output
from .registry import handler_for
from .state import ImportState
from .values import Affine, Const, RawInput, Tensor


def _ancestors(g: onnx.GraphProto, value: str) -> set[str]:
    """Names of the nodes that ``value`` depends on."""
    producers = {o: n for n in g.node for o in n.output}
    live, todo = set(), [value]
    while todo:
        n = producers.get(todo.pop())
        if n is not None and n.name not in live:
            live.add(n.name)
            todo.extend(i for i in n.input if i)
    return live


def _input_shape(vi: onnx.ValueInfoProto) -> tuple[int, ...]:
    dims = [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
    if not dims or any(d is None or d <= 0 for d in dims[1:]):
        raise UnsupportedModelError(f"input '{vi.name}' needs a static shape, got {dims}")
    if math.prod(dims[1:]) > MAX_ELEMENTS:
        raise UnsupportedModelError(f"input '{vi.name}' has {math.prod(dims[1:]):,} elements per sample "
                                    f"(shape {dims[1:]}), more than the {MAX_ELEMENTS:,} a design can index")
    return tuple(int(d) for d in dims[1:])


def start(model: onnx.ModelProto, datatype: str | None, input_type: str | None) -> ImportState:
    """The state before the walk: constants, the raw input, the nodes the output depends on."""
    g = model.graph
    inits = {i.name for i in g.initializer}
    real_inputs = [i for i in g.input if i.name not in inits]
    producers = {o: n for n in g.node for o in n.output}
    first = producers.get(g.output[0].name) if g.output else None
    recurrent_out = first is not None and first.op_type in RECURRENT_OPS
    if len(real_inputs) != 1 or (len(g.output) != 1 and not recurrent_out):
        raise UnsupportedModelError(
            f"the model has {len(real_inputs)} inputs and {len(g.output)} outputs; one of each is supported")
    onnx_input = real_inputs[0]
    shape = _input_shape(onnx_input)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    graph = Graph(input="", output="", onnx_input=onnx_input.name, onnx_output=g.output[0].name)
    graph.input_type = input_type
    values = {i.name: Const(numpy_helper.to_array(i).astype(np.float64)) for i in g.initializer}
    values[onnx_input.name] = RawInput(shape)
    # a recurrent cell's graph may also output its last states (h, c): the compiled design
    # outputs the first graph output; nodes that only feed the others are skipped
    return ImportState(model=model, opset=opset, graph=graph, values=values, live=_ancestors(g, g.output[0].name),
                       onnx_input=onnx_input, input_shape=shape, input_datatype=datatype,
                       input_type=parse_input_type(input_type) if input_type else None,
                       dropped_outputs=[o.name for o in g.output[1:]])


def walk(state: ImportState) -> Graph:
    """Every live node through its handler; then the graph output."""
    for node in state.model.graph.node:
        if node.name not in state.live:
            continue
        check_attributes(node, state.opset)
        handler = handler_for(node)
        if handler is None:
            raise UnsupportedModelError(f"unsupported op '{node.op_type}' (node '{node.name}')")
        handler(state, node)
    output = state.model.graph.output[0].name
    if not state.graph.input:
        raw = next(name for name, v in state.values.items() if isinstance(v, RawInput))
        raise UnsupportedModelError(f"graph input '{raw}' is never quantized (no Quant node reads it)")
    out = state.values.get(output)
    if isinstance(out, Affine):
        out = Tensor(affine_output(state, out))
    if not isinstance(out, Tensor):
        raise UnsupportedModelError(f"graph output '{output}' is not computed from the input")
    state.graph.output = _own_port(state, output, out.name)
    return state.graph


def _own_port(state: ImportState, output: str, value: str) -> str:
    """The design's output port of ``value``: itself, or where it is the design's input (a
    model that is one quantizer: FINN's QuantHardTanh) a copy of it, so that the top function's
    input and output are two arrays."""
    if value != state.graph.input:
        return value
    node = next(n for n in state.model.graph.node if output in n.output)
    t = state.graph.values[value]
    return state.add(node, quant.OP, [value], quant.Attrs(t.ftype, False, Rounding.ROUND), keeps_scale=True,
                     part="copy").output


def import_model(model: onnx.ModelProto, input_type: str | None = None) -> Graph:
    """Cleaned QONNX/QCDQ model -> untyped-node IR (input typed; run passes to type the rest).
    ``input_type``: the declared type of a float input that no Quant reads."""
    model = normalize_domains(model)
    return walk(start(clean(model), input_datatype(model), input_type))


__all__ = ["import_model", "start", "walk"]
