"""Trust nothing unchecked: da4ml's traced program (and its pipelined stages) against the
exact integer semantics, before any Verilog is written.

da4ml has computed wrong values here (a requantization's saturation constant, a diagonal
form's saturation) while its own interpreter agreed with its Verilog, so the traced program
is run by Tessera's exact interpreter of da4ml's ops (:mod:`.interpret`; da4ml's compiled
interpreter wraps signed values wider than 32 bits wrongly) on full-range samples of the
design's input types (:func:`..samples.input_samples`: the extremes first, then uniform
codes) and compared with :func:`..reference.interpret.run_ir` on every output.  A difference is a one-line refusal
naming the first layer whose traced values differ (each layer's own program, from the
design's inputs to that layer, run on the same samples)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedModelError
from ..reference.interpret import run_ir
from ..samples import input_samples
from .interpret import run_program
from .trace import Traced

#: Full-range samples the traced program must equal the exact semantics on.
CHECK_SAMPLES = 2000
#: Their seed (independent of verify's default samples).
CHECK_SEED = 4049


@dataclass(frozen=True)
class TraceCheck:
    """What the check ran: samples, outputs compared (all equal: a check that returns passed)."""

    samples: int
    outputs: int


def _differing(got: np.ndarray, want: np.ndarray) -> int:
    return int(np.sum(np.asarray(got).reshape(want.shape) != want))


def _first_differing_node(traced: Traced, codes: np.ndarray) -> tuple[str, int, int]:
    """The first node (in order) whose traced values differ from its exact codes: (name,
    differing values, values)."""
    graph = traced.graph
    kept = run_ir(graph, codes, keep={n.output for n in graph.nodes})
    for node in graph.nodes:
        want = kept[node.output].reshape(len(codes), -1)
        bad = _differing(run_program(codes, traced.program([node.output])), want)
        if bad:
            return node.name, bad, int(want.size)
    return "the graph output", 0, 0


def check_program(traced: Traced, program, stages=None, samples: int = CHECK_SAMPLES,
                  seed: int = CHECK_SEED) -> TraceCheck:
    """``program`` (da4ml's CombLogic of ``traced``) and, given, its pipeline ``stages``
    (CombLogic each, run one after the other) == the exact semantics on ``samples``
    full-range samples; one line naming the first differing layer otherwise."""
    graph = traced.graph
    codes = input_samples(graph, samples, seed=seed)
    want = run_ir(graph, codes).reshape(len(codes), -1)
    bad = _differing(run_program(codes, program), want)
    if bad:
        name, n_bad, n = _first_differing_node(traced, codes)
        where = f"node '{name}'" if n else name
        raise UnsupportedModelError(
            f"{where}: da4ml's traced program differs from the exact semantics on {n_bad or bad} of {n or want.size} "
            f"values ({samples} full-range samples); the RTL back end refuses the design (--backend hls compiles it)")
    if stages is not None:
        bad = _differing(run_program(codes, *stages), want)
        if bad:
            raise UnsupportedModelError(
                f"the pipelined program differs from the exact semantics on {bad} of {want.size} output values "
                f"({samples} full-range samples) though its unpipelined trace does not: choose another --pipeline")
    return TraceCheck(int(len(codes)), int(want.size))


__all__ = ["CHECK_SAMPLES", "CHECK_SEED", "TraceCheck", "check_program"]
