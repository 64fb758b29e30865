"""Bit-exact verification, on every output of every sample:

1. the C-simulation (an RTL project's: its Verilator simulation) == the exact onnxruntime reference (and the reference == the integer
   semantics);
2. the exact reference == the user's own file run by an independent executor in float64
   (:mod:`.independent`; recurrent cells, which no ONNX runtime executes, by its cell executor,
   :mod:`.independent.cells`), every difference failing unless proven to be a rounding float64
   cannot decide.

Also reported, not a verdict: how often the user's own tools in float32 (qonnx
``execute_onnx`` for QONNX, onnxruntime for plain ONNX/QCDQ) agree with the exact reference
rounded to float32 (:class:`Comparison`).  The report's last line is the verdict
(:meth:`VerifyReport.verdict`): ``verified: ...`` only when every check passed, else
``FAILED:`` and each failing check with its count.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from .errors import InputDataError, ProjectError, first_line
from .pipeline import compile_ir
from .frontend.load import RECURRENT_OPS, load_onnx, normalize_domains
from .independent import independent_check, output_differences
from .observer import SILENT, Observer
from .project import Manifest
from .reference.model import OrtReference, reference_model
from .reference.interpret import run_ir
from .samples import input_samples, read_array, read_inputs
from .sim.partitioned import open_sim
from .verdict import (Comparison, Difference, Execution, FrameworkReport, IndependentReport, Mismatch, Oracle, Testbench,
                      UserModelReport, ValueRange, VerifyOptions, VerifyReport, VerifySeconds)


def _first_mismatches(ref: np.ndarray, got: np.ndarray, limit: int = 10) -> list[Mismatch]:
    n = len(ref)
    ref, got = ref.reshape(n, -1), got.reshape(n, -1)
    return [Mismatch(int(s), int(o), int(ref[s, o]), int(got[s, o])) for s, o in np.argwhere(ref != got)[:limit]]


def user_model_agreement(model_path: str | Path, graph, codes: np.ndarray, ref: np.ndarray) -> UserModelReport:
    """Run the user's exported model in its own float32 tool on the same inputs (as real
    values) and count the outputs equal to the exact reference rounded the same way."""
    import onnx

    model = normalize_domains(onnx.load(str(model_path)))
    cells = sorted({n.op_type for n in model.graph.node if n.op_type in RECURRENT_OPS})
    if cells:
        return UserModelReport(Execution.NO_EXECUTOR, reason=f"no ONNX runtime executes {', '.join(cells)}; the "
                               "independent check runs them in float64")
    if graph.softmax is not None:
        return UserModelReport(Execution.NO_EXECUTOR, reason=f"the design outputs the logits of the trailing Softmax "
                               f"'{graph.softmax}'; the independent check compares them")
    custom = any(n.domain.startswith("qonnx") or n.domain.startswith("finn") for n in model.graph.node)
    x = graph.input_real(codes)
    expected = graph.output_real(ref).reshape(len(ref), -1).astype(np.float32)
    tool = "qonnx.execute_onnx" if custom else "onnxruntime"
    try:
        got = _run_user_model(model, x, [p.onnx_name for p in graph.output_ports], custom).astype(np.float32)
    except Exception as exc:  # noqa: BLE001 - a report about the user's model, not a verdict
        return UserModelReport(Execution.FAILED_TO_RUN, tool, f"{tool} could not run the model: {first_line(exc)}")
    if got.shape != expected.shape:
        return UserModelReport(Execution.FAILED_TO_RUN, tool, f"{tool} gave {got.shape[1]} values per sample, the "
                               f"design {expected.shape[1]}")
    comparison, differ = Comparison.FLOAT32, got != expected
    grid = _accumulator_columns(graph)
    if grid.any():  # read on the output's code grid, as the independent check does
        comparison = Comparison.CODE_GRID
        differ[:, grid] = output_differences(graph, got.astype(np.float64), ref)[:, grid]
    gap = np.abs(got.astype(np.float64) - expected.astype(np.float64))
    return UserModelReport(Execution.RAN, tool, None, comparison, int(len(expected)), int(differ.size),
                           int(differ.sum()), float(gap.max()) if gap.size else 0.0)


def _accumulator_columns(graph) -> np.ndarray:
    """Which packed output values are an accumulator no Quant rounds (read on its code grid)."""
    return np.concatenate([np.full(graph.values[p.value].size, p.value in graph.scales and
                                   graph.scales[p.value].accumulator) for p in graph.output_ports])


def _run_user_model(model, x, outputs: list[str], custom: bool) -> np.ndarray:
    """The model's ``outputs`` on real inputs ``x`` (one array, or one per input), one sample
    at a time, packed."""
    def inputs(m) -> list[str]:
        inits = {i.name for i in m.graph.initializer}
        return [i.name for i in m.graph.input if i.name not in inits]

    names = inputs(model)
    xs = [np.asarray(a, dtype=np.float32) for a in ([x] if len(names) == 1 else x)]
    if custom:  # qonnx runs the cleaned model, which renames inputs and outputs in order
        from qonnx.core.modelwrapper import ModelWrapper
        from qonnx.core.onnx_exec import execute_onnx
        from .frontend.clean import clean
        wrapper = ModelWrapper(clean(model))
        at = [o.name for o in model.graph.output]
        outputs = [wrapper.model.graph.output[at.index(o)].name for o in outputs]
        names = inputs(wrapper.model)
        run = lambda feed: [execute_onnx(wrapper, feed)[o] for o in outputs]  # noqa: E731
    else:
        import onnxruntime as ort
        # the graph as written: ORT's optimizer fuses QuantizeLinear/DequantizeLinear pairs into
        # 8-bit integer kernels whose results depend on the CPU (int16 saturation without VNNI)
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        run = lambda feed: session.run(outputs, feed)  # noqa: E731
    rows = [run({k: a[i : i + 1] for k, a in zip(names, xs)}) for i in range(len(xs[0]))]
    return np.stack([np.concatenate([np.asarray(v).reshape(-1) for v in row]) for row in rows])


def framework_agreement(expected: np.ndarray, ref_data: np.ndarray, graph, what: str = "--expected") -> FrameworkReport:
    """Outputs of the training framework (``expected``: real values, one row per --data
    sample) that differ from the exact reference."""
    y = expected.astype(np.float64)
    want = graph.output_real(ref_data).reshape(ref_data.shape)
    if y.size != want.size or len(y) != len(want):
        raise InputDataError(f"{what}: {y.shape} does not match the reference outputs on --data {want.shape}")
    differ = y.reshape(want.shape) != want
    return FrameworkReport(int(differ.size), int(differ.sum()),
                           float(np.max(np.abs(y.reshape(want.shape) - want))) if differ.size else 0.0)


def load_inputs(path: str | Path, manifest: Manifest) -> np.ndarray:
    """Real-valued inputs (a .npy, or for several inputs an .npz keyed by the model's input
    names) -> codes with the model's input quantizers."""
    arrays, where = read_inputs(path, manifest.input.names, "--data")
    return manifest.quantize_inputs(arrays, where)


def _framework_as_independent(framework: FrameworkReport, n_data: int, n_random: int,
                              cells: list[str]) -> IndependentReport:
    """For recurrent cells: the framework's outputs on --data are the independent executor."""
    where = f"the graph output (max |difference| {framework.max_abs_difference:.3g})" if framework.differing_outputs else None
    return IndependentReport("the training framework's outputs on --data (--expected)", samples=n_data,
                             outputs=framework.outputs, equal=framework.outputs - framework.differing_outputs,
                             differing_outputs=framework.differing_outputs, first_differing_node=where,
                             unchecked_samples=n_random, unchecked_reason=f"no ONNX executor runs {', '.join(cells)}")


def _oracle_as_independent(oracle: Oracle, graph, codes: np.ndarray, ref: np.ndarray) -> IndependentReport:
    """A caller's executor of the user's model as the independent check, on every sample."""
    n = len(codes)
    theirs = np.asarray(oracle.run(graph.input_real(codes)), dtype=np.float64).reshape(n, -1)
    ours = graph.output_real(ref).reshape(n, -1)
    rep = IndependentReport(oracle.name, samples=n, outputs=int(ours.size))
    if theirs.shape != ours.shape:
        rep.differing_outputs = rep.outputs
        rep.first_differing_node = f"the graph output ({theirs.shape[1]} values per sample, {ours.shape[1]} compiled)"
        return rep
    differ = theirs != ours
    rep.equal, rep.differing_outputs = int((~differ).sum()), int(differ.sum())
    rep.first_differences = [Difference(int(a), int(b), float(ours[a, b]), float(theirs[a, b]))
                             for a, b in np.argwhere(differ)[:10]]
    if rep.differing_outputs:
        rep.first_differing_node = "the graph output"
    return rep


def _independent(model_path: str | Path, options: VerifyOptions, graph, codes: np.ndarray, ref: np.ndarray,
                 framework: FrameworkReport | None, n_random: int) -> IndependentReport:
    """The independent check: the user's file in float64 (its recurrent cells by the cell
    executor, :mod:`.independent.cells`), on every sample; a caller's oracle instead where one
    is given for a recurrent file; the framework's outputs on --data where the cell executor
    cannot run the file."""
    import onnx

    user_file = onnx.load(str(model_path))
    cells = sorted({n.op_type for n in user_file.graph.node if n.op_type in RECURRENT_OPS})
    if cells and options.oracle is not None:
        return _oracle_as_independent(options.oracle, graph, codes, ref)
    rep = independent_check(user_file, graph, codes, ref)
    if cells and framework is not None and rep.execution is Execution.FAILED_TO_RUN:
        return _framework_as_independent(framework, len(codes) - n_random, n_random, cells)
    return rep


def verify(model_path: str | Path, prj: str | Path, options: VerifyOptions = VerifyOptions(),
           observer: Observer = SILENT) -> VerifyReport:
    """The project's C-simulation against the exact reference of ``model_path`` on every
    output, and the reference against the user's file itself run by an independent executor
    (:class:`VerifyReport`).  ``observer``: the steps as they run, and the C-simulation's
    progress (samples, or a partitioned project's block runs)."""
    t0 = time.perf_counter()
    if options.expected is not None and options.data is None:
        raise InputDataError("--expected needs --data: the framework's outputs are compared on those inputs")
    if options.samples == 0 and options.data is None:
        raise InputDataError("no sample to verify: --samples 0 and no --data")
    load_onnx(model_path)  # a missing, empty or unreadable model file: one line naming it
    manifest = Manifest.read(prj)
    if not manifest.compiled_from(model_path):
        raise ProjectError(f"{prj} was compiled from a different model than {model_path} (sha256 differs)")
    with observer.stage("reading and typing the model"):
        graph = compile_ir(model_path, manifest.declared_type)
        codes = input_samples(graph, options.samples, seed=options.seed)
        n_random = len(codes)
        if options.data is not None:
            codes = np.concatenate([codes, load_inputs(options.data, manifest)])
        expected = None if options.expected is None else read_array(options.expected, "expected outputs")
    t1 = time.perf_counter()
    with observer.stage("running the exact reference and the integer semantics"):
        ref = OrtReference(reference_model(graph)).run(codes)
        t2 = time.perf_counter()
        reached: dict[str, tuple[int, int]] = {}
        sem = run_ir(graph, codes, ranges=reached)
    t3 = time.perf_counter()
    sim = open_sim(prj)
    simulator, tool = ("RTL simulation", "Verilator") if manifest.rtl is not None else ("C-simulation", "g++")
    with observer.stage(f"building the {simulator} ({tool})"):
        sim.build(testbench=True)  # the library and, unpartitioned, the testbench from the same objects
    t4 = time.perf_counter()
    total = sim.progress_total(len(codes))
    with observer.progress(simulator, total, "samples" if total == len(codes) else "blocks") as advance:
        got = sim.run_codes(codes, progress=advance)
    t5 = time.perf_counter()
    with observer.stage("running the project's testbench"):
        tb_status, tb_line = sim.testbench()
    t6 = time.perf_counter()
    n_user = options.user_samples
    with observer.stage("running the user's model in its own tool"):
        user = user_model_agreement(model_path, graph, codes[:n_user], ref[:n_user]) if n_user else None
    t7 = time.perf_counter()
    framework = None if expected is None else framework_agreement(expected, ref[n_random:], graph, str(options.expected))
    with observer.stage("running the independent check"):
        independent = _independent(model_path, options, graph, codes, ref, framework, n_random)
    t8 = time.perf_counter()
    return VerifyReport(
        str(model_path), str(prj), int(len(codes)), int(ref.size), int(np.sum(ref != got)), _first_mismatches(ref, got),
        n_random, len(codes) - n_random, int(np.sum(ref != sem)), Testbench(tb_status == 0, tb_line), independent,
        options.require_independent,
        VerifySeconds(*(round(b - a, 3) for a, b in zip((t0, t1, t2, t3, t4, t5, t6, t7), (t1, t2, t3, t4, t5, t6, t7, t8)))),
        user, framework, simulator, tool, [ValueRange(v, lo, hi) for v, (lo, hi) in reached.items()])


__all__ = ["framework_agreement", "load_inputs", "user_model_agreement", "verify"]
