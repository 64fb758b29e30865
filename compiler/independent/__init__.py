"""The independent check: the user's own file run by code that shares nothing with Tessera's
reading of it -- ONNX's reference evaluator in float64 with qonnx's functions for the QONNX
ops (:mod:`.executor`), and the float64 executor of the recurrent cells no ONNX runtime
executes (:mod:`.cells`) -- compared with the exact reference on every output
(docs/bit-exact.md)."""

from .executor import (BOUNDARY_DISTANCE, CELL_EXECUTOR, EXECUTOR, Diagnosis, IndependentError, IndependentExecutor,
                       diagnose, float64_model, independent_check, output_differences, qonnx_ops, run_file)

__all__ = ["BOUNDARY_DISTANCE", "CELL_EXECUTOR", "Diagnosis", "EXECUTOR", "IndependentError", "IndependentExecutor", "diagnose",
           "float64_model", "independent_check", "output_differences", "qonnx_ops", "run_file"]
