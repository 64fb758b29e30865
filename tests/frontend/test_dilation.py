"""Dilated Conv and ConvTranspose (handlers/linear.py): the dense kernel with zeros between the
taps computes the same sums exactly; auto_pad SAME pads for the dilated span; float-scaled
weights keep each output channel's scale on the zeros."""

from __future__ import annotations

import pytest

from .test_handlers import Builder
from .test_real_constants import _exact_and_independent


def dilated(path, dims: int, d: int, float_scale: bool, transpose: bool = False, auto_pad: str | None = None):
    shape = {1: (3, 21), 2: (3, 9, 10)}[dims]
    b = Builder(shape)
    b.const("fs", 0.0371)
    b.const("fw", 0.0173)
    w = b.quant(b.const("wr", b.rng.normal(0, 0.1, ((3, 2) if transpose else (2, 3)) + (3,) * dims)), "wq",
                "fw" if float_scale else "w_s", "b8" if float_scale else "b4")
    geometry = {"strides": [2] * dims} if transpose else {"auto_pad": auto_pad} if auto_pad else {"pads": [d] * 2 * dims}
    c = b.node("ConvTranspose" if transpose else "Conv", [b.quant("x", "xq"), w], "c", kernel_shape=[3] * dims,
               dilations=[d] * dims, **geometry)
    return b.save(path, b.quant(c, "y", "fs" if float_scale else "act_s"), (2,))


@pytest.mark.parametrize("dims,d,float_scale,transpose,auto_pad", [
    (1, 9, True, False, None),  # MelGAN's residual stack: kernel 3, dilation 9, padding 9
    (2, 2, False, False, "SAME_UPPER"),
    (1, 3, False, True, None),
    (2, 2, True, True, None),
])
def test_dilated_kernels_are_exact(tmp_path, dims, d, float_scale, transpose, auto_pad):
    g = _exact_and_independent(dilated(tmp_path / "m.onnx", dims, d, float_scale, transpose, auto_pad), 300)
    (layer,) = [n for n in g.nodes if n.op in ("conv", "convtranspose")]
    assert layer.attrs.weight.shape[2:] == (2 * d + 1,) * dims
    assert not layer.attrs.weight[(slice(None), slice(None)) + (slice(1, d),) * dims].any()  # zeros between taps
    if auto_pad:
        assert g.values[g.output].shape[1:] == (9, 10)
