"""The float64 executor of the quantized cells' ONNX export forms (docs/rnn_export.md).

It is the compiler's independent check for recurrent files, so it lives with it:
``compiler/independent/cells.py`` runs ``QuantLSTMCell`` / ``QuantGRUCell`` /
``QuantConvLSTMCell`` as the document writes them (qonnx's ``quant`` for every internal
quantizer), inside ONNX's reference evaluator beside qonnx's QONNX ops
(``compiler/independent/executor.py``), so the whole file runs: the layers before a cell and after it
too.  It shares no code with the export (:mod:`.export`), with brevitas or with the compiler's
reading of the cells; the tests require it to agree exactly with the brevitas model a file was
exported from.  These two names are kept for the models, the tests and the benchmarks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from tessera.compiler.frontend.load import RECURRENT_OPS
from tessera.compiler.independent import CELL_EXECUTOR, IndependentExecutor, run_file

__all__ = ["cell_oracle", "run_cell_onnx"]


def run_cell_onnx(path: str | Path, feeds: dict) -> dict[str, np.ndarray]:
    """Every graph output of an exported cell graph (any of the three forms, with whatever
    surrounds the cells) on ``feeds`` (graph input name -> array, batch included), in float64."""
    return run_file(onnx.load(str(path)), feeds)


def cell_oracle(path: str | Path):
    """For a file with recurrent cells: its first output as the independent check computes it,
    as an :class:`~tessera.compiler.api.Oracle` (``verify`` runs this executor by default now);
    None for any other file."""
    from tessera.compiler import api

    model = onnx.load(str(path))
    if not any(n.op_type in RECURRENT_OPS for n in model.graph.node):
        return None
    executor = IndependentExecutor(model, outputs=[model.graph.output[0].name])

    def run(x: np.ndarray | list[np.ndarray]) -> np.ndarray:
        n = len(x[0]) if isinstance(x, list) else len(x)
        return executor.run(x).reshape(n, -1)

    return api.Oracle(CELL_EXECUTOR, run)
