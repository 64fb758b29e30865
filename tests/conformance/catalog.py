"""Every conformance case, one list: the quantizer constructs (:mod:`.cases`), the recurrent
models (:mod:`.recurrent`) and the graphs of unusual shape (:mod:`.graphs`); the test suite and
``bench/conformance.py`` read it."""

from __future__ import annotations

from .cases import CASES as QUANTIZER_CASES, Case
from .graphs import GRAPH_CASES
from .recurrent import RECURRENT_CASES

CASES: tuple[Case, ...] = (*QUANTIZER_CASES, *RECURRENT_CASES, *GRAPH_CASES)
BY_NAME = {c.name: c for c in CASES}

__all__ = ["BY_NAME", "CASES", "Case"]
