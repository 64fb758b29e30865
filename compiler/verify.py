"""Bit-exact verification, on every output of every sample:

1. the C-simulation == the exact onnxruntime reference (and the reference == the integer
   semantics);
2. the exact reference == the user's own file run by an independent executor in float64
   (:mod:`.independent`), every difference failing unless proven to be a rounding float64
   cannot decide; for recurrent cells, which no ONNX executor runs, the training
   framework's outputs on the real inputs (``expected``) are that executor.

Also reported, not a verdict: how often the user's own tools in float32 (qonnx
``execute_onnx`` for QONNX, onnxruntime for plain ONNX/QCDQ) agree with the exact reference.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .writer import read_manifest, sha256
from .errors import InputDataError, ProjectError
from .frontend import compile_ir
from .frontend.real import normalize_domains
from .frontend.recurrent import RECURRENT_OPS
from .independent import IndependentReport, independent_check
from .ir.meaning import InputMap
from .ops.quant import quantize_float
from .reference.model import OrtReference, reference_model
from .reference.interpret import run_ir
from .samples import sample_codes
from .partition import default_workers
from .partition.project import open_sim


@dataclass
class VerifyReport:
    model: str
    project: str
    samples: int
    outputs: int
    mismatches: int
    first_mismatches: list[dict] = field(default_factory=list)
    random_samples: int = 0
    data_samples: int = 0
    reference_vs_integer_semantics_mismatches: int = 0
    testbench: str = ""
    user_model: dict = field(default_factory=dict)
    #: the training framework's outputs on the real inputs (``expected``) against the reference
    framework: dict = field(default_factory=dict)
    #: the exact reference against the user's file run by the independent executor
    independent: dict = field(default_factory=dict)
    #: whether a model without an independent executor fails (``require_independent``)
    independent_required: bool = False
    seconds: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def independent_passed(self) -> bool:
        ind = self.independent
        if ind.get("none") is not None:
            return not self.independent_required
        return ind.get("error") is None and ind.get("differing_outputs", 0) == 0

    @property
    def passed(self) -> bool:
        """Every check: C-simulation == reference == integer semantics, the testbench, and the
        independent check."""
        return (self.mismatches == 0 and self.reference_vs_integer_semantics_mismatches == 0
                and self.testbench.startswith("passed") and self.independent_passed)

    def independent_line(self) -> str:
        """The independent check's line of the report."""
        ind = self.independent
        line = IndependentReport(**{k: v for k, v in ind.items() if k in IndependentReport.__dataclass_fields__}).line()
        if ind.get("unchecked_samples"):
            line += f"; {ind['unchecked_samples']} random samples without one ({ind['unchecked_reason']})"
        if ind.get("none") is not None and self.independent_required:
            line += " -- required (--require-independent)"
        return line


def _first_mismatches(ref: np.ndarray, got: np.ndarray, limit: int = 10) -> list[dict]:
    n = len(ref)
    bad = np.argwhere(ref.reshape(n, -1) != got.reshape(n, -1))
    return [{"sample": int(s), "output": int(o), "expected": int(ref.reshape(n, -1)[s, o]),
             "got": int(got.reshape(n, -1)[s, o])} for s, o in bad[:limit]]


def user_model_agreement(model_path: str | Path, graph, codes: np.ndarray, ref: np.ndarray) -> dict:
    """Run the user's exported model on the same inputs (as real values) and count agreement."""
    import onnx

    model = normalize_domains(onnx.load(str(model_path)))
    cells = sorted({n.op_type for n in model.graph.node if n.op_type in RECURRENT_OPS})
    if cells:
        return {"tool": None, "skipped": f"no ONNX runtime executes {', '.join(cells)}; pass the training "
                                         "framework's outputs on --data with --expected"}
    if graph.softmax is not None:
        return {"tool": None, "skipped": f"the design outputs the logits of the trailing Softmax '{graph.softmax}'; "
                                         "the independent check compares them"}
    custom = any(n.domain.startswith("qonnx") or n.domain.startswith("finn") for n in model.graph.node)
    x = graph.input_real(codes).astype(np.float32)
    expected = graph.real(graph.output, ref).reshape(len(ref), -1)
    tool = "qonnx.execute_onnx" if custom else "onnxruntime"
    try:
        got = _run_user_model(model, x, expected.shape[1:], custom)
    except Exception as exc:  # noqa: BLE001 - a report about the user's model, not a verdict
        text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        return {"tool": tool, "error": f"{tool} could not run the model: {type(exc).__name__}: {text}"}
    differ = got.astype(np.float64) != expected
    scale = graph.scales.get(graph.output)
    if scale is not None and scale.accumulator:  # read on the output's code grid, as the independent check does
        decoded, on_grid = scale.decode(got, graph.values[graph.output].shape)
        differ = ~(on_grid.reshape(differ.shape) & (decoded.reshape(differ.shape) == ref.reshape(differ.shape)))
    return {"tool": tool, "samples": int(len(x)), "outputs": int(differ.size), "differing_outputs": int(differ.sum()),
            "max_abs_difference": float(np.max(np.abs(got - expected))) if differ.size else 0.0}


def _run_user_model(model, x: np.ndarray, out_shape, custom: bool) -> np.ndarray:
    if custom:
        from qonnx.core.modelwrapper import ModelWrapper
        from qonnx.core.onnx_exec import execute_onnx

        from .frontend.qonnx_import import clean

        wrapper = ModelWrapper(clean(model))
        iname, oname = wrapper.model.graph.input[0].name, wrapper.model.graph.output[0].name
        return np.stack([np.asarray(execute_onnx(wrapper, {iname: x[i : i + 1]})[oname]).reshape(out_shape) for i in range(len(x))])
    import onnxruntime as ort

    # the graph as written: ORT's optimizer fuses QuantizeLinear/DequantizeLinear pairs into
    # 8-bit integer kernels whose results depend on the CPU (int16 saturation without VNNI)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return np.stack([s.run(None, {s.get_inputs()[0].name: x[i : i + 1]})[0].reshape(out_shape) for i in range(len(x))])


def framework_agreement(expected: str | Path, ref_data: np.ndarray, graph) -> dict:
    """Outputs of the training framework (real values, one row per --data sample) that differ
    from the exact reference."""
    try:
        y = np.load(expected, allow_pickle=False).astype(np.float64)
    except (OSError, ValueError) as exc:
        raise InputDataError(f"cannot read expected outputs {expected}: {exc}") from None
    want = graph.real(graph.output, ref_data).reshape(ref_data.shape)
    if y.size != want.size or len(y) != len(want):
        raise InputDataError(f"{expected}: {y.shape} does not match the reference outputs on --data {want.shape}")
    differ = y.reshape(want.shape) != want
    return {"outputs": int(differ.size), "differing_outputs": int(differ.sum()),
            "max_abs_difference": float(np.max(np.abs(y.reshape(want.shape) - want))) if differ.size else 0.0}


def read_array(path: str | Path) -> np.ndarray:
    """A ``.npy`` array (no pickles), or a one-line error naming the file."""
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise InputDataError(f"cannot read input array {path}: {exc}") from None


def quantize_inputs(x: np.ndarray, manifest: dict, what: str = "input") -> np.ndarray:
    """Real-valued inputs ``(N, *shape)`` (or one sample) -> codes with the model's input Quant."""
    from .ir.types import FixedType
    from .ops.quant import Attrs

    shape = tuple(manifest["input"]["shape"])
    model_shape = manifest["input_quant"].get("model_shape")
    if model_shape is not None and x.shape[1:] == tuple(model_shape):  # the model's input shape, reshaped before its Quant
        x = x.reshape(len(x), *shape)
    if x.shape[1:] != shape:
        if x.shape == shape:
            x = x[None]
        else:
            raise InputDataError(f"{what}: array of shape {x.shape} does not match the model input (N, {', '.join(map(str, shape))})")
    if not np.all(np.isfinite(x)):
        raise InputDataError(f"{what}: contains NaN or Inf")
    q = manifest["input_quant"]
    if "input_map" in q:
        try:
            return InputMap.from_json(q["input_map"]).codes(x)
        except ValueError as exc:
            raise InputDataError(f"{what}: {exc}") from None
    return quantize_float(Attrs(FixedType(q["width"], q["frac"], q["signed"]), q["narrow"], q["rounding"]), x)


def load_inputs(path: str | Path, manifest: dict) -> np.ndarray:
    """Real-valued inputs from .npy -> codes with the model's input Quant."""
    return quantize_inputs(read_array(path), manifest, str(path))


def _framework_as_independent(framework: dict, n_data: int, n_random: int, cells: list[str]) -> dict:
    """For recurrent cells: the framework's outputs on --data are the independent executor."""
    d = IndependentReport("the training framework's outputs on --data (--expected)", samples=n_data,
                          outputs=framework["outputs"], equal=framework["outputs"] - framework["differing_outputs"],
                          differing_outputs=framework["differing_outputs"]).to_dict()
    if framework["differing_outputs"]:
        d["first_differing_node"] = f"the graph output (max |difference| {framework['max_abs_difference']:.3g})"
    return {**d, "unchecked_samples": n_random, "unchecked_reason": f"no ONNX executor runs {', '.join(cells)}"}


def _oracle_as_independent(oracle, name: str, graph, codes: np.ndarray, ref: np.ndarray) -> dict:
    """A caller's executor of the user's model (e.g. brevitas' forward of the trained module,
    for recurrent cells no ONNX executor runs) as the independent check, on every sample."""
    n = len(codes)
    x = graph.input_real(codes)
    theirs = np.asarray(oracle(x), dtype=np.float64).reshape(n, -1)
    ours = graph.real(graph.output, ref).reshape(n, -1)
    rep = IndependentReport(name, samples=n, outputs=int(ours.size))
    if theirs.shape != ours.shape:
        rep.differing_outputs = rep.outputs
        rep.first_differing_node = f"the graph output ({theirs.shape[1]} values per sample, {ours.shape[1]} compiled)"
        return rep.to_dict()
    differ = theirs != ours
    rep.equal, rep.differing_outputs = int((~differ).sum()), int(differ.sum())
    rep.first_differences = [{"sample": int(a), "output": int(b), "exact": float(ours[a, b]), "independent": float(theirs[a, b])}
                             for a, b in np.argwhere(differ)[:10]]
    if rep.differing_outputs:
        rep.first_differing_node = "the graph output"
    return rep.to_dict()


def verify(model_path: str | Path, prj: str | Path, samples: int = 1000, seed: int = 0, data: str | Path | None = None,
           user_samples: int = 100, progress=None, expected: str | Path | None = None,
           require_independent: bool = False, oracle=None, oracle_name: str | None = None,
           progress_total=None) -> VerifyReport:
    """``progress(k)``: k more samples (or block runs) of the C-simulation done, of the
    ``progress_total(n)`` announced before it runs.  ``oracle``: a caller's executor of the user's model (real inputs ``(N, *shape)`` -> real
    outputs), the independent check where no ONNX executor runs the model (recurrent cells)."""
    import onnx

    t0 = time.perf_counter()
    if expected is not None and data is None:
        raise InputDataError("--expected needs --data: the framework's outputs are compared on those inputs")
    manifest = read_manifest(prj)
    if manifest["model_sha256"] != sha256(model_path):
        raise ProjectError(f"{prj} was compiled from a different model than {model_path} (sha256 differs)")
    graph = compile_ir(model_path, manifest["input_quant"].get("declared_type"))
    codes = sample_codes(graph.values[graph.input], samples, seed=seed)
    n_random = len(codes)
    n_data = 0
    if data is not None:
        extra = load_inputs(data, manifest)
        n_data = len(extra)
        codes = np.concatenate([codes, extra])
    t1 = time.perf_counter()
    ref = OrtReference(reference_model(graph)).run(codes)
    t2 = time.perf_counter()
    sem = run_ir(graph, codes)
    t3 = time.perf_counter()
    sim = open_sim(prj, default_workers())
    sim.build(testbench=True)  # the library and, unpartitioned, the testbench from the same objects
    t4 = time.perf_counter()
    if progress_total is not None:
        progress_total(sim.progress_total(len(codes)))
    got = sim.run_codes(codes, progress=progress)
    t5 = time.perf_counter()
    tb_status, tb_line = sim.testbench()
    t6 = time.perf_counter()
    user = user_model_agreement(model_path, graph, codes[:user_samples], ref[:user_samples]) if user_samples else {}
    t7 = time.perf_counter()
    mismatches = int(np.sum(ref != got))
    framework = framework_agreement(expected, ref[n_random:], graph) if expected is not None else {}
    user_file = onnx.load(str(model_path))
    cells = sorted({n.op_type for n in user_file.graph.node if n.op_type in RECURRENT_OPS})
    if cells and oracle is not None:
        independent = _oracle_as_independent(oracle, oracle_name or "the caller's executor", graph, codes, ref)
    elif cells and framework:
        independent = _framework_as_independent(framework, n_data, n_random, cells)
    else:
        independent = independent_check(user_file, graph, codes, ref, unrunnable=cells).to_dict()
        if cells:
            independent["none"] += "; pass the training framework's outputs on --data with --expected"
    t8 = time.perf_counter()
    return VerifyReport(
        model=str(model_path), project=str(prj), samples=int(len(codes)), outputs=int(ref.size), mismatches=mismatches,
        first_mismatches=_first_mismatches(ref, got), random_samples=n_random, data_samples=n_data,
        reference_vs_integer_semantics_mismatches=int(np.sum(ref != sem)),
        testbench=f"{'passed' if tb_status == 0 else 'FAILED'}: {tb_line}", user_model=user, framework=framework,
        independent=independent, independent_required=require_independent,
        seconds={"frontend": round(t1 - t0, 3), "reference": round(t2 - t1, 3), "integer_semantics": round(t3 - t2, 3),
                 "csim_build": round(t4 - t3, 3), "csim_run": round(t5 - t4, 3), "testbench": round(t6 - t5, 3),
                 "user_model": round(t7 - t6, 3), "independent": round(t8 - t7, 3)},
    )
