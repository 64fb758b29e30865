"""Passes over the typed IR: frozen dataclasses with a name, run by a bounded manager."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.graph import Graph
from .infer_types import InferTypes

__all__ = ["PassResult", "run_passes", "InferTypes", "DEFAULT_PASSES"]


@dataclass(frozen=True)
class PassResult:
    graph: Graph
    modified: bool


DEFAULT_PASSES = (InferTypes(),)


def run_passes(graph: Graph, passes=DEFAULT_PASSES, max_rounds: int = 8) -> Graph:
    """Apply the passes in order until none modifies the graph (at most ``max_rounds`` rounds)."""
    for _ in range(max_rounds):
        modified = False
        for p in passes:
            res = p.apply(graph)
            graph, modified = res.graph, modified or res.modified
        if not modified:
            return graph
    raise RuntimeError(f"passes did not converge in {max_rounds} rounds")
