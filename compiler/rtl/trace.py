"""The typed IR traced into one adder-graph program: each node's ``rtl`` facet on the
:class:`.builder.DaBuilder`, from the design's input codes to its output codes (packed as
:func:`..ir.graph.pack` packs them: each output port's values flat, port after port).

:func:`refusal` names the first node whose op has no RTL form, before any tracing."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.graph import Graph
from ..ops import OPS
from .builder import DaBuilder


def refusal(graph: Graph) -> str | None:
    """One line naming the first node the RTL back end cannot build (None: it builds them all)."""
    for node in graph.nodes:
        if not OPS[node.op].has_rtl:
            return (f"node '{node.name}': op '{node.op}' has no RTL form (the RTL back end builds fully unrolled "
                    "designs of dense, convolution, pooling, activation, requantization, merge and reshaping "
                    "layers); --backend hls supports it")
    return None


@dataclass
class Traced:
    """A traced design: da4ml's input variables, every IR value's symbolic codes (shaped as
    the value), the packed output variables and the seconds the trace took."""

    graph: Graph
    inputs: object
    values: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def outputs(self) -> list:
        return [v for value in self.graph.outputs for v in np.ravel(self.values[value])]

    def program(self, values: list[str] | None = None):
        """da4ml's combinational program from the inputs to ``values`` (default: the outputs)."""
        from da4ml.trace import comb_trace

        outs = self.outputs if values is None else [v for value in values for v in np.ravel(self.values[value])]
        return comb_trace(self.inputs, outs)


def pipelined(program, pipeline: int):
    """da4ml's pipeline of ``program``: stages of at most ``pipeline`` adder delays each."""
    from da4ml.trace import to_pipeline

    return to_pipeline(program, pipeline, verbose=False)


def trace(graph: Graph, builder: DaBuilder | None = None) -> Traced:
    """Every node of ``graph`` traced in order; one line for a node the back end refuses."""
    why = refusal(graph)
    if why is not None:
        raise UnsupportedModelError(why)
    t0 = time.perf_counter()
    b = builder or DaBuilder()
    ports = [graph.values[v] for v in graph.inputs]
    inputs, codes = b.inputs([t.size for t in ports], [(t.ftype.signed, t.ftype.width) for t in ports])
    traced = Traced(graph, inputs)
    for value, t, c in zip(graph.inputs, ports, codes):
        traced.values[value] = np.asarray(c, dtype=object).reshape(t.shape)
    for node in graph.nodes:
        b.node = node.name
        ins = [graph.values[v] for v in node.inputs]
        out = graph.values[node.output]
        y = OPS[node.op].rtl(node.attrs, b, [traced.values[v] for v in node.inputs], ins, out)
        y = np.asarray(y, dtype=object)
        if y.shape != tuple(out.shape):
            raise AssertionError(f"node '{node.name}': the RTL facet of '{node.op}' gave shape {y.shape}, "
                                 f"the IR {tuple(out.shape)}")
        traced.values[node.output] = y
    traced.seconds = time.perf_counter() - t0
    return traced


__all__ = ["Traced", "pipelined", "refusal", "trace"]
