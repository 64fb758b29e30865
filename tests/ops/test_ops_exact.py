"""Each op's integer reference == its onnxruntime form, exactly, over the full input range."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.compiler.ir.types import FixedType
from tessera.compiler.exact.integer import F64_EXACT, exact_einsum, int8_limbs
from tessera.compiler.ops import conv, dense, flatten, leakyrelu, maxpool, quant, relu
from tessera.compiler.exact.rounding import div_round
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.samples import sample_codes


def saturation_free(model) -> None:
    """Every 8-bit integer kernel of the reference takes 7-bit signed weight limbs: pairs of
    products stay below 2**15, so CPUs that add them with int16 saturation (x86 without
    VNNI) compute them exactly too.  (A structural check: it holds on every CPU.)"""
    from onnx import numpy_helper

    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    kernels = [n for n in model.graph.node if n.op_type in ("MatMulInteger", "ConvInteger")]
    for n in kernels:
        w = inits[n.input[1]]
        assert w.dtype == np.int8 and -64 <= w.min() and w.max() <= 63, (n.name, w.dtype, w.min(), w.max())


def check_exact(graph, n=400, seed=0):
    codes = sample_codes(graph.values[graph.input], n, seed=seed)
    want = run_ir(graph, codes)
    model = reference_model(graph)
    saturation_free(model)
    got = OrtReference(model).run(codes)
    assert got.dtype == np.int64 and got.shape == want.shape
    mismatches = int(np.sum(got != want))
    assert mismatches == 0, f"{mismatches} mismatches, first at {np.argwhere(got != want)[:3].tolist()}"
    # Every produced code lies in the inferred range (no overflow possible by construction).
    out = graph.values[graph.output]
    assert want.min() >= out.lo and want.max() <= out.hi
    assert out.ftype.min_code <= out.lo and out.hi <= out.ftype.max_code
    return want


def rand_weights(rng, shape, bits):
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64)


@pytest.mark.parametrize("bits_x,signed_x,bits_w", [(8, True, 8), (8, False, 8), (4, True, 2), (12, True, 8), (8, True, 16)])
def test_dense_exact(make_graph, make_type, rng, bits_x, signed_x, bits_w):
    w = rand_weights(rng, (37, 11), bits_w)
    w[:, 0] = (1 << (bits_w - 1)) - 1  # a column at the extreme drives the accumulator to its bound
    b = rng.integers(-(1 << 14), 1 << 14, size=11)
    attrs = dense.Attrs(w, FixedType(bits_w, 6, True), b, FixedType(16, 9, True))
    g = make_graph(make_type(bits_x, 5, signed_x, (37,)), ("dense", attrs))
    y = check_exact(g)
    # The inferred bound is tight: the maximizing input of the widest column reaches it exactly.
    t, tin = g.values[g.output], g.values[g.input]
    assert t.ftype.frac == max(5 + 6, 9)
    per_col_max = [int(np.sum(np.where(w[:, j] >= 0, w[:, j] * tin.hi, w[:, j] * tin.lo))) * (1 << (11 - 5 - 6 + 0))
                   + int(b[j]) * (1 << (11 - 9)) for j in range(11)]
    j = int(np.argmax(per_col_max))
    x = np.where(w[:, j] >= 0, tin.hi, tin.lo)[None]
    assert run_ir(g, x)[0, j] == t.hi == max(per_col_max)


@pytest.mark.parametrize("rounding", ["ROUND", "FLOOR", "CEIL", "DOWN", "UP", "HALF_UP", "HALF_DOWN"])
@pytest.mark.parametrize("signed,narrow", [(True, False), (True, True), (False, False)])
@pytest.mark.parametrize("shift", [-2, 0, 3, 7])
def test_requant_exact(make_graph, make_type, rounding, signed, narrow, shift):
    attrs = quant.Attrs(FixedType(6, 8 - shift, signed), narrow, rounding)
    g = make_graph(make_type(14, 8, True, (64,)), ("requant", attrs))
    y = check_exact(g, n=300)
    assert y.min() >= attrs.qmin and y.max() <= attrs.qmax


def test_requant_ties_half_even():
    attrs = quant.Attrs(FixedType(8, 0, True), False, "ROUND")
    codes = np.array([-5, -3, -1, 1, 3, 5, 7])  # x/2 = -2.5 -1.5 -0.5 0.5 1.5 2.5 3.5
    assert quant.requantize(attrs, codes, 1).tolist() == [-2, -2, 0, 0, 2, 2, 4]
    assert quant.requantize(quant.Attrs(FixedType(8, 0, True), False, "HALF_UP"), codes, 1).tolist() == [-3, -2, -1, 1, 2, 3, 4]
    assert quant.requantize(quant.Attrs(FixedType(8, 0, True), False, "HALF_DOWN"), codes, 1).tolist() == [-2, -1, 0, 0, 1, 2, 3]


def test_requant_matches_qonnx_int_quant(rng):
    """Our integer requantization equals qonnx's float Quant on values where float64 is exact."""
    from qonnx.custom_op.general.intquant import int_quant

    x = rng.integers(-(1 << 13), 1 << 13, size=2000)
    for mode in ["ROUND", "FLOOR", "CEIL", "DOWN", "UP", "HALF_UP", "HALF_DOWN"]:
        for signed, narrow in [(True, False), (True, True), (False, False), (False, True)]:
            attrs = quant.Attrs(FixedType(5, 2, signed), narrow, mode)
            ours = quant.requantize(attrs, x, 6)
            theirs = int_quant(np.ldexp(x.astype(np.float64), -6), np.array(0.25), np.array(0.0), np.array(5.0), signed, narrow, mode)
            assert np.array_equal(np.ldexp(ours.astype(np.float64), -2), theirs), (mode, signed, narrow)


@pytest.mark.parametrize("stride,pads,cin", [(1, (1, 1, 1, 1), 1), (2, (0, 0, 0, 0), 3), (1, (0, 1, 2, 0), 16), (2, (1, 1, 1, 1), 3)])
@pytest.mark.parametrize("signed_x", [True, False])
def test_conv2d_exact(make_graph, make_type, rng, stride, pads, cin, signed_x):
    w = rand_weights(rng, (5, cin, 3, 3), 8)
    w[0] = 127
    attrs = conv.Attrs(w, FixedType(8, 7, True), rng.integers(-500, 500, size=5), FixedType(11, 10, True),
                         (stride, stride), pads)
    g = make_graph(make_type(8, 4, signed_x, (cin, 9, 7)), ("conv", attrs))
    check_exact(g, n=120)


def loop_conv2d(xp: np.ndarray, w: np.ndarray, out_hw: tuple[int, int], strides: tuple[int, int], group: int = 1):
    """A 2D convolution of the padded input ``xp`` by direct loops (output channel ``o`` reads
    the input channels of its group)."""
    f, cg, kh, kw = w.shape
    want = np.zeros((xp.shape[0], f, *out_hw), dtype=np.int64)
    for n in range(xp.shape[0]):
        for o in range(f):
            g = o // (f // group)
            for i in range(out_hw[0]):
                for j in range(out_hw[1]):
                    win = xp[n, g * cg:(g + 1) * cg, strides[0] * i:strides[0] * i + kh, strides[1] * j:strides[1] * j + kw]
                    want[n, o, i, j] = np.sum(win * w[o])
    return want


def test_conv2d_reference_is_a_real_convolution(rng):
    """The integer conv equals a direct loop definition (guards the einsum/window indexing)."""
    w = rand_weights(rng, (2, 3, 3, 2), 4)
    x = rng.integers(-8, 8, size=(2, 3, 6, 5))
    attrs = conv.Attrs(w, FixedType(4, 0, True), None, None, (2, 1), (1, 0, 0, 1))
    from tessera.compiler.ir.types import TensorType

    tin = TensorType((3, 6, 5), FixedType(4, 0, True), -8, 7)
    out = conv.OP.infer(attrs, [tin], "n")
    got = conv.OP.semantics(attrs, [x], [tin], out)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 1)))
    assert np.array_equal(got, loop_conv2d(xp, w, out.shape[1:], (2, 1)))


@pytest.mark.parametrize("kernel,stride", [((2, 2), (2, 2)), ((3, 3), (2, 2)), ((2, 3), (1, 2))])
def test_maxpool_exact(make_graph, make_type, kernel, stride):
    g = make_graph(make_type(8, 3, True, (3, 9, 8)), ("maxpool", maxpool.Attrs(kernel, stride)))
    check_exact(g, n=200)


def test_relu_flatten_exact(make_graph, make_type):
    g = make_graph(make_type(9, 2, True, (2, 3, 4)), ("relu", relu.Attrs()), ("flatten", flatten.Attrs()))
    y = check_exact(g, n=100)
    assert y.shape == (100, 24) and y.min() == 0
    assert g.values[g.output].ftype.signed is False


def test_wide_dense_activations_enter_as_radix_128_digits_and_stay_exact(make_graph, make_type, rng):
    """16-bit activations do not fit MatMulInteger's 8-bit operands: the reference splits them
    into radix-128 digits (Mod/Div), one integer kernel per digit, and must stay exact."""
    w = rand_weights(rng, (64, 4), 12)
    g = make_graph(make_type(16, 8, True, (64,)), ("dense", dense.Attrs(w, FixedType(12, 11, True), None, None)))
    ops = [n.op_type for n in reference_model(g).graph.node]
    assert "Mod" in ops and ops.count("MatMulInteger") >= 2 * 3  # digits x 7-bit weight limbs
    check_exact(g)


@pytest.mark.parametrize("stride,pads,cin,shape", [
    ((1, 1, 1), (1, 1, 1, 1, 1, 1), 1, (5, 6, 7)),
    ((2, 2, 2), (0, 0, 0, 0, 0, 0), 3, (7, 5, 6)),
    ((1, 2, 1), (0, 1, 0, 1, 0, 1), 16, (4, 5, 5)),
    ((1, 1, 1), (0, 0, 0, 1, 1, 1), 3, (5, 5, 5)),  # 'same' for an even kernel
])
def test_conv3d_exact(make_graph, make_type, rng, stride, pads, cin, shape):
    k = (2, 2, 2) if pads == (0, 0, 0, 1, 1, 1) else (3, 3, 3)
    w = rand_weights(rng, (4, cin, *k), 8)
    w[0] = -128
    attrs = conv.Attrs(w, FixedType(8, 7, True), rng.integers(-900, 900, size=4), FixedType(12, 11, True), stride, pads)
    g = make_graph(make_type(8, 5, False, (cin, *shape)), ("conv", attrs))
    check_exact(g, n=60)


@pytest.mark.parametrize("bits_w", [9, 14, 22])
def test_wide_conv_weights_use_int8_limbs_and_stay_exact(make_graph, make_type, rng, bits_w):
    """Per-channel weight scales put weights on one finer grid (wider codes); ConvInteger
    takes 8-bit operands, so the reference runs one pass per 7-bit limb, exactly."""
    w = rand_weights(rng, (3, 2, 3, 3, 3), bits_w)
    w[0, 0, 0] = -(1 << (bits_w - 1))  # the extreme codes
    w[1, 0, 0] = (1 << (bits_w - 1)) - 1
    attrs = conv.Attrs(w, FixedType(bits_w, bits_w, True), None, None, (1, 2, 1), (1, 0, 1, 1, 0, 1))
    g = make_graph(make_type(8, 5, True, (2, 5, 6, 4)), ("conv", attrs))
    ops = [n.op_type for n in reference_model(g).graph.node]
    assert ops.count("ConvInteger") == len(int8_limbs(w)) > 1
    check_exact(g, n=60)


@pytest.mark.parametrize("bits", [4, 20, 28])
def test_exact_einsum_equals_python_integers(rng, bits):
    """The integer semantics' contraction equals Python's unbounded integer sums on both
    sides of the float64 bound (4 bits: BLAS; 28 bits: int64, sums still inside int64), extreme codes included."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    a = rng.integers(lo, hi + 1, size=(3, 5, 40), dtype=np.int64)
    b = rng.integers(lo, hi + 1, size=(40, 6), dtype=np.int64)
    a[0, 0], b[:, 0] = lo, lo
    below = int(np.abs(a).max()) * int(np.abs(b).sum(dtype=object)) < F64_EXACT
    assert below == (bits < 28)
    want = np.einsum("nci,io->nco", a.astype(object), b.astype(object))
    got = exact_einsum("nci,io->nco", a, b)
    assert got.dtype == np.int64 and np.array_equal(got.astype(object), want)


def test_int8_limbs_recombine():
    w = np.array([-(1 << 40), -65, -64, -1, 0, 1, 63, 64, 127, 128, (1 << 40) - 1], dtype=np.int64)
    limbs = int8_limbs(w)
    assert all(lb.dtype == np.int8 and lb.min() >= -64 and lb.max() <= 63 for lb, _ in limbs)
    assert np.array_equal(sum(lb.astype(np.int64) << s for lb, s in limbs), w)


def test_conv3d_reference_is_a_real_convolution(rng):
    w = rand_weights(rng, (2, 2, 2, 3, 2), 4)
    x = rng.integers(-8, 8, size=(1, 2, 4, 5, 3))
    attrs = conv.Attrs(w, FixedType(4, 0, True), None, None, (1, 2, 1), (1, 0, 1, 0, 1, 0))
    from tessera.compiler.ir.types import TensorType

    tin = TensorType((2, 4, 5, 3), FixedType(4, 0, True), -8, 7)
    out = conv.OP.infer(attrs, [tin], "n")
    got = conv.OP.semantics(attrs, [x], [tin], out)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 1), (1, 0)))
    for o in range(2):
        for d in range(out.shape[1]):
            for h in range(out.shape[2]):
                for v in range(out.shape[3]):
                    assert got[0, o, d, h, v] == np.sum(xp[0, :, d : d + 2, 2 * h : 2 * h + 3, v : v + 2] * w[o])


@pytest.mark.parametrize("kernel,stride", [((2, 2, 2), (2, 2, 2)), ((3, 3, 3), (2, 2, 2)), ((2, 1, 3), (1, 1, 2))])
def test_maxpool3d_exact(make_graph, make_type, kernel, stride):
    g = make_graph(make_type(8, 3, True, (3, 7, 6, 8)), ("maxpool", maxpool.Attrs(kernel, stride)))
    check_exact(g, n=80)


@pytest.mark.parametrize("alpha", [0.125, 0.01, 0.3])
def test_leakyrelu_exact(make_graph, make_type, alpha):
    from tessera.compiler.ir.types import dyadic_codes

    code, frac = dyadic_codes(np.array([np.float64(np.float32(alpha))]))
    g = make_graph(make_type(8, 4, True, (5, 6)), ("leakyrelu", leakyrelu.Attrs(int(code[0]), int(frac))))
    y = check_exact(g, n=100)
    x = sample_codes(g.values[g.input], 100, seed=0)
    real = np.where(x >= 0, x, x * np.float64(np.float32(alpha))) * 2.0**-4
    assert np.array_equal(np.ldexp(y.astype(np.float64), -g.values[g.output].ftype.frac), real)


@pytest.mark.parametrize("rank", [2, 3])
def test_concat_add_exact(make_dag, make_type, skip_block, rng, rank):
    shape = (2, 5, 4, 3)[: rank + 1]
    g = make_dag(make_type(8, 3, True, shape), skip_block(rng, 2, rank))
    y = check_exact(g, n=80)
    t = g.values["cat"]
    assert t.shape == (5, *shape[1:]) and t.ftype.frac == 6
    assert y.shape == (80, 5, *shape[1:])


@pytest.mark.parametrize("k,s,pads", [((2, 2, 2), (2, 2, 2), (0,) * 6), ((3, 3, 3), (2, 2, 2), (1, 1, 1, 1, 1, 1)),
                                      ((3, 2, 3), (1, 2, 2), (0, 0, 1, 1, 0, 0)), ((2, 2), (2, 2), (0,) * 4)])
def test_convtranspose_exact(make_graph, make_type, rng, k, s, pads):
    from tessera.compiler.ops import convtranspose

    n = len(k)
    w = rand_weights(rng, (3, 4, *k), 8)
    w[:, 0] = 127
    attrs = convtranspose.Attrs(w, FixedType(8, 7, True), rng.integers(-300, 300, size=4), FixedType(10, 12, True), s, pads)
    g = make_graph(make_type(8, 4, True, (3, *(4, 3, 5)[:n])), ("convtranspose", attrs))
    check_exact(g, n=60)


def test_convtranspose_reference_is_a_real_transposed_convolution(rng):
    """Against the definition: scatter each input times the kernel into the output."""
    from tessera.compiler.ir.types import TensorType
    from tessera.compiler.ops import convtranspose

    w = rand_weights(rng, (2, 3, 3, 2), 4)
    x = rng.integers(-8, 8, size=(1, 2, 3, 4))
    attrs = convtranspose.Attrs(w, FixedType(4, 0, True), None, None, (2, 1), (1, 0, 0, 1))
    tin = TensorType((2, 3, 4), FixedType(4, 0, True), -8, 7)
    out = convtranspose.OP.infer(attrs, [tin], "n")
    got = convtranspose.OP.semantics(attrs, [x], [tin], out)
    full = np.zeros((3, (3 - 1) * 2 + 3, (4 - 1) + 2), dtype=np.int64)
    for c in range(2):
        for i in range(3):
            for j in range(4):
                full[:, 2 * i : 2 * i + 3, j : j + 2] += x[0, c, i, j] * w[c]
    assert np.array_equal(got[0], full[:, 1:, :-1])


@pytest.mark.parametrize("function", ["sigmoid", "tanh"])
@pytest.mark.parametrize("signed_out,narrow", [(True, False), (False, False), (True, True)])
def test_lut_exact(make_graph, make_type, function, signed_out, narrow):
    from tessera.compiler.ops import lut

    attrs = lut.Attrs(function, quant.Attrs(FixedType(8, 7 if signed_out else 8, signed_out), narrow, "ROUND"))
    g = make_graph(make_type(10, 6, True, (40,)), ("lut", attrs))
    y = check_exact(g, n=300)
    x = sample_codes(g.values[g.input], 300, seed=0)
    real = lut.FUNCTIONS[function](np.ldexp(x.astype(np.float64), -6))
    assert np.array_equal(y, quant.quantize_float(attrs.out, real))
    assert len(lut.table(attrs, g.values[g.input])) == 1024


def test_lut_refuses_huge_domains(make_graph, make_type):
    from tessera.compiler.errors import UnsupportedModelError
    from tessera.compiler.ops import lut

    with pytest.raises(UnsupportedModelError, match="too large"):
        make_graph(make_type(20, 6, True, (4,)), ("lut", lut.Attrs("tanh", quant.Attrs(FixedType(8, 7, True), False, "ROUND"))))


@pytest.mark.parametrize("kernel,stride,pads,cip", [
    ((3, 3, 3), (2, 2, 2), (1, 1, 1, 1, 1, 1), False),  # paper-1 CosmoFlow pooling
    ((3, 3, 3), (2, 2, 2), (1, 1, 1, 1, 1, 1), True),
    ((2, 2, 2), (2, 2, 2), (0,) * 6, False),
    ((3, 3), (1, 2), (1, 0, 1, 0), False),
])
@pytest.mark.parametrize("rounding,fy", [("ROUND", 5), ("FLOOR", 3), ("HALF_UP", 7), ("DOWN", 2)])
def test_avgpool_exact(make_graph, make_type, kernel, stride, pads, cip, rounding, fy):
    from fractions import Fraction

    from tessera.compiler.ops import avgpool

    n = len(kernel)
    attrs = avgpool.Attrs(kernel, stride, pads, cip, quant.Attrs(FixedType(7, fy, True), False, rounding))
    g = make_graph(make_type(8, 4, True, (2, *(5, 6, 7)[:n])), ("avgpool", attrs))
    y = check_exact(g, n=50)
    # one output against the rational definition with Python fractions
    x = sample_codes(g.values[g.input], 50, seed=0)
    pos = (0,) * n  # the corner window: padding matters here
    sl = tuple(slice(max(0, -pads[i]), kernel[i] - pads[i]) for i in range(n))
    window = x[(7, 1) + sl]
    count = int(np.prod(kernel)) if cip else window.size
    exact = Fraction(int(window.sum()) * 2 ** (fy - 4) if fy >= 4 else int(window.sum()), count * (2 ** (4 - fy) if fy < 4 else 1))
    assert y[(7, 1) + pos] == int(np.clip(div_round(np.array([exact.numerator]), exact.denominator, rounding)[0], -64, 63))


@pytest.mark.parametrize("mode", ["ROUND", "FLOOR", "CEIL", "DOWN", "UP", "HALF_UP", "HALF_DOWN"])
def test_div_round_matches_the_rational_definition(mode):
    import math
    from fractions import Fraction

    def definition(f: Fraction) -> int:
        fl = math.floor(f)
        frac = f - fl
        if mode == "FLOOR":
            return fl
        if mode == "CEIL":
            return math.ceil(f)
        if mode == "DOWN":
            return math.trunc(f)
        if mode == "UP":
            return -math.floor(-f) if f > 0 else math.floor(f)
        if frac != Fraction(1, 2):
            return fl + (frac > Fraction(1, 2))
        return {"ROUND": fl + (fl % 2), "HALF_UP": fl + (f > 0), "HALF_DOWN": fl + (f < 0)}[mode]

    nums = np.arange(-60, 61)
    for den in (1, 2, 3, 4, 6, 27):
        got = div_round(nums, den, mode)
        assert got.tolist() == [definition(Fraction(int(v), den)) for v in nums], den


@pytest.mark.parametrize("factors,shape", [((2, 2, 2), (3, 2, 3, 4)), ((1, 2, 3), (2, 3, 2, 2)), ((2, 2), (3, 4, 5))])
def test_upsample_exact(make_graph, make_type, factors, shape):
    from tessera.compiler.ops import upsample

    g = make_graph(make_type(8, 3, True, shape), ("upsample", upsample.Attrs(factors)))
    y = check_exact(g, n=40)
    assert y.shape[2:] == tuple(s * f for s, f in zip(shape[1:], factors))


@pytest.mark.parametrize("starts,sizes,shape", [((1, 0, 2), (2, 3, 1), (3, 4, 3, 5)), ((0, 1), (4, 2), (2, 4, 5)),
                                               ((0, 0, 0), (2, 3, 4), (1, 2, 3, 4))])
def test_crop_exact(make_graph, make_type, starts, sizes, shape):
    from tessera.compiler.ops import crop

    g = make_graph(make_type(8, 3, True, shape), ("crop", crop.Attrs(starts, sizes)))
    y = check_exact(g, n=40)
    assert y.shape[2:] == sizes


def test_crop_outside_is_refused(make_graph, make_type):
    from tessera.compiler.errors import UnsupportedModelError
    from tessera.compiler.ops import crop

    with pytest.raises(UnsupportedModelError, match="crop .* outside input"):
        make_graph(make_type(8, 3, True, (2, 4, 4, 4)), ("crop", crop.Attrs((3, 0, 0), (2, 4, 4))))


def test_transpose_exact_and_relabel(make_graph, make_type):
    """Swap of the first two sample axes; the HLS index map of the output addresses the same
    buffer as the input's."""
    from tessera.compiler.lower.hls4ml_lower import channels_last_perm, sequence_perm
    from tessera.compiler.ops import transpose

    g = make_graph(make_type(7, 3, True, (3, 4, 2, 5)), ("transpose", transpose.Attrs()))
    y = check_exact(g, n=50)
    assert y.shape == (50, 4, 3, 2, 5)
    seq = sequence_perm((3, 4, 2, 5))  # input stored (T, H, W, C) with T=3, C=4
    assert np.array_equal(transpose.relabel(seq, (3, 4, 2, 5)), channels_last_perm((4, 3, 2, 5)))
