"""MaxPool2d (NCHW, no padding, floor mode): the maximum code of each window; type unchanged."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import TensorType
from .base import OpDef


@dataclass(frozen=True)
class Attrs:
    kernel: tuple[int, int]
    strides: tuple[int, int]


class MaxPool2d(OpDef):
    name = "maxpool2d"

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        if len(x.shape) != 3:
            raise UnsupportedModelError(f"node '{node}': MaxPool expects a (C, H, W) input, got {x.shape}")
        c, h, w = x.shape
        oh = (h - attrs.kernel[0]) // attrs.strides[0] + 1
        ow = (w - attrs.kernel[1]) // attrs.strides[1] + 1
        if oh < 1 or ow < 1:
            raise UnsupportedModelError(f"node '{node}': MaxPool window larger than input {x.shape}")
        return TensorType((c, oh, ow), x.ftype, x.lo, x.hi)

    def reference(self, attrs: Attrs, xs, ins, out):
        win = np.lib.stride_tricks.sliding_window_view(xs[0], attrs.kernel, axis=(2, 3))
        win = win[:, :, :: attrs.strides[0], :: attrs.strides[1]]
        oh, ow = out.shape[1:]
        return win[:, :, :oh, :ow].max(axis=(4, 5))

    def emit_onnx(self, attrs: Attrs, b, xs, ins, out):
        # A max of integers below 2**52 is exact in float64.
        v = b.op("MaxPool", [b.op("Cast", [xs[0]], to="double")], kernel_shape=list(attrs.kernel), strides=list(attrs.strides))
        return b.op("Cast", [v], to="int64")

    def lower(self, attrs: Attrs, hl, node, ins, out):
        x = ins[0]
        hl.add_layer(
            node,
            {
                "class_name": "MaxPooling2D",
                "data_format": "channels_last",
                "in_height": x.shape[1],
                "in_width": x.shape[2],
                "out_height": out.shape[1],
                "out_width": out.shape[2],
                "n_filt": x.shape[0],
                "pool_height": attrs.kernel[0],
                "pool_width": attrs.kernel[1],
                "stride_height": attrs.strides[0],
                "stride_width": attrs.strides[1],
                "pad_top": 0,
                "pad_bottom": 0,
                "pad_left": 0,
                "pad_right": 0,
            },
            {"result": out.ftype.hls(), "accum": out.ftype.hls()},
            layout="chw",
        )


OP = MaxPool2d()
