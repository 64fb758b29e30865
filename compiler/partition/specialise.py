"""Graphs the hardware runs for a partitioned model: the segment specialised to one block,
one layer specialised to one block (halo exchange), and the gathered tail.

A block graph computes a value's codes on one block from the input region it reads.  Its
ops are the model's ops on local shapes: a window op (conv, pools) keeps its zero padding
only where its input region leaves the volume (at the global boundary) and reads real
neighbour voxels elsewhere, so it is exactly the model's op on that block; a transposed
convolution or upsampling computes its local output and a ``crop`` keeps the block's part;
where a value is larger than one consumer reads (a skip connection), a ``crop`` cuts it.
Blocks with equal block graphs share one kernel.  The types are the model's (re-inferred
and checked equal), so block graphs go through the normal lowering and verification.
"""

from __future__ import annotations


import numpy as np

from ..errors import UnsupportedModelError
from ..ir.graph import Graph, Node
from ..ir.types import TensorType
from ..ops import OPS, Trait, crop, quant
from ..passes import run_passes
from ..reference.interpret import run_ir
from .execute import refuse_untileable, type_bytes
from .regions import Span, clip, input_span, required_spans


def _size(span: Span) -> tuple[int, ...]:
    return tuple(b - a for a, b in span)


def _local(t: TensorType, span: Span) -> TensorType:
    return TensorType((t.shape[0], *_size(span)), t.ftype, t.lo, t.hi)


def _window_attrs(node: Node, need: Span, have: Span):
    """The op's attributes on a local input ``have`` (= ``need`` clipped to the volume):
    padding only where ``need`` leaves the volume."""
    if need != have:  # the window's padding moves to where the block sits
        refuse_untileable(node)
    begins = tuple(h[0] - n[0] for n, h in zip(need, have))
    ends = tuple(n[1] - h[1] for n, h in zip(need, have))
    return OPS[node.op].with_pads(node.attrs, begins + ends)


class _Builder:
    def __init__(self, graph: Graph, name: str, input_value: str, input_span: Span):
        self.src = graph
        self.g = Graph(input=input_value, output="", values={input_value: _local(graph.values[input_value], input_span)},
                       onnx_input=graph.onnx_input, onnx_output=graph.onnx_output)
        self.g.input_quant = graph.input_quant if input_value == graph.input else \
            quant.Attrs(graph.values[input_value].ftype, False, "ROUND")
        self.spans: dict[str, Span] = {input_value: input_span}
        self.name = name

    def crop_to(self, value: str, want: Span, consumer: str) -> str:
        have = self.spans[value]
        if have == want:
            return value
        if any(w[0] < h[0] or w[1] > h[1] for w, h in zip(want, have)):
            raise AssertionError(f"{self.name}: '{consumer}' reads {want} of '{value}' but the block holds {have}")
        out = f"{value}__crop_{consumer}"
        if out not in self.spans:
            attrs = crop.Attrs(tuple(w[0] - h[0] for w, h in zip(want, have)), _size(want))
            self.add(Node(f"{consumer}__crop", crop.OP.name, [value], out, attrs), want)
        return out

    def add(self, node: Node, span: Span) -> None:
        self.g.nodes.append(node)
        self.spans[node.output] = span
        src = self.src.values[node.output] if node.output in self.src.values else self.g.values[node.inputs[0]]
        self.g.values[node.output] = _local(src, span)

    def node(self, node: Node, out_span: Span) -> None:
        extent = lambda v: self.src.values[v].shape[1:]  # noqa: E731
        op = OPS[node.op]
        if Trait.WINDOW in op.traits:
            need = input_span(node, out_span)
            have = clip(need, extent(node.inputs[0]))
            x = self.crop_to(node.inputs[0], have, node.name)
            self.add(Node(node.name, node.op, [x], node.output, _window_attrs(node, need, have)), out_span)
        elif Trait.SCATTER in op.traits:
            have = clip(input_span(node, out_span), extent(node.inputs[0]))
            x = self.crop_to(node.inputs[0], have, node.name)
            origin = op.scatter_origin(node.attrs, have)
            local, attrs = f"{node.output}__local", op.with_pads(node.attrs, (0,) * (2 * len(out_span)))
            self.g.nodes.append(Node(node.name, node.op, [x], local, attrs))
            shape = op.infer(attrs, [self.g.values[x]], node.name).shape
            lspan = tuple((o, o + n) for o, n in zip(origin, shape[1:]))
            self.spans[local] = lspan
            self.g.values[local] = _local(self.src.values[node.output], lspan)
            self.g.nodes.append(Node(f"{node.name}__crop", crop.OP.name, [local], node.output,
                                     crop.Attrs(tuple(a - o for (a, _), o in zip(out_span, origin)), _size(out_span))))
            self.spans[node.output] = out_span
            self.g.values[node.output] = _local(self.src.values[node.output], out_span)
        elif op.spatial:
            xs = [self.crop_to(v, out_span, node.name) for v in node.inputs]
            self.add(Node(node.name, node.op, xs, node.output, node.attrs), out_span)
        else:
            raise UnsupportedModelError(f"node '{node.name}' ({node.op}) mixes spatial positions and cannot be partitioned")

    def finish(self, output: str) -> Graph:
        self.g.output = output
        want = {v: t for v, t in self.g.values.items()}
        g = run_passes(self.g)
        for v, t in want.items():
            got = g.values[v]
            if (got.shape, got.ftype) != (t.shape, t.ftype):
                raise AssertionError(f"{self.name}: value '{v}' re-infers as {got.shape} {got.ftype}, "
                                     f"the model has {t.shape} {t.ftype}")
        return g


def block_graph(graph: Graph, value: str, block: Span, name: str = "block") -> tuple[Graph, Span]:
    """The graph computing ``value`` on ``block`` from the graph input's region it reads;
    returns it and that region (the span of the graph input to feed)."""
    spans = required_spans(graph, value, block)
    if graph.input not in spans:
        raise UnsupportedModelError(f"value '{value}' does not depend on the graph input")
    b = _Builder(graph, name, graph.input, spans[graph.input])
    for node in graph.nodes:
        if node.output in spans:
            b.node(node, spans[node.output])
        if node.output == value:
            break
    return b.finish(value), spans[graph.input]


def layer_graph(graph: Graph, node: Node, out_span: Span, name: str = "layer") -> tuple[Graph, Span]:
    """One single-input layer specialised to the output block ``out_span`` (halo exchange:
    the block's own part plus the neighbours' halo is its input); returns the graph and its
    input span."""
    if len(node.inputs) != 1:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op}) has {len(node.inputs)} inputs: not a layer kernel")
    tile = clip(input_span(node, out_span), graph.values[node.inputs[0]].shape[1:])
    b = _Builder(graph, name, node.inputs[0], tile)
    b.node(node, out_span)
    return b.finish(node.output), tile


def _tail_nodes(graph: Graph, cut: str) -> list[Node]:
    return list(graph.nodes) if cut == graph.input else graph.nodes[[n.output for n in graph.nodes].index(cut) + 1:]


def tail_graph(graph: Graph, cut: str) -> Graph | None:
    """The nodes after ``cut`` (which they read whole) as a graph whose input is ``cut``;
    None when ``cut`` is the graph output.  Its values keep the model's types."""
    if cut == graph.output:
        return None
    g = Graph(input=cut, output=graph.output, values={cut: graph.values[cut]},
              onnx_input=graph.onnx_input, onnx_output=graph.onnx_output)
    g.input_quant = quant.Attrs(graph.values[cut].ftype, False, "ROUND")
    for node in _tail_nodes(graph, cut):
        g.nodes.append(node)
        g.values[node.output] = graph.values[node.output]
    return g


def is_cut(graph: Graph, value: str) -> bool:
    """Whether every node after ``value``'s producer reads only ``value`` or later values."""
    outs = [n.output for n in graph.nodes]
    pos = outs.index(value) if value != graph.input else -1
    later = {value, *outs[pos + 1:]}
    return all(v in later for n in graph.nodes[pos + 1:] for v in n.inputs)


def cut_candidates(graph: Graph, grid: tuple[int, ...]) -> list[str]:
    """Values of the spatial prefix (before the first op that mixes positions) where the
    segment can end for ``grid``: every value up to it has at least one voxel per block
    along every dim, and nothing after it reads an earlier value; in graph order."""
    out = []
    for node in graph.nodes:
        if not OPS[node.op].spatial:
            break
        t = graph.values[node.output]
        if len(t.shape) - 1 != len(grid):
            raise UnsupportedModelError(f"grid {'x'.join(map(str, grid))} does not fit the {len(t.shape) - 1}D value "
                                        f"'{node.output}' of layer '{node.name}'")
        if any(g > n for g, n in zip(grid, t.shape[1:])):
            if not out:
                raise UnsupportedModelError(
                    f"grid {'x'.join(map(str, grid))} has more blocks than layer '{node.name}' ({node.op}) has voxels "
                    f"({'x'.join(map(str, t.shape[1:]))}) before any value could be split")
            break
        if is_cut(graph, node.output):
            out.append(node.output)
    if not out:
        raise UnsupportedModelError(f"the model has no spatial layer to partition (first op: "
                                    f"'{graph.nodes[0].name}' ({graph.nodes[0].op}))")
    return out


def cut_for_grid(graph: Graph, grid: tuple[int, ...]) -> str:
    """The deepest cut for ``grid`` (like paper 1: the volume stays split while it is
    large; the rest is the gathered tail)."""
    return cut_candidates(graph, grid)[-1]


def tail_bytes(graph: Graph, cut: str) -> int:
    """On-chip working set of the gathered tail: its largest layer input(s) + output at the
    values' byte widths (0 without a tail)."""
    size = lambda v: int(np.prod(graph.values[v].shape)) * type_bytes(graph.values[v])  # noqa: E731
    return max((sum(size(v) for v in set(n.inputs)) + size(n.output) for n in _tail_nodes(graph, cut)), default=0)


def run_block_graph(g: Graph, x_region: np.ndarray) -> np.ndarray:
    """The integer semantics of a block / layer / tail graph on its input codes."""
    return run_ir(g, x_region)


__all__ = ["block_graph", "cut_candidates", "cut_for_grid", "is_cut", "layer_graph", "run_block_graph",
           "tail_bytes", "tail_graph"]
