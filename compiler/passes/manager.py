"""The pass contract and the bounded pass manager: a pass is a frozen dataclass with a
``name`` and ``apply(graph) -> PassResult``; the manager runs a sequence of them until none
modifies the graph, at most ``max_rounds`` times (never forever)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..ir.graph import Graph


@dataclass(frozen=True)
class PassResult:
    graph: Graph
    modified: bool


class Pass(Protocol):
    name: str

    def apply(self, graph: Graph) -> PassResult: ...


def run_passes(graph: Graph, passes, max_rounds: int = 8) -> Graph:
    """Apply the passes in order until none modifies the graph (at most ``max_rounds`` rounds)."""
    for _ in range(max_rounds):
        modified = False
        for p in passes:
            res = p.apply(graph)
            graph, modified = res.graph, modified or res.modified
        if not modified:
            return graph
    raise RuntimeError(f"passes did not converge in {max_rounds} rounds")


__all__ = ["Pass", "PassResult", "run_passes"]
