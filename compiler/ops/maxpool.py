"""MaxPool (ONNX MaxPool, 2D or 3D, no padding, floor mode): the maximum code of each window."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import TensorType
from .base import OpDef
from .conv import windows


@dataclass(frozen=True)
class Attrs:
    kernel: tuple[int, ...]
    strides: tuple[int, ...]


class MaxPool(OpDef):
    name = "maxpool"

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        n = len(attrs.kernel)
        if len(x.shape) != n + 1:
            raise UnsupportedModelError(f"node '{node}': {n}D MaxPool expects a (C, {n} spatial) input, got {x.shape}")
        if len(attrs.strides) != n or min(attrs.strides) < 1 or min(attrs.kernel) < 1:
            raise UnsupportedModelError(f"node '{node}': invalid MaxPool kernel {attrs.kernel} or strides {attrs.strides}")
        sp = tuple((x.shape[1 + i] - attrs.kernel[i]) // attrs.strides[i] + 1 for i in range(n))
        if min(sp) < 1:
            raise UnsupportedModelError(f"node '{node}': MaxPool window larger than input {x.shape}")
        return TensorType((x.shape[0], *sp), x.ftype, x.lo, x.hi)

    def reference(self, attrs: Attrs, xs, ins, out):
        n = len(attrs.kernel)
        win = windows(xs[0], attrs.kernel, attrs.strides)
        win = win[(slice(None), slice(None)) + tuple(slice(0, s) for s in out.shape[1:])]
        return win.max(axis=tuple(range(2 + n, 2 + 2 * n)))

    def emit_onnx(self, attrs: Attrs, b, xs, ins, out):
        # A max of integers below 2**52 is exact in float64.
        v = b.op("MaxPool", [b.op("Cast", [xs[0]], to="double")], kernel_shape=list(attrs.kernel), strides=list(attrs.strides))
        return b.op("Cast", [v], to="int64")

    def lower(self, attrs: Attrs, hl, node, ins, out):
        x = ins[0]
        n = len(attrs.kernel)
        dims = ("height", "width") if n == 2 else ("depth", "height", "width")
        layer = {"class_name": "MaxPooling2D" if n == 2 else "TesseraMaxPool3D", "data_format": "channels_last",
                 "n_filt": x.shape[0]}
        for i, d in enumerate(dims):
            layer[f"in_{d}"] = x.shape[1 + i]
            layer[f"out_{d}"] = out.shape[1 + i]
            layer[f"pool_{d}"] = attrs.kernel[i]
            layer[f"stride_{d}"] = attrs.strides[i]
        if n == 2:
            layer.update(pad_top=0, pad_bottom=0, pad_left=0, pad_right=0)
        hl.add_layer(node, layer, {"result": out.ftype.hls(), "accum": out.ftype.hls()}, layout="channels")


OP = MaxPool()
