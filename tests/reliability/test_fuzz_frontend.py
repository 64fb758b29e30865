"""Bounded fuzzing: mutated real exports either compile to a project that verifies, or are
refused with a one-line TesseraError; never an unhandled exception, a hang or a crash.  A
compiled mutant also equals the mutated file itself, run by the independent executor
(compiler/independent/; recurrent cells by compiler/independent/cells.py).

Mutations touch attributes, initializer values and shapes, graph edges and op types of
Brevitas/QONNX exports, window ops (dilations, a Pad of any mode before one), and the steps a
recurrent classifier reads (another step, a Slice of several).  Every case runs the frontend and the exact reference (reference ==
integer semantics); the first ``TESSERA_FUZZ_CSIM`` distinct compiled mutants also go
through ``tessera compile`` and a g++ C-simulation ``tessera verify``.  CI runs a bounded
number of cases; ``python bench/fuzz.py`` runs a longer campaign and writes
docs/results/fuzz.{json,md} (through ``TESSERA_FUZZ_REPORT``).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import signal
import time

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from tessera.compiler.errors import TesseraError
from tessera.compiler.pipeline import compile_ir
from tessera.compiler.independent import independent_check
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.samples import sample_codes

N_CASES = int(os.environ.get("TESSERA_FUZZ_CASES", "150"))
N_CSIM = int(os.environ.get("TESSERA_FUZZ_CSIM", "3"))
#: a case that takes longer than this is a hang
CASE_SECONDS = 120


def mutate(model: onnx.ModelProto, rng: np.random.Generator) -> tuple[onnx.ModelProto, str]:
    m = copy.deepcopy(model)
    g = m.graph
    kind = rng.integers(0, 8)
    if kind == 0 and g.initializer:  # scale/values: random multiplier (often not a power of two)
        init = g.initializer[rng.integers(len(g.initializer))]
        a = numpy_helper.to_array(init).astype(np.float64)
        factor = rng.choice([0.5, 2.0, 0.3, -1.0, 0.0, np.inf, np.nan, 1e30])
        init.CopyFrom(numpy_helper.from_array((a * factor).astype(numpy_helper.to_array(init).dtype), init.name))
        return m, f"scale initializer {init.name} by {factor}"
    if kind == 1 and g.initializer:  # wrong shape
        init = g.initializer[rng.integers(len(g.initializer))]
        a = numpy_helper.to_array(init).ravel()
        new = a[: max(0, a.size - 1)] if a.size > 1 else np.concatenate([a, a])
        init.CopyFrom(numpy_helper.from_array(new, init.name))
        return m, f"reshape initializer {init.name}"
    if kind == 7:
        return mutate_window(m, rng)
    node = g.node[rng.integers(len(g.node))]
    if kind == 2 and node.attribute:  # attribute value
        a = node.attribute[rng.integers(len(node.attribute))]
        if a.type == onnx.AttributeProto.INT:
            a.i = int(rng.choice([-1, 0, 1, 2, 3, 99]))
        elif a.type == onnx.AttributeProto.INTS and len(a.ints):
            a.ints[rng.integers(len(a.ints))] = int(rng.choice([-1, 0, 2, 5]))
        elif a.type == onnx.AttributeProto.STRING:
            a.s = rng.choice([b"CEIL", b"UP", b"bogus", b"FLOOR"])
        elif a.type == onnx.AttributeProto.FLOAT:
            a.f = float(rng.choice([0.3, -2.0, 0.0]))
        return m, f"attribute {a.name} of {node.name}"
    if kind == 3:  # rewire an input to another tensor
        names = [n.output[0] for n in g.node] + [i.name for i in g.initializer] + [g.input[0].name]
        if node.input:
            node.input[rng.integers(len(node.input))] = str(rng.choice(names))
        return m, f"rewire {node.name}"
    if kind == 4:  # change the op type
        node.op_type = str(rng.choice(["Relu", "Sigmoid", "Tanh", "Add", "MaxPool", "Softmax", "Quant", "Gemm"]))
        return m, f"op type of {node.name} -> {node.op_type}"
    if kind == 5:  # drop a node
        g.node.remove(node)
        return m, f"drop {node.name}"
    # bit width initializer to something odd
    for n in g.node:
        if n.op_type == "Quant" and len(n.input) == 4:
            for init in g.initializer:
                if init.name == n.input[3]:
                    init.CopyFrom(numpy_helper.from_array(np.array(rng.choice([0.0, 1.0, 2.5, 64.0, -3.0]), dtype=np.float32), init.name))
                    return m, f"bit width of {n.name}"
    return m, "no-op"




def mutate_window(m: onnx.ModelProto, rng: np.random.Generator) -> tuple[onnx.ModelProto, str]:
    """A window op (Conv, MaxPool, AveragePool) of ``m`` dilated, or read through a new Pad of
    mode constant, reflect or edge (wrap from opset 19): its own pads moved into the Pad (the
    shapes stay), or 0..2 on each side of each spatial axis where it has none."""
    g = m.graph
    nodes = [n for n in g.node if n.op_type in ("Conv", "MaxPool", "AveragePool")]
    kernels = [next((list(a.ints) for a in n.attribute if a.name == "kernel_shape"), None) for n in nodes]
    picks = [(n, k) for n, k in zip(nodes, kernels) if k]
    if not picks:
        return mutate_sequence(m, rng)
    node, kernel = picks[rng.integers(len(picks))]
    if rng.random() < 0.5:
        dilations = [int(rng.integers(1, 4)) for _ in kernel]
        for a in [a for a in node.attribute if a.name == "dilations"]:
            node.attribute.remove(a)
        node.attribute.append(helper.make_attribute("dilations", dilations))
        return m, f"dilations {dilations} of {node.name}"
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 13)
    mode = str(rng.choice(["constant", "reflect", "edge"] + (["wrap"] if opset >= 19 else [])))
    own = next((list(a.ints) for a in node.attribute if a.name == "pads"), [])
    if any(own):  # the node's own padding moved into the Pad: the shapes stay
        begins, ends = own[:len(kernel)], own[len(kernel):]
        node.attribute.remove(next(a for a in node.attribute if a.name == "pads"))
    else:
        begins, ends = ([int(rng.integers(0, 3)) for _ in kernel] for _ in range(2))
    name = f"{node.name}_pad"
    g.initializer.append(numpy_helper.from_array(np.array([0, 0, *begins, 0, 0, *ends], dtype=np.int64), f"{name}_pads"))
    g.node.insert(list(g.node).index(node), helper.make_node("Pad", [node.input[0], f"{name}_pads"], [name], name=name,
                                                             mode=mode))
    node.input[0] = name
    return m, f"pad {mode} before {node.name}"


def mutate_sequence(m: onnx.ModelProto, rng: np.random.Generator) -> tuple[onnx.ModelProto, str]:
    """The step a recurrent classifier reads (``Gather(y, -1, axis=1)`` of a cell's sequence)
    drawn again: another index (out of range included), or several steps -- a Slice of random
    bounds and step (negative and empty ones included), flattened, the classifier's weight tiled
    to read each step's features alike.  A model without such a Gather: unchanged, nothing drawn."""
    g = m.graph
    cells = {n.output[0] for n in g.node if n.op_type in ("QuantLSTMCell", "QuantGRUCell")}
    node = next((n for n in g.node if n.op_type == "Gather" and n.input[0] in cells), None)
    gemm = next((n for n in g.node if n.op_type == "Gemm"), None)
    if node is None or gemm is None:
        return m, "no-op"
    steps = g.input[0].type.tensor_type.shape.dim[1].dim_value
    if rng.random() < 0.4:
        index = int(rng.integers(-steps - 1, steps + 1))
        init = next(i for i in g.initializer if i.name == node.input[1])
        init.CopyFrom(numpy_helper.from_array(np.array(index, dtype=np.int64), init.name))
        return m, f"sequence step {index}"
    start, end = int(rng.integers(-steps, steps + 1)), int(rng.integers(-steps, steps + 2))
    step = int(rng.choice([1, 1, 2, 3, -1]))
    count = len(range(*slice(start, end, step).indices(steps)))
    name = f"{node.name}_slice"
    g.initializer.extend(numpy_helper.from_array(np.array([v], dtype=np.int64), f"{name}_{k}")
                         for k, v in (("starts", start), ("ends", end), ("axes", 1), ("steps", step)))
    at = list(g.node).index(node)
    g.node.remove(node)
    g.node.insert(at, helper.make_node("Flatten", [name], [node.output[0]], name=f"{name}_flatten", axis=1))
    g.node.insert(at, helper.make_node("Slice", [node.input[0], *(f"{name}_{k}" for k in ("starts", "ends", "axes",
                                                                                          "steps"))], [name], name=name))
    weight = next((n.input[0] for n in g.node if n.output[0] == gemm.input[1] and n.op_type == "Quant"), gemm.input[1])
    init = next(i for i in g.initializer if i.name == weight)
    init.CopyFrom(numpy_helper.from_array(np.tile(numpy_helper.to_array(init), (1, max(count, 1))), init.name))
    return m, f"sequence slice {start}:{end}:{step} ({count} steps)"


def _seeds(tmp_path, make_qonnx_mlp, brevitas_kit):
    import torch

    from tessera.models.train import export_model

    net3d, calibrated = brevitas_kit
    exported = export_model(calibrated(net3d(), (2, 4, 4, 4)), torch.randn(1, 2, 4, 4, 4), tmp_path / "net3d.onnx")
    return [onnx.load(str(make_qonnx_mlp(tmp_path / "mlp.onnx"))), onnx.load(str(exported))]


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


def _fuzz(seeds, rng, n_cases, n_samples, tmp_path, independent: bool = True) -> dict:
    """Mutate the seeds ``n_cases`` times: each case compiles and stays exact -- the reference
    equals the integer semantics and (``independent``) the mutated file itself run by the
    independent executor -- or is refused with a one-line TesseraError; anything else fails."""
    outcomes = {"cases": n_cases, "compiled": 0, "refused": 0, "refusals_by_error": {}, "compiled_paths": [],
                "mutations": {}, "independent_equal_outputs": 0, "independent_undecidable_outputs": 0}
    seen = set()
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for case in range(n_cases):
            model, what = mutate(seeds[case % len(seeds)], rng)
            kind = what.split(" ")[0]
            outcomes["mutations"][kind] = outcomes["mutations"].get(kind, 0) + 1
            path = tmp_path / f"case{case}.onnx"
            onnx.save(model, path)
            signal.alarm(CASE_SECONDS)
            try:
                try:
                    g = compile_ir(path)
                    reference = OrtReference(reference_model(g))
                except TesseraError as exc:
                    msg = str(exc)
                    assert msg and "\n" not in msg, (what, msg)
                    outcomes["refused"] += 1
                    name = type(exc).__name__
                    outcomes["refusals_by_error"][name] = outcomes["refusals_by_error"].get(name, 0) + 1
                    continue
                except _Hang:
                    pytest.fail(f"case {case} ({what}): no answer in {CASE_SECONDS} s (hang)")
                except Exception as exc:  # pragma: no cover - this is the failure the test looks for
                    pytest.fail(f"case {case} ({what}): unhandled {type(exc).__name__}: {exc}")
                codes = sample_codes(g.values[g.input], n_samples, seed=case)
                ref = reference.run(codes)
                assert np.array_equal(ref, run_ir(g, codes)), what
                if independent:
                    rep = independent_check(model, g, codes, ref)
                    assert rep.passed, (what, rep.line(), rep.to_dict())
                    outcomes["independent_equal_outputs"] += rep.equal
                    outcomes["independent_undecidable_outputs"] += rep.undecidable_outputs
            finally:
                signal.alarm(0)
            outcomes["compiled"] += 1
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest not in seen and what != "no-op":
                seen.add(digest)
                outcomes["compiled_paths"].append((str(path), what))
    finally:
        signal.signal(signal.SIGALRM, old)
    return outcomes


def _csim_verify(cases, n_csim, tmp_path) -> dict:
    """``tessera compile`` + ``tessera verify`` (g++ C-simulation) on up to ``n_csim``
    compiled mutants: each verifies with 0 mismatches, or compile refuses in one line."""
    from click.testing import CliRunner

    from tessera.cli import main

    out = {"verified": 0, "refused_by_compile": 0, "mismatches": 0, "cases": []}
    for i, (path, what) in enumerate(cases[:n_csim]):
        prj = tmp_path / f"prj{i}"
        r = CliRunner().invoke(main, ["compile", path, "-o", str(prj), "--tb-samples", "8"])
        if r.exit_code != 0:
            lines = [ln for ln in r.output.strip().splitlines() if ln.strip()]
            assert r.exit_code in (4, 6) and len(lines) == 1 and "Traceback" not in r.output, (what, r.output)
            out["refused_by_compile"] += 1
            out["cases"].append({"mutation": what, "outcome": "refused", "message": lines[0]})
            continue
        report = tmp_path / f"verify{i}.json"
        r = CliRunner().invoke(main, ["verify", path, str(prj), "--samples", "200", "--report", str(report)])
        assert r.exit_code == 0 and " 0 mismatches" in r.output, (what, r.output)
        out["verified"] += 1
        user = json.loads(report.read_text())["user_model"]
        out["cases"].append({"mutation": what, "outcome": "verified", "line": r.output.strip().splitlines()[-1],
                             "user_model": user})
    return out


_RESULTS: dict = {}


def _report(name: str, outcomes: dict) -> None:
    """Adds one campaign's outcomes to ``TESSERA_FUZZ_REPORT`` (bench/fuzz.py)."""
    target = os.environ.get("TESSERA_FUZZ_REPORT")
    if not target:
        return
    path = __import__("pathlib").Path(target)
    data = json.loads(path.read_text()) if path.is_file() else {}
    data[name] = {k: v for k, v in outcomes.items() if k != "compiled_paths"}
    path.write_text(json.dumps(data, indent=1))


def test_fuzz_frontend_never_crashes(tmp_path, make_qonnx_mlp, brevitas_kit):
    t0 = time.perf_counter()
    outcomes = _fuzz(_seeds(tmp_path, make_qonnx_mlp, brevitas_kit), np.random.default_rng(2024), N_CASES, 20, tmp_path)
    assert outcomes["compiled"] > 0 and outcomes["refused"] > 0, outcomes
    outcomes["seconds"] = round(time.perf_counter() - t0, 1)
    _RESULTS["feedforward"] = outcomes
    _report("feedforward", outcomes)


@pytest.mark.csim
def test_fuzz_compiled_mutants_verify_in_csim(tmp_path, make_qonnx_mlp, brevitas_kit):
    """The mutants the frontend accepted go all the way: compile, g++ C-simulation, verify."""
    outcomes = _RESULTS.get("feedforward") or _fuzz(_seeds(tmp_path, make_qonnx_mlp, brevitas_kit),
                                                    np.random.default_rng(2024), N_CASES, 20, tmp_path)
    assert len(outcomes["compiled_paths"]) >= min(N_CSIM, 3), outcomes["compiled_paths"]
    t0 = time.perf_counter()
    res = _csim_verify(outcomes["compiled_paths"], N_CSIM, tmp_path)
    assert res["verified"] >= 1, res
    res["seconds"] = round(time.perf_counter() - t0, 1)
    _report("feedforward_csim", res)


def _recurrent_seeds(tmp_path):
    import warnings

    import torch

    from tessera.models.rnn.export import export_forecaster, export_sentiment
    from tessera.models.rnn.networks import ConvLSTMForecaster, SentimentRNN

    torch.manual_seed(0)
    seeds = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for cell, weights in (("lstm", "ternary"), ("gru", "binary")):
            m = SentimentRNN(cell, weights, 20, embed_dim=3, hidden_size=3)
            m.train()
            for _ in range(55):  # past the activation quantizers' statistics phase
                m(torch.randint(1, 20, (4, 4))).sum().backward()
            seeds.append(onnx.load(str(export_sentiment(m.eval(), tmp_path / f"{cell}.onnx", seq_len=4))))
        f = ConvLSTMForecaster("quaternary", hidden_channels=2, kernel_size=3, patch=2, out_frames=2)
        f.train()
        for _ in range(55):
            f(torch.rand(2, 2, 1, 4, 4)).sum().backward()
        seeds.append(onnx.load(str(export_forecaster(f.eval(), tmp_path / "convlstm.onnx", in_frames=2, size=4))))
    return seeds


def test_fuzz_recurrent_frontend_never_crashes(tmp_path):
    """The same mutations on exported LSTM / GRU classifiers and a ConvLSTM frame predictor, and
    the steps the classifiers read drawn again (:func:`mutate_sequence`): each compiled mutant
    equals the mutated file run by the independent executor, its cells included."""
    t0 = time.perf_counter()
    outcomes = _fuzz(_recurrent_seeds(tmp_path), np.random.default_rng(7), max(30, N_CASES // 3), 8, tmp_path)
    assert outcomes["compiled"] > 0 and outcomes["refused"] > 0, outcomes
    outcomes["seconds"] = round(time.perf_counter() - t0, 1)
    _report("recurrent", outcomes)
