"""Property: random small QONNX graphs of the supported ops (input quantizers per tensor or per
channel, the input sometimes quantized twice and joined again, windows (dilated pools, a Pad of
any mode before a window op), averages rounded by a Quant or a QONNX Trunc, BatchNorm on codes,
tabulated nonlinearities, two branches joined by Max / Min / Sub / Add, Slice and Split,
ReduceMean, LeakyRelu / PRelu / Resize / tables sometimes ended by a 16-bit Quant of a float
scale; sometimes two inputs, sometimes two outputs), with random attributes (modelled
and unmodelled values, odd shapes), are refused by the compiler in one line, or compile to a
design that equals the user's file itself -- run by the independent executor in float64 --
on every sample.  A few C-simulate too.

CI runs ``TESSERA_ORACLE_CASES`` (default 200) cases; ``python bench/fuzz.py`` runs thousands
and writes the counts into docs/results/fuzz.md (``TESSERA_FUZZ_REPORT``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tessera.compiler import api
from tessera.compiler.errors import TesseraError
from tessera.compiler.independent import independent_check
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.samples import input_samples

N_CASES = int(os.environ.get("TESSERA_ORACLE_CASES", "200"))
N_CSIM = int(os.environ.get("TESSERA_ORACLE_CSIM", "2"))
MODES = ["ROUND", "HALF_EVEN", "FLOOR", "CEIL", "DOWN", "UP", "HALF_UP", "HALF_DOWN"]
AUTO_PADS = ["NOTSET", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"]


class _Builder:
    def __init__(self, rng: np.random.Generator):
        self.rng, self.nodes, self.inits, self.n = rng, [], [], 0

    def name(self, hint: str) -> str:
        self.n += 1
        return f"{hint}_{self.n}"

    def const(self, value, hint="c") -> str:
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
        return name

    def ints(self, values, hint="i") -> str:
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(values, dtype=np.int64), name))
        return name

    def node(self, op, inputs, **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def quant(self, x: str, bits=None, signed=None, scale=None) -> str:
        r = self.rng
        bits = int(bits or r.integers(3, 9))
        signed = int(r.integers(0, 2)) if signed is None else signed
        scale = 2.0 ** -int(r.integers(1, 6)) if scale is None else scale
        out = self.name("quant")
        self.nodes.append(helper.make_node(
            "Quant", [x, self.const(scale), self.const(0.0), self.const(float(bits))], [out],
            domain="qonnx.custom_op.general", name=out, signed=signed, narrow=int(r.random() < 0.15),
            rounding_mode=str(r.choice(MODES))))
        return out

    def trunc(self, x: str) -> str:
        """A QONNX Trunc (v2, 6 inputs) of ``x``: a power-of-two scale, an output scale 1/2 to 8
        times it (1: it drops no bits), zero point 0 (sometimes 1/2), a random rounding mode."""
        r = self.rng
        scale = 2.0 ** -int(r.integers(1, 6))
        out = self.name("trunc")
        self.nodes.append(helper.make_node(
            "Trunc", [x, self.const(scale), self.const(0.5 if r.random() < 0.1 else 0.0), self.const(16.0),
                      self.const(scale * 2.0 ** int(r.integers(-1, 4))), self.const(float(r.integers(3, 9)))], [out],
            domain="qonnx.custom_op.general", name=out, signed=int(r.integers(0, 2)), narrow=int(r.random() < 0.15),
            rounding_mode=str(r.choice(MODES))))
        return out

    def rounded(self, x: str) -> str:
        """``x`` (an average) rounded by a Quant, or a third of the time by a Trunc."""
        return self.trunc(x) if self.rng.random() < 0.35 else self.quant(x)

    def maybe_wide(self, x: str, chance: float = 0.3) -> str:
        """Sometimes a 16-bit Quant of a float scale right after ``x`` (a piecewise requantization
        or a 16-bit table); else ``x`` itself."""
        r = self.rng
        if r.random() >= chance:
            return x
        return self.quant(x, bits=16, scale=float(np.float32(r.uniform(2.0 ** -12, 2.0 ** -5))))

    def input_quant(self, x: str, shape: tuple[int, int, int]) -> str:
        """The graph input's Quant: one power-of-two scale with zero 0, or (a third of the time)
        float scales and zero points (integer or real) per channel, of shape (1, C, 1, 1) or
        (C, 1, 1), or rarely per element of the (C, H, W) input (refused where they vary over
        the positions)."""
        r, c = self.rng, shape[0]
        kind = r.random()
        if kind >= 0.35:
            return self.quant(x, signed=1)
        form = [(1, *shape), (1, c, 1, 1), (c, 1, 1)][int(r.integers(1, 3)) if kind >= 0.05 else 0]
        bits, signed = int(r.integers(3, 9)), int(r.integers(0, 2))
        zero = r.integers(-2, 3, form) if r.random() < 0.6 else r.uniform(-1, 1, form)
        out = self.name("quant")
        scale, zero = self.const(r.uniform(2.0 ** -5, 2.0 ** -1, form)), self.const(zero if signed else np.abs(zero))
        self.nodes.append(helper.make_node(
            "Quant", [x, scale, zero, self.const(float(bits))], [out], domain="qonnx.custom_op.general", name=out,
            signed=signed, narrow=int(r.random() < 0.15), rounding_mode=str(r.choice(MODES))))
        return out


def _pads(r, n: int, k) -> dict:
    auto = str(r.choice(AUTO_PADS))
    if auto != "NOTSET":
        return {"auto_pad": auto}
    return {"pads": [int(r.integers(0, kk)) for kk in k] * 2} if r.random() < 0.6 else {}


def _dilations(r) -> dict:
    return {"dilations": [int(r.integers(1, 4)), int(r.integers(1, 4))]}


#: Pad modes: a constant zero pad folds into a Conv or AveragePool (refused before a MaxPool),
#: reflect and edge copy codes, wrap (opset 19) is refused
PAD_MODES = ["constant", "reflect", "edge"]


def _pad(b: "_Builder", r: np.random.Generator, x: str, opset: int) -> str:
    """A Pad of the spatial axes (0..2 each side; reflect refused where a pad reaches the length)."""
    mode = str(r.choice(PAD_MODES + (["wrap"] if opset >= 19 else [])))
    pads = [0, 0, *(int(r.integers(0, 3)) for _ in range(2)), 0, 0, *(int(r.integers(0, 3)) for _ in range(2))]
    return b.node("Pad", [x, b.ints(pads, "pads")], mode=mode)


TABLES = {"Sigmoid": {}, "Tanh": {}, "HardSigmoid": {"alpha": 0.3}, "HardSwish": {}, "Elu": {}, "Selu": {},
          "Softsign": {}, "Softplus": {}, "ThresholdedRelu": {"alpha": 0.25}}


def _branches(b: _Builder, r: np.random.Generator, x: str, c: int) -> tuple[str, int]:
    """Two 1x1 convolutions of ``x``, each quantized on its own grid, joined by Max, Min, Sub or
    Add (quantized)."""
    f = int(r.integers(1, 4))
    arms = [b.quant(b.node("Conv", [x, b.quant(b.const(r.integers(-8, 8, size=(f, c, 1, 1)) * 2.0**-3), bits=5,
                                                    signed=1)], kernel_shape=[1, 1])) for _ in range(2)]
    return b.quant(b.node(str(r.choice(["Max", "Min", "Sub", "Add"])), arms)), f


def _curve(b: _Builder, r: np.random.Generator, x: str, c: int, opset: int) -> tuple[str, int]:
    """A nonlinearity of a 1x1 convolution's accumulator scaled by a float constant (rising or
    falling), sometimes bent by a LeakyRelu, then its Quant: a staircase, or refused where the
    function is not monotone over the accumulator's range."""
    f = int(r.integers(1, 4))
    acc = b.node("Conv", [x, b.quant(b.const(r.integers(-8, 8, size=(f, c, 1, 1)) * 2.0**-3), bits=5, signed=1)],
                 kernel_shape=[1, 1])
    v = b.node("Mul", [acc, b.const(np.float32(r.choice([-1, 1]) * r.uniform(0.05, 1.5)))])
    if r.random() < 0.3:
        v = b.node("LeakyRelu", [v], alpha=float(r.choice([0.125, 0.25, 0.1])))
    name = str(r.choice([t for t in TABLES if t != "HardSwish" or opset >= 14]))
    return b.quant(b.node(name, [v], **TABLES[name])), f


def _pieces(b: _Builder, r: np.random.Generator, x: str, c: int) -> tuple[str, int]:
    """A Slice of the channels or of a spatial axis, or a Split of the channels in two joined by
    Max / Min / Sub."""
    if r.random() < 0.5 and c > 1:
        (h1, h2) = (b.name("half"), b.name("half"))
        sizes = [c // 2, c - c // 2]
        ins = [x, b.ints(sizes, "sizes")] if r.random() < 0.5 else [x]
        b.nodes.append(helper.make_node("Split", ins, [h1, h2], name=b.name("split"), axis=1))
        return b.node(str(r.choice(["Max", "Min", "Sub"])), [h1, h2]), c - c // 2
    axis = int(r.choice([1, 2, 3])) if c > 1 else int(r.choice([2, 3]))
    start, end = int(r.integers(0, 2)), int(r.choice([-1, 2, 3, 100]))
    box = [b.ints([v], n) for n, v in (("start", start), ("end", end), ("axis", axis))]
    kept = max(0, min(end if end >= 0 else c + end, c) - start) if axis == 1 else c
    return b.node("Slice", [x, *box]), kept


def random_model(r: np.random.Generator, path: Path) -> Path:
    """A random graph: Quant(x) (per tensor or per channel; sometimes a second Quant of x or
    of a second input, Quant(x2), joined with it) -> 1..3 layers -> Quant, and sometimes a
    second output; opset 13 or 19."""
    b = _Builder(r)
    opset = int(r.choice([13, 19]))
    c, h, w = int(r.integers(1, 4)), int(r.integers(3, 9)), int(r.integers(3, 9))
    c_in = c
    x = b.input_quant("x", (c, h, w))
    inputs = ["x"]
    if r.random() < 0.12:  # the input quantized a second time, differently, the branches joined again
        join = str(r.choice(["Add", "Sub", "Max", "Min", "Concat"]))
        again = b.quant("x", signed=int(r.integers(0, 2)))
        x = b.quant(b.node(join, [x, again], **({"axis": 1} if join == "Concat" else {})))
        c = 2 * c if join == "Concat" else c
    elif r.random() < 0.25:  # a second input on its own grid, joined with the first
        inputs.append("x2")
        x = b.quant(b.node(str(r.choice(["Add", "Sub", "Max", "Min"])), [x, b.quant("x2", signed=int(r.integers(0, 2)))]))
    outputs = ["y"]
    if r.random() < 0.25:  # a second output beside the last layer's
        outputs.append("y2")
        b.nodes.append(helper.make_node("Relu", [x], ["y2_r"], name=b.name("relu")))
        b.quant("y2_r")
        b.nodes[-1].output[0] = "y2"
    for _ in range(int(r.integers(1, 4))):
        k = [int(r.integers(1, 4)), int(r.integers(1, 4))]
        s = [int(r.integers(1, 3)), int(r.integers(1, 3))]
        op = r.choice(["conv", "maxpool", "avgpool", "relu", "leakyrelu", "resize", "gap", "batchnorm", "table",
                       "branches", "pieces", "mean", "curve", "pad"])
        if op == "batchnorm":
            stats = [b.const(r.uniform(lo, hi, c)) for lo, hi in ((0.5, 2), (-1, 1), (-1, 1), (0.1, 2))]
            x = b.quant(b.node("BatchNormalization", [x, *stats], epsilon=1e-5))
            continue
        if op == "table":
            name = str(r.choice([t for t in TABLES if t != "HardSwish" or opset >= 14]))
            table = b.node(name, [x], **TABLES[name])
            wide = b.maybe_wide(table)
            x = wide if wide != table else b.quant(table)
            continue
        if op == "branches":
            x, c = _branches(b, r, x, c)
            continue
        if op == "curve":
            x, c = _curve(b, r, x, c, opset)
            continue
        if op == "pieces":
            x, c = _pieces(b, r, x, c)
            continue
        if op == "mean":
            keep = int(r.integers(0, 2))
            axes = {"axes": [2, 3]} if opset < 18 else {}
            ins = [x] if opset < 18 else [x, b.ints([2, 3], "axes")]
            x = b.quant(b.node("ReduceMean", ins, keepdims=keep, **axes))
            break
        if op == "pad":  # a Pad of any mode, then a window op reading it
            x = _pad(b, r, x, opset)
            op = str(r.choice(["conv", "maxpool", "avgpool"]))
        if op == "conv":
            group = c if c > 1 and r.random() < 0.2 else 1  # depthwise (multiplier 1 or 2)
            f = c * int(r.integers(1, 3)) if group > 1 else int(r.integers(1, 4))
            wq = b.quant(b.const(r.integers(-8, 8, size=(f, c // group, *k)) * 2.0**-3), bits=5, signed=1)
            extra = {"dilations": [2, 2]} if r.random() < 0.1 else {}
            extra.update({"group": group} if group > 1 else {})
            x = b.quant(b.node("Conv", [x, wq], kernel_shape=k, strides=s, **_pads(r, 2, k), **extra))
            c = f
        elif op == "maxpool":
            extra = {"ceil_mode": 1} if r.random() < 0.1 else {}
            extra.update(_dilations(r) if r.random() < 0.25 else {})
            x = b.node("MaxPool", [x], kernel_shape=k, strides=s, **_pads(r, 2, k), **extra)
        elif op == "avgpool":
            extra = _dilations(r) if opset >= 19 and r.random() < 0.3 else {}  # AveragePool's since opset 19
            x = b.rounded(b.node("AveragePool", [x], kernel_shape=k, strides=s, count_include_pad=int(r.integers(0, 2)),
                                 **_pads(r, 2, k), **extra))
        elif op == "relu":
            x = b.node("Relu", [x])
        elif op == "leakyrelu":  # or a PRelu of a slope per channel; sometimes a 16-bit Quant after either
            if r.random() < 0.3:
                x = b.node("PRelu", [x, b.const(r.choice([-0.3, 0.1, 0.2, 0.25, 0.7], size=(c, 1, 1)))])
            else:
                x = b.node("LeakyRelu", [x], alpha=float(r.choice([0.125, 0.25, 0.1])))
            x = b.maybe_wide(x)
        elif op == "resize":
            attrs = {"mode": "nearest" if r.random() < 0.7 else str(r.choice(["linear", "linear", "cubic"]))}  # cubic: refused
            if r.random() < 0.7:
                attrs["coordinate_transformation_mode"] = str(r.choice(
                    ["half_pixel", "asymmetric", "pytorch_half_pixel", "align_corners", "half_pixel_symmetric"]))
            if r.random() < 0.7:
                attrs["nearest_mode"] = str(r.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]))
            scale = lambda: float(r.choice([1, 2, 3, 0.5, 0.75, 1.5, 2.4]))  # noqa: E731 - fractional too
            x = b.maybe_wide(b.node("Resize", [x, "", b.const([1, 1, scale(), scale()])], **attrs))
        else:
            x = b.rounded(b.node("GlobalAveragePool", [x]))
            break
    b.quant(x)
    b.nodes[-1].output[0] = "y"
    ins = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, c_in, h, w]) for name in inputs]
    outs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["n", "c", "h", "w"]) for name in outputs]
    g = helper.make_graph(b.nodes, "random", ins, outs, b.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("qonnx.custom_op.general", 1)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def _cases(n: int, tmp_path: Path, seed: int = 11) -> dict:
    out = {"cases": n, "refused": 0, "compiled": 0, "several_inputs": 0, "several_outputs": 0, "outputs": 0, "equal": 0,
           "undecidable": 0, "refusals": {}, "compiled_paths": []}
    r = np.random.default_rng(seed)
    for i in range(n):
        path = random_model(r, tmp_path / f"case{i}.onnx")
        try:
            g = api.load_model(path)
            ref_model = reference_model(g)
        except TesseraError as exc:
            msg = str(exc)
            assert msg and "\n" not in msg and "Traceback" not in msg, msg
            out["refused"] += 1
            key = type(exc).__name__
            out["refusals"][key] = out["refusals"].get(key, 0) + 1
            continue
        codes = input_samples(g, 40, seed=i)
        ref = OrtReference(ref_model).run(codes)
        rep = independent_check(onnx.load(path), g, codes, ref)
        assert rep.passed, (i, rep.line(), rep.to_dict(), [(n.op_type, {a.name: helper.get_attribute_value(a) for a in n.attribute})
                                                           for n in onnx.load(path).graph.node])
        out["compiled"] += 1
        out["several_inputs"] += len(g.inputs) > 1
        out["several_outputs"] += len(g.outputs) > 1
        out["outputs"] += rep.outputs
        out["equal"] += rep.equal
        out["undecidable"] += rep.undecidable_outputs
        out["compiled_paths"].append(str(path))
    return out


_RESULTS: dict = {}


def _report(name: str, outcomes: dict) -> None:
    target = os.environ.get("TESSERA_FUZZ_REPORT")
    if target:
        path = Path(target)
        data = json.loads(path.read_text()) if path.is_file() else {}
        data[name] = {k: v for k, v in outcomes.items() if k != "compiled_paths"}
        path.write_text(json.dumps(data, indent=1))


def test_random_graphs_are_refused_or_equal_the_users_model(tmp_path):
    t0 = time.perf_counter()
    out = _cases(N_CASES, tmp_path)
    assert out["compiled"] > N_CASES // 10 and out["refused"] > N_CASES // 10, out  # both outcomes exercised
    assert out["several_inputs"] and out["several_outputs"], out  # and designs of several ports
    out["seconds"] = round(time.perf_counter() - t0, 1)
    _RESULTS["oracle"] = out
    _report("oracle_property", out)


@pytest.mark.csim
def test_random_graphs_csimulate_like_the_users_model(tmp_path):
    """The first compiled random graphs all the way, in io_parallel and io_stream alternately:
    compile (which may still refuse in one line what only the HLS lowering cannot build), g++
    C-simulation, verify (which includes the independent check)."""
    out = _RESULTS.get("oracle") or _cases(min(N_CASES, 60), tmp_path)
    t0, outputs, verified, refused = time.perf_counter(), 0, 0, 0
    for i, path in enumerate(out["compiled_paths"]):
        if verified == N_CSIM:
            break
        io = ("io_parallel", "io_stream")[verified % 2]  # both io types, alternately
        try:
            prj = api.compile_model(path, tmp_path / f"prj{i}", api.CompileOptions(io_type=io, tb_samples=8)).project
        except TesseraError as exc:
            assert str(exc) and "\n" not in str(exc), str(exc)
            refused += 1
            continue
        rep = api.verify_project(path, prj, api.VerifyOptions(samples=100, user_samples=0))
        assert rep.passed and rep.mismatches == 0, (path, io, rep.independent.line(), rep.to_dict())
        outputs += rep.outputs
        verified += 1
    # hundreds of graphs compile: a refusal by the HLS lowering may skip a few, never all
    assert verified == N_CSIM, (verified, refused, len(out["compiled_paths"]))
    _report("oracle_property_csim", {"verified": verified, "refused_by_compile": refused, "outputs": outputs,
                                     "seconds": round(time.perf_counter() - t0, 1)})
