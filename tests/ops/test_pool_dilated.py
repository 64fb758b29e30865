"""Dilated MaxPool (1D, 2D, 3D) and dilated AveragePool + Quant (2D, 3D), exactly (issue 51).

A dilated window reads ``k`` taps ``d`` apart.  The integer semantics equal the exact reference
(onnxruntime's dilated ``MaxPool``; the average's window sums as int64 slices), onnxruntime's
own dilated ``AveragePool`` of opset 19 (its window sums and valid counts, recovered exactly
from small integer codes), and a loop written from the ONNX definition, on full-range codes;
Tessera's pooling kernels (``hls_templates/pool3d``, ``hls_templates/avgpool``) C-simulate
equal in both io types.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.exact.rounding import div_round
from tessera.compiler.ir.types import FixedType, TensorType
from tessera.compiler.ops import avgpool, maxpool, quant
from tessera.compiler.samples import sample_codes

from .test_ops_exact import check_exact

MAX_CASES = [  # shape, kernel, strides, pads, dilations
    ((2, 13), (3,), (1,), (), (2,)),
    ((3, 14), (2,), (3,), (2, 1), (4,)),
    ((2, 9, 10), (2, 3), (1, 2), (), (3, 2)),
    ((2, 8, 9), (3, 2), (2, 1), (2, 1, 1, 2), (2, 3)),
    ((2, 6, 7, 8), (2, 2, 2), (1, 2, 1), (1, 0, 1, 0, 1, 1), (2, 3, 2)),
]
AVG_CASES = [  # shape, kernel, strides, pads, dilations, count_include_pad
    ((2, 9, 10), (2, 3), (1, 2), (0, 0, 0, 0), (3, 2), False),
    ((2, 8, 9), (3, 2), (2, 1), (2, 1, 1, 1), (2, 3), False),
    ((2, 8, 9), (3, 2), (2, 1), (2, 1, 1, 1), (2, 3), True),
    ((2, 7, 9), (2, 2), (1, 2), (3, 2, 1, 2), (3, 3), False),  # pads as large as the kernel
    ((2, 6, 7, 8), (2, 2, 2), (1, 2, 1), (1, 0, 1, 0, 1, 1), (2, 3, 2), False),
]


def taps_by_definition(x: np.ndarray, kernel, strides, pads, dilations, out_spatial):
    """Per output: the codes of its taps inside the input (a list per window), by the ONNX formula
    ``in = out * stride - pad_begin + tap * dilation``."""
    n = len(kernel)
    found = {}
    for o in np.ndindex(*out_spatial):
        taps = []
        for t in np.ndindex(*kernel):
            i = tuple(o[a] * strides[a] - pads[a] + t[a] * dilations[a] for a in range(n))
            if all(0 <= i[a] < x.shape[2 + a] for a in range(n)):
                taps.append(x[(slice(None), slice(None)) + i])
        found[o] = taps
    return found


@pytest.mark.parametrize("signed", [True, False])
@pytest.mark.parametrize("case", range(len(MAX_CASES)))
def test_dilated_maxpool_equals_onnxruntime_and_the_definition(make_graph, make_type, case, signed):
    shape, k, s, p, d = MAX_CASES[case]
    g = make_graph(make_type(6, 3, signed, shape), ("maxpool", maxpool.Attrs(k, s, p, d)))
    y = check_exact(g, n=200)
    codes = sample_codes(g.values[g.input], 200, seed=0)
    for o, taps in taps_by_definition(codes, k, s, p or (0,) * (2 * len(k)), d, y.shape[2:]).items():
        assert np.array_equal(y[(slice(None), slice(None)) + o], np.max(taps, axis=0))


def test_a_dilated_window_with_every_tap_in_the_padding_is_refused():
    """Length 2, two taps 2 apart, 3 pads before: the first window's taps are -3 and -1."""
    x = TensorType((1, 2), FixedType(4, 0, True), -8, 7)
    with pytest.raises(UnsupportedModelError, match="lies entirely in the padding"):
        maxpool.OP.infer(maxpool.Attrs((2,), (1,), (3, 0), (2,)), [x], "n")
    assert maxpool.OP.infer(maxpool.Attrs((2,), (1,), (1, 0), (2,)), [x], "n").shape == (1, 1)


def test_pools_padded_as_much_as_their_kernel_have_an_exact_reference(make_graph, make_type):
    """onnxruntime's pools refuse a pad as large as the kernel: an end pad of ceil mode, a zero
    Pad folded into an average (its reference takes the taps' slices instead)."""
    g = make_graph(make_type(6, 3, True, (2, 5)), ("maxpool", maxpool.Attrs((2,), (3,), (0, 2))))
    check_exact(g, n=100)
    attrs = avgpool.Attrs((1, 2), (1, 1), (2, 0, 1, 2), True, _quant(4, "ROUND"))
    check_exact(make_graph(make_type(8, 4, True, (2, 3, 4)), ("avgpool", attrs)), n=100)


def _quant(fy: int, rounding: str) -> quant.Attrs:
    return quant.Attrs(FixedType(7, fy, True), False, rounding)


def _ort_average_pool(x: np.ndarray, kernel, strides, pads, dilations, cip: bool) -> np.ndarray:
    """onnxruntime's own dilated AveragePool (opset 19) on float32 codes."""
    g = helper.make_graph([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=list(kernel), strides=list(strides),
                                            pads=list(pads), dilations=list(dilations), count_include_pad=int(cip))],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    import onnxruntime as ort

    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x.astype(np.float32)})[0].astype(np.float64)


@pytest.mark.parametrize("rounding,fy", [("ROUND", 5), ("FLOOR", 3), ("HALF_UP", 6)])
@pytest.mark.parametrize("case", range(len(AVG_CASES)))
def test_dilated_avgpool_equals_onnxruntime_and_the_definition(make_graph, make_type, case, rounding, fy):
    shape, k, s, p, d, cip = AVG_CASES[case]
    attrs = avgpool.Attrs(k, s, p, cip, _quant(fy, rounding), d)
    g = make_graph(make_type(8, 4, True, shape), ("avgpool", attrs))
    y = check_exact(g, n=60)
    codes = sample_codes(g.values[g.input], 60, seed=0)
    taps = int(np.prod(k))
    sums, counts = np.zeros(y.shape, dtype=np.int64), np.zeros(y.shape[2:], dtype=np.int64)
    for o, found in taps_by_definition(codes, k, s, p, d, y.shape[2:]).items():  # the window sums by definition
        sums[(slice(None), slice(None)) + o], counts[o] = np.sum(found, axis=0), len(found)
    up, down = max(fy - 4, 0), max(4 - fy, 0)
    divisor = np.full_like(counts, taps) if cip else counts
    assert np.array_equal(y, np.clip(div_round(sums << up, divisor << down, rounding), -64, 63))
    if max(p) < min(k):  # onnxruntime refuses a pad as large as the kernel
        # its dilated AveragePool with count_include_pad=1 is sum / taps: the sums of codes below
        # 2**20, and the counts (the average of ones), come back exactly (float32 error < 1/8)
        ort_sums = np.rint(_ort_average_pool(codes, k, s, p, d, True) * taps).astype(np.int64)
        ort_counts = np.rint(_ort_average_pool(np.ones((1, 1, *shape[1:])), k, s, p, d, True) * taps)
        assert np.array_equal(ort_sums, sums) and np.array_equal(ort_counts[0, 0], counts)


def csim_params(default: list[tuple[int, str]], slow: list[tuple[int, str]]) -> list:
    """(case, io type) of the C-simulations: the default run's, then those marked slow."""
    return [pytest.param(c, io, marks=[pytest.mark.slow] if (c, io) in slow else [], id=f"{c}-{io}")
            for c, io in default + slow]


MAX_CSIM = csim_params([(0, "io_stream"), (3, "io_parallel")], [(3, "io_stream"), (4, "io_parallel"), (4, "io_stream")])
AVG_CSIM = csim_params([(1, "io_stream"), (3, "io_parallel")], [(2, "io_parallel"), (4, "io_stream"), (3, "io_stream")])


@pytest.mark.csim
@pytest.mark.parametrize("case,io_type", MAX_CSIM)
def test_dilated_maxpool_csim(make_graph, make_type, tmp_path, case, io_type):
    from ..csim.test_ops_csim import csim_exact

    shape, k, s, p, d = MAX_CASES[case]
    g = make_graph(make_type(6, 3, True, shape), ("maxpool", maxpool.Attrs(k, s, p, d)),
                   ("requant", quant.Attrs(FixedType(5, 2, True), False, "ROUND")))
    csim_exact(g, tmp_path, io_type, n=60)


@pytest.mark.csim
@pytest.mark.parametrize("case,io_type", AVG_CSIM)
def test_dilated_avgpool_csim(make_graph, make_type, tmp_path, case, io_type):
    from ..csim.test_ops_csim import csim_exact

    shape, k, s, p, d, cip = AVG_CASES[case]
    g = make_graph(make_type(8, 4, True, shape), ("avgpool", avgpool.Attrs(k, s, p, cip, _quant(5, "ROUND"), d)))
    csim_exact(g, tmp_path, io_type, n=60)
