"""Every conformance case, one list: the quantizer constructs (:mod:`.cases`), the recurrent
models (:mod:`.recurrent`), the graphs of unusual shape (:mod:`.graphs`), the graph input's
quantizers (:mod:`.inputs`), what users do with a recurrent sequence (:mod:`.sequences`),
16-bit nonlinearities (:mod:`.wide`), dilated pools and reflect / edge padding (:mod:`.windows`)
and what once crashed (:mod:`.crashes`);
the test suite and ``bench/conformance.py`` read it."""

from __future__ import annotations

from .cases import CASES as QUANTIZER_CASES, Case
from .crashes import CRASH_CASES
from .graphs import GRAPH_CASES
from .inputs import INPUT_CASES
from .recurrent import RECURRENT_CASES
from .sequences import SEQUENCE_CASES
from .wide import WIDE_CASES
from .windows import WINDOW_CASES

CASES: tuple[Case, ...] = (*QUANTIZER_CASES, *RECURRENT_CASES, *GRAPH_CASES, *INPUT_CASES, *SEQUENCE_CASES,
                          *WIDE_CASES, *WINDOW_CASES, *CRASH_CASES)
BY_NAME = {c.name: c for c in CASES}

__all__ = ["BY_NAME", "CASES", "Case"]
