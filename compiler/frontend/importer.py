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
from ..ir.graph import Graph, OutputPort
from ..exact.rounding import Rounding
from ..ir.types import MAX_ELEMENTS
from ..ops import quant
from . import handlers  # noqa: F401 - fills the handler table
from .attributes import check_attributes
from .clean import clean
from .load import RECURRENT_OPS, input_datatypes, normalize_domains, parse_input_type
from .real import affine_output
from .registry import handler_for
from .state import ImportState
from .time_major import batch_major
from .values import Affine, Const, RawInput, Tensor


def _ancestors(g: onnx.GraphProto, values: list[str]) -> set[str]:
    """Names of the nodes that ``values`` depend on."""
    producers = {o: n for n in g.node for o in n.output}
    live, todo = set(), list(values)
    while todo:
        n = producers.get(todo.pop())
        if n is not None and n.name not in live:
            live.add(n.name)
            todo.extend(i for i in n.input if i)
    return live


def _design_outputs(g: onnx.GraphProto) -> list[str]:
    """The graph outputs the design computes: every one, except that a recurrent cell's graph
    may also output its last states (h, c) after its sequence, which the design leaves out."""
    producers = {o: n for n in g.node for o in n.output}
    first = producers.get(g.output[0].name) if g.output else None
    if first is not None and first.op_type in RECURRENT_OPS:
        return [g.output[0].name]
    return [o.name for o in g.output]


def _input_shape(vi: onnx.ValueInfoProto) -> tuple[int, ...]:
    dims = [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
    if not dims or any(d is None or d <= 0 for d in dims[1:]):
        raise UnsupportedModelError(f"input '{vi.name}' needs a static shape, got {dims}")
    if math.prod(dims[1:]) > MAX_ELEMENTS:
        raise UnsupportedModelError(f"input '{vi.name}' has {math.prod(dims[1:]):,} elements per sample "
                                    f"(shape {dims[1:]}), more than the {MAX_ELEMENTS:,} a design can index")
    return tuple(int(d) for d in dims[1:])


def start(model: onnx.ModelProto, datatypes: dict[str, str], input_type: str | None) -> ImportState:
    """The state before the walk: constants, the raw inputs, the nodes the outputs depend on."""
    g = model.graph
    inits = {i.name for i in g.initializer}
    real_inputs = [i for i in g.input if i.name not in inits]
    if not real_inputs or not g.output:
        raise UnsupportedModelError(f"the model has {len(real_inputs)} inputs and {len(g.output)} outputs; a design "
                                    "needs at least one of each")
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    graph = Graph()
    graph.input_type = input_type
    values = {i.name: Const(numpy_helper.to_array(i).astype(np.float64)) for i in g.initializer}
    for vi in real_inputs:
        shape = _input_shape(vi)
        values[vi.name] = RawInput(shape, source=vi.name, model_shape=shape)
    outputs = _design_outputs(g)
    return ImportState(model=model, opset=opset, graph=graph, values=values, live=_ancestors(g, outputs),
                       input_datatypes=datatypes, input_type=parse_input_type(input_type) if input_type else None,
                       dropped_outputs=[o.name for o in g.output if o.name not in outputs])


def walk(state: ImportState) -> Graph:
    """Every live node through its handler; then the design's ports, in the file's order."""
    for node in state.model.graph.node:
        if node.name not in state.live:
            continue
        check_attributes(node, state.opset)
        handler = handler_for(node)
        if handler is None:
            raise UnsupportedModelError(f"unsupported op '{node.op_type}' (node '{node.name}')")
        handler(state, node)
    order = [i.name for i in state.model.graph.input]
    ported = {p.onnx_name for p in state.graph.input_ports}
    unread = [name for name in order if isinstance(state.values.get(name), RawInput) and name not in ported]
    if unread:
        raise UnsupportedModelError(f"graph input '{unread[0]}' is never quantized (no Quant node reads it"
                                    f"{' on the way to an output' if state.graph.input_ports else ''})")
    state.graph.input_ports.sort(key=lambda p: order.index(p.onnx_name))
    for output in (o.name for o in state.model.graph.output if o.name not in state.dropped_outputs):
        out = state.values.get(output)
        produced = any(output in n.output for n in state.model.graph.node)
        if isinstance(out, Const) or (out is None and not produced):
            # e.g. a QuantTensor's scale, bit width and flags, exported beside its value (the
            # clean-up drops boolean initializers, so these may be gone)
            state.graph.constant_outputs.append(output)
            continue
        if isinstance(out, Affine):
            out = Tensor(affine_output(state, out, state.moved_after_quant.pop(output, None)))
        if not isinstance(out, Tensor):
            raise UnsupportedModelError(f"graph output '{output}' is not computed from the input")
        state.graph.output_ports.append(OutputPort(_own_port(state, output, out.name), output))
    if not state.graph.output_ports:
        raise UnsupportedModelError(f"no graph output is computed from the input (outputs "
                                    f"{', '.join(state.graph.constant_outputs)} are constants)")
    state.graph.in_flight = {v.value for v in state.values.values() if isinstance(v, Affine)} - set(state.graph.scales)
    return state.graph


def _own_port(state: ImportState, output: str, value: str) -> str:
    """The design's output port of ``value``: itself, or where it is a design input (a model
    that is one quantizer: FINN's QuantHardTanh) or already another output, a copy of it, so
    that every port of the top function is its own array."""
    if value not in state.graph.inputs and value not in state.graph.outputs:
        return value
    node = next(n for n in state.model.graph.node if output in n.output)
    t = state.graph.values[value]
    part = "copy" if value not in state.graph.outputs else f"copy_{output}"
    return state.add(node, quant.OP, [value], quant.Attrs(t.ftype, False, Rounding.ROUND), keeps_scale=True,
                     part=part).output


def import_model(model: onnx.ModelProto, input_type: str | None = None) -> Graph:
    """Cleaned QONNX/QCDQ model -> untyped-node IR (input typed; run passes to type the rest).
    ``input_type``: the declared type of a float input that no Quant reads.  The ports keep
    the file's input and output names (the clean-up renames them, in order)."""
    model = normalize_domains(model)
    cleaned = clean(batch_major(model))
    renamed = {b.name: a.name for b, a in zip(_real_inputs(model), _real_inputs(cleaned))}  # file -> cleaned
    datatypes = {renamed.get(k, k): v for k, v in input_datatypes(model).items()}
    graph = walk(start(cleaned, datatypes, input_type))
    inputs = {a.name: b.name for a, b in zip(_real_inputs(cleaned), _real_inputs(model))}
    outputs = {a.name: b.name for a, b in zip(cleaned.graph.output, model.graph.output)}
    for port in graph.input_ports:
        port.onnx_name = inputs.get(port.onnx_name, port.onnx_name)
    for port in graph.output_ports:
        port.onnx_name = outputs.get(port.onnx_name, port.onnx_name)
    graph.constant_outputs = [outputs.get(o, o) for o in graph.constant_outputs]
    return graph


def _real_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


__all__ = ["import_model", "start", "walk"]
