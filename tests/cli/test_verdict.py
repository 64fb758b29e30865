"""verify's last line is the verdict, and its report is typed: ``verified: ...`` only when every
check passed, else ``FAILED:`` naming each failing check with its count; the user's own tool
compared like with like (its float32 outputs against the exact reference rounded to float32)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tessera.compiler import verdict
from tessera.compiler.verdict import Comparison, Execution, IndependentReport, VerifyReport, VerifySeconds

EXECUTOR = "the user's model (ONNX reference evaluator, float64, qonnx's QONNX ops)"


def report(**changes) -> VerifyReport:
    """A report of 200 samples, 3200 outputs on which every check passed, with ``changes``."""
    base = VerifyReport("m.onnx", "prj", 200, 3200, 0, [], 200, 0, 0, verdict.Testbench(True, "200 samples, 0 mismatches"),
                        IndependentReport(EXECUTOR, samples=200, outputs=3200, equal=3200), False,
                        VerifySeconds(*[0.0] * 8))
    return dataclasses.replace(base, **changes)


def test_a_report_that_passed_says_verified_last():
    rep = report()
    assert rep.passed and rep.lines()[-1] == "verified: 200 samples, 3200 outputs, 0 mismatches"


def test_a_failed_independent_check_is_the_last_line():
    """The failure of the issue: C-simulation equal to the reference, the reference not the
    user's model -- the last line must not read 'verified'."""
    ind = IndependentReport(EXECUTOR, samples=200, outputs=3200, equal=1403, differing_outputs=1797,
                            first_differing_node="'gemm'")
    rep = report(independent=ind)
    lines = rep.lines()
    assert not rep.passed
    assert lines[-2].startswith("independent check: FAILED, 1797 of 3200 outputs differ")
    assert lines[-1] == "FAILED: independent check: 1797 of 3200 outputs differ (200 samples)"


def test_every_failing_check_is_named_with_its_count():
    ind = IndependentReport(EXECUTOR, Execution.FAILED_TO_RUN, "RuntimeError: bad node")
    rep = report(mismatches=12, reference_vs_integer_semantics_mismatches=3, independent=ind,
                 testbench=verdict.Testbench(False, "64 samples, 5 mismatches"))
    assert rep.verdict() == ("FAILED: C-simulation: 12 of 3200 outputs differ from the exact reference; testbench: "
                             "64 samples, 5 mismatches; integer semantics: 3 of 3200 outputs differ from the exact "
                             "reference; independent check: the user's model could not be run (RuntimeError: bad node) "
                             "(200 samples)")


@pytest.mark.parametrize("required", [False, True])
def test_no_independent_executor_fails_only_when_required(required):
    ind = IndependentReport(None, Execution.NO_EXECUTOR, "no ONNX executor runs QuantLSTMCell")
    rep = report(independent=ind, independent_required=required)
    assert rep.passed is not required
    last = rep.lines()[-1]
    assert last.startswith("FAILED: independent check: none (no ONNX executor runs QuantLSTMCell) -- required") \
        if required else last.startswith("verified: ")


def test_the_json_report_is_typed():
    """Every field present, enums as their values; no 'none' / 'skipped' / 'error' keys."""
    ind = IndependentReport(None, Execution.NO_EXECUTOR, "no ONNX executor runs QuantGRUCell")
    d = json.loads(json.dumps(report(independent=ind).to_dict()))
    assert d["testbench"] == {"passed": True, "line": "200 samples, 0 mismatches"}
    assert d["independent"]["execution"] == "no executor" and d["independent"]["reason"].endswith("QuantGRUCell")
    assert d["user_model"] is None and d["framework"] is None
    assert set(d["seconds"]) == {f.name for f in dataclasses.fields(VerifySeconds)}

    def keys(v):
        return set(v) | {k for x in v.values() for k in keys(x)} if isinstance(v, dict) else \
            {k for x in v for k in keys(x)} if isinstance(v, list) else set()

    assert not keys(d) & {"none", "skipped", "error"}


def test_the_user_model_is_compared_like_with_like(tmp_path):
    """A QCDQ model with float scales: onnxruntime's float32 outputs are the exact values
    rounded to float32 (most of which float32 cannot hold), so they all agree once the
    reference is rounded the same way."""
    from tessera.compiler.pipeline import compile_ir
    from tessera.compiler.reference.model import OrtReference, reference_model
    from tessera.compiler.samples import sample_codes
    from tessera.compiler.verify import user_model_agreement

    c = lambda name, v, dt=np.float32: numpy_helper.from_array(np.asarray(v, dtype=dt), name)  # noqa: E731
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q_in"),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="dq_in"),
             helper.make_node("DequantizeLinear", ["wq", "s_w", "z"], ["w"], name="dq_w"),
             helper.make_node("MatMul", ["d", "w"], ["mm"], name="matmul"),
             helper.make_node("QuantizeLinear", ["mm", "s_out", "z"], ["q_out"], name="q_out"),
             helper.make_node("DequantizeLinear", ["q_out", "s_out", "z"], ["y"], name="dq_out")]
    weights = np.random.default_rng(0).integers(-100, 100, size=(8, 4))
    g = helper.make_graph(nodes, "qcdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                          [c("s", 2.0**-4), c("s_w", 2.0**-7), c("s_out", 0.3), c("z", 0, np.int8),
                           c("wq", weights, np.int8)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = tmp_path / "qcdq.onnx"
    onnx.save(m, path)
    graph = compile_ir(path)
    codes = sample_codes(graph.values[graph.input], 100)
    ref = OrtReference(reference_model(graph)).run(codes)
    exact = graph.real(graph.output, ref)
    assert np.sum(exact.astype(np.float32) != exact) > exact.size // 4  # float64 against float32 would differ here
    agree = user_model_agreement(path, graph, codes, ref)
    assert agree.execution is Execution.RAN and agree.comparison is Comparison.FLOAT32, agree
    assert agree.outputs == 400 and agree.differing_outputs == 0, agree
    assert agree.line() == "user model (onnxruntime, float32): 400/400 outputs equal the exact reference rounded to float32"
