"""Passes over the typed IR: frozen dataclasses with a name, run by a bounded manager."""

from __future__ import annotations

from ..ir.graph import Graph
from .infer_types import InferTypes
from .manager import Pass, PassResult
from .manager import run_passes as _run

__all__ = ["DEFAULT_PASSES", "InferTypes", "Pass", "PassResult", "run_passes"]

DEFAULT_PASSES = (InferTypes(),)


def run_passes(graph: Graph, passes=DEFAULT_PASSES, max_rounds: int = 8) -> Graph:
    """The default passes (type inference), or ``passes``, to a fixed point (bounded)."""
    return _run(graph, passes, max_rounds)
