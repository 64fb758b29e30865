"""Estimates of an RTL design (``--backend rtl``), read off the adder graphs da4ml builds.

The design is traced as ``compile --backend rtl`` traces it (:mod:`..rtl.trace`), so the
figures are those of the very graphs the Verilog is written from:

- **LUTs**: da4ml's cost model of its program (each adder a carry chain, a LUT per bit of
  it; muxes, comparisons and tables by their own rules), per layer the cost its values add to
  the program of every layer before it (the prefixes' costs, one after the other);
- **FFs**: the pipeline registers da4ml places at ``pipeline`` adder delays per stage (the
  bits of every stage's inputs) and the valid chain;
- **latency**: clock cycles from ``in_valid`` to ``out_valid`` (the stages, plus the output
  register), one sample per clock.

No synthesis runs here: ``tessera synth`` measures a design, and ``bench/hardware.py``
compares the two (docs/results/hardware.md)."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.graph import Graph


@dataclass(frozen=True)
class RtlLayerEstimate:
    """One layer: its node, op and the LUTs of its adder graphs."""

    node: str
    op: str
    luts: int


@dataclass(frozen=True)
class RtlEstimate:
    """A design's estimate at ``pipeline`` adder delays per stage."""

    layers: tuple[RtlLayerEstimate, ...]
    luts: int
    ffs: int
    latency: int
    stages: int
    pipeline: int

    def line(self) -> str:
        return (f"RTL estimate: {self.luts:,} LUT, {self.ffs:,} FF, latency {self.latency} clock cycles (II 1, "
                f"{self.stages} stages at {self.pipeline} adder delays each)")

    def to_json(self) -> dict:
        return {"luts": self.luts, "ffs": self.ffs, "latency_cycles": self.latency, "stages": self.stages,
                "pipeline": self.pipeline, "layers": [{"node": r.node, "op": r.op, "luts": r.luts} for r in self.layers]}


def layer_costs(traced) -> list[int]:
    """Each node's LUTs: the cost its values add to the program of the nodes before it."""
    graph = traced.graph
    costs, before, seen = [], 0, []
    for node in graph.nodes:
        seen.append(node.output)
        total = int(round(traced.program(seen).cost))
        costs.append(total - before)
        before = total
    return costs


def estimate_rtl(graph: Graph, pipeline: int, traced=None) -> RtlEstimate:
    """The RTL estimate of ``graph`` (``traced``: its trace, when the caller has it)."""
    from ..rtl.trace import pipelined, trace

    traced = traced if traced is not None else trace(graph)
    program = traced.program()
    pipe = pipelined(program, pipeline)
    stages = len(pipe.solutions)
    layers = tuple(RtlLayerEstimate(n.name, n.op, c) for n, c in zip(graph.nodes, layer_costs(traced)))
    return RtlEstimate(layers, int(round(program.cost)), int(pipe.reg_bits) + stages + 1, stages + 1, stages, pipeline)


__all__ = ["RtlEstimate", "RtlLayerEstimate", "estimate_rtl", "layer_costs"]
