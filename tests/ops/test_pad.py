"""Reflect and edge padding (compiler/ops/pad.py): the integer semantics equal onnxruntime's
``Pad`` on full-range codes and a loop written from the ONNX definition, exactly; the kernel
(``hls_templates/pad``) C-simulates equal in both io types, 1D, 2D and 3D."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.ir.types import FixedType, TensorType
from tessera.compiler.ops import pad, quant
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.samples import sample_codes

from .test_ops_exact import check_exact

REFLECT, EDGE = pad.PadMode.REFLECT, pad.PadMode.EDGE
CASES = [  # shape, pads (begins, then ends), mode
    ((3, 9), (2, 3), REFLECT),
    ((2, 7), (4, 0), EDGE),
    ((2, 5, 6), (1, 2, 3, 1), REFLECT),
    ((3, 4, 5), (0, 3, 2, 1), EDGE),
    ((2, 3, 4, 5), (1, 2, 0, 2, 1, 3), REFLECT),
    ((2, 3, 3, 4), (2, 0, 1, 1, 3, 0), EDGE),
]


def by_definition(x: np.ndarray, pads: tuple[int, ...], mode: pad.PadMode) -> np.ndarray:
    """ONNX Pad per output index: reflect mirrors without repeating the edge, edge clamps."""
    n = len(pads) // 2
    spatial = x.shape[2:]
    out = np.empty(x.shape[:2] + tuple(s + pads[i] + pads[n + i] for i, s in enumerate(spatial)), dtype=x.dtype)
    for o in np.ndindex(*out.shape[2:]):
        src = []
        for i, (j, length) in enumerate(zip(o, spatial)):
            k = j - pads[i]
            if mode is EDGE:
                k = min(max(k, 0), length - 1)
            else:
                k = -k if k < 0 else (2 * (length - 1) - k if k >= length else k)
            src.append(k)
        out[(slice(None), slice(None)) + o] = x[(slice(None), slice(None)) + tuple(src)]
    return out


@pytest.mark.parametrize("signed", [True, False])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_pad_equals_onnxruntime_and_the_definition(make_graph, make_type, case, signed):
    shape, pads, mode = CASES[case]
    g = make_graph(make_type(6, 2, signed, shape), ("pad", pad.Attrs(pads, mode)))
    y = check_exact(g, n=200)
    codes = sample_codes(g.values[g.input], 200, seed=0)
    assert np.array_equal(y, by_definition(codes, pads, mode))
    assert y.min() == g.values[g.input].lo and y.max() == g.values[g.input].hi  # the extremes are copied too


def test_a_reflect_pad_as_long_as_the_axis_is_refused():
    x = TensorType((1, 4, 5), FixedType(4, 0, True), -8, 7)
    with pytest.raises(UnsupportedModelError, match="pad 4 on spatial axis 0 of length 4"):
        pad.OP.infer(pad.Attrs((4, 0, 0, 0), REFLECT), [x], "n")
    assert pad.OP.infer(pad.Attrs((4, 0, 0, 0), EDGE), [x], "n").shape == (1, 8, 5)


def test_the_rtl_facet_gathers_the_same_codes(make_graph, make_type):
    """The RTL facet's index map, applied to codes, is the semantics."""
    for shape, pads, mode in CASES:
        g = make_graph(make_type(5, 0, True, shape), ("pad", pad.Attrs(pads, mode)))
        codes = sample_codes(g.values[g.input], 3, seed=1)
        idx = pad.source_index(pad.Attrs(pads, mode), shape)
        assert np.array_equal(codes.reshape(3, -1)[:, idx], run_ir(g, codes))


#: the default run's C-simulations (case, io type): 1D reflect streamed, 2D edge in parallel, 3D
#: reflect streamed; every other pair is marked slow
DEFAULT_CSIM = {(0, "io_stream"), (3, "io_parallel"), (4, "io_stream")}


@pytest.mark.csim
@pytest.mark.parametrize("case,io_type", [
    pytest.param(case, io, marks=[] if (case, io) in DEFAULT_CSIM else [pytest.mark.slow], id=f"{case}-{io}")
    for case in range(len(CASES)) for io in ("io_parallel", "io_stream")])
def test_pad_csim(make_graph, make_type, tmp_path, io_type, case):
    from ..csim.test_ops_csim import csim_exact

    shape, pads, mode = CASES[case]
    g = make_graph(make_type(6, 2, True, shape), ("pad", pad.Attrs(pads, mode)),
                   ("requant", quant.Attrs(FixedType(5, 1, True), False, "ROUND")))
    csim_exact(g, tmp_path, io_type, n=60)
