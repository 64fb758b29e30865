"""DepthToSpace / PixelShuffle (ops/depthtospace.py), exactly.

The integer semantics equal onnxruntime's own ``DepthToSpace`` in both modes; the reference
form (``Reshape`` / ``Transpose`` / ``Reshape``) equals the semantics; the HLS kernel
(``hls_templates/depthtospace``) C-simulates to the same codes in both io types; a Brevitas
model with ``nn.PixelShuffle`` between default quantizers equals its exported file.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from tessera.compiler.ir.types import FixedType
from tessera.compiler.ops import OPS, depthtospace, quant
from tessera.models.brevitas_default import brevitas_pixel_shuffle

from .test_ops_exact import check_exact


def _onnxruntime_d2s(x: np.ndarray, block: int, mode: str) -> np.ndarray:
    node = helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=block, mode=mode)
    g = helper.make_graph([node], "d2s", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x.astype(np.float32)})[0]


@pytest.mark.parametrize("block,mode,shape", [(2, "DCR", (8, 3, 4)), (2, "CRD", (8, 3, 4)), (3, "DCR", (18, 2, 3)),
                                              (3, "CRD", (9, 4, 2))])
def test_semantics_equal_onnxruntime(make_type, rng, block, mode, shape):
    x = make_type(8, 0, True, shape)
    attrs = depthtospace.Attrs(block, mode == "CRD")
    op = OPS["depthtospace"]
    out = op.infer(attrs, [x], "d2s")
    codes = rng.integers(-128, 128, size=(20, *shape))
    got = op.semantics(attrs, [codes], [x], out)
    want = _onnxruntime_d2s(codes, block, mode)
    assert got.shape == want.shape == (20, *out.shape)
    assert np.array_equal(got, want.astype(np.int64))
    assert sorted(got[0].ravel().tolist()) == sorted(codes[0].ravel().tolist())  # a permutation of the codes


def _graph(make_graph, make_type, crd: bool):
    return make_graph(make_type(6, 3, True, (12, 3, 5)), ("depthtospace", depthtospace.Attrs(2, crd)),
                      ("requant", quant.Attrs(FixedType(4, 1, True), False, "ROUND")))


@pytest.mark.parametrize("crd", [False, True], ids=["DCR", "CRD"])
def test_reference_equals_semantics(make_graph, make_type, crd):
    check_exact(_graph(make_graph, make_type, crd), n=300)


def test_bad_block_is_refused(make_type):
    from tessera.compiler.errors import UnsupportedModelError

    with pytest.raises(UnsupportedModelError, match=r"node 'd2s': 12 channels are not a multiple of blocksize\^2 = 9"):
        OPS["depthtospace"].infer(depthtospace.Attrs(3), [make_type(8, 0, True, (12, 3, 3))], "d2s")


@pytest.mark.csim
@pytest.mark.parametrize("io_type,crd", [("io_parallel", False), ("io_stream", True), ("io_stream", False)])
def test_depth_to_space_csim(make_graph, make_type, tmp_path, io_type, crd):
    from ..csim.test_ops_csim import csim_exact

    csim_exact(_graph(make_graph, make_type, crd), tmp_path, io_type, n=200)


def test_brevitas_pixel_shuffle_is_exact(tmp_path):
    from ..frontend.test_real_constants import _exact_and_independent

    path = brevitas_pixel_shuffle(tmp_path / "m.onnx")
    d2s = [n for n in onnx.load(str(path)).graph.node if n.op_type == "DepthToSpace"]
    assert len(d2s) == 1 and helper.get_attribute_value(d2s[0].attribute[[a.name for a in d2s[0].attribute].index("mode")]) == b"CRD"
    g = _exact_and_independent(path, 1000)
    assert "depthtospace" in [n.op for n in g.nodes]


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_brevitas_pixel_shuffle_csim(tmp_path, io_type):
    from ..frontend.test_real_constants import csim_verified

    csim_verified(brevitas_pixel_shuffle(tmp_path / "m.onnx"), tmp_path / "prj", io_type, 200, 3 * 10 * 8)
