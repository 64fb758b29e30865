"""Convolution (ONNX Conv, N C spatial..., groups 1, dilation 1) in 2D or 3D.

``acc = sum(w * x) + b`` on integer codes; accumulator typing follows :mod:`.dense`: the
exact interval over every input the type allows, per output channel, from the actual weight
codes.  2D lowers to hls4ml's ``Conv2D``; 3D (which hls4ml lacks) to Tessera's
``TesseraConv3D`` extension layer (``hls_templates/conv3d``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import FixedType, TensorType
from .base import OpDef, bias_aligned, check_linear_attrs, check_width, finish_acc_onnx, fits_int8, int8_limbs, interval_dot, linear_acc_frac, linear_acc_range


@dataclass(frozen=True, eq=False)
class Attrs:
    weight: np.ndarray  # int64 codes, (c_out, c_in, *kernel)
    wtype: FixedType
    bias: np.ndarray | None
    btype: FixedType | None
    strides: tuple[int, ...]
    pads: tuple[int, ...]  # ONNX order: begins of each spatial dim, then ends

    @property
    def ndim(self) -> int:
        return self.weight.ndim - 2


def out_spatial(attrs: Attrs, spatial: tuple[int, ...]) -> tuple[int, ...]:
    n = attrs.ndim
    k = attrs.weight.shape[2:]
    return tuple((spatial[i] + attrs.pads[i] + attrs.pads[n + i] - k[i]) // attrs.strides[i] + 1 for i in range(n))


def _bias_aligned(attrs: Attrs, facc: int) -> np.ndarray:
    return bias_aligned(attrs.bias, attrs.btype, attrs.weight.shape[0], facc)


def windows(x: np.ndarray, kernel: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """(N, C, *out, *kernel) strided sliding windows over the trailing spatial axes."""
    n = len(kernel)
    axes = tuple(range(2, 2 + n))
    win = np.lib.stride_tricks.sliding_window_view(x, kernel, axis=axes)
    return win[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides)]


class Conv(OpDef):
    name = "conv"

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        check_linear_attrs(attrs, x, attrs.weight.shape[1], attrs.weight.shape[0], node, "Conv")
        facc = linear_acc_frac(x, attrs.wtype, attrs.btype)
        shift = facc - x.ftype.frac - attrs.wtype.frac
        lo, hi = linear_acc_range([attrs.weight.reshape(attrs.weight.shape[0], -1)], x, shift, _bias_aligned(attrs, facc))
        sp = out_spatial(attrs, x.shape[1:])
        if min(sp) < 1:
            raise UnsupportedModelError(f"node '{node}': Conv output would be empty for input {x.shape}")
        return check_width(TensorType.from_range((attrs.weight.shape[0], *sp), lo, hi, facc), node, "the accumulator")

    def reference(self, attrs: Attrs, xs, ins, out):
        n = attrs.ndim
        pad = ((0, 0), (0, 0)) + tuple((attrs.pads[i], attrs.pads[n + i]) for i in range(n))
        win = windows(np.pad(xs[0].astype(np.int64), pad), attrs.weight.shape[2:], attrs.strides)
        win = win[(slice(None), slice(None)) + tuple(slice(0, s) for s in out.shape[1:])]
        letters = "defg"[:n]
        ks = "ijkl"[:n]
        acc = np.einsum(f"nc{letters}{ks},oc{ks}->no{letters}", win, attrs.weight.astype(np.int64), optimize=False)
        shift = np.int64(out.ftype.frac - ins[0].ftype.frac - attrs.wtype.frac)
        return (acc << shift) + _bias_aligned(attrs, out.ftype.frac).reshape((-1,) + (1,) * n)

    def emit_onnx(self, attrs: Attrs, b, xs, ins, out):
        x = ins[0]
        xt = fits_int8(x)
        wt = fits_int8(TensorType(attrs.weight.shape, attrs.wtype, int(attrs.weight.min()), int(attrs.weight.max())))
        # Weights wider than 8 bits (e.g. per-channel scales moved onto one grid) run as one
        # ConvInteger per 7-bit limb, recombined in int64: exact.
        parts = [(attrs.weight.astype(wt), 0)] if wt else int8_limbs(attrs.weight)
        xmax = max(abs(x.lo), abs(x.hi))
        bound = max(int(max(interval_dot(np.abs(w.astype(np.int64).reshape(w.shape[0], -1)), 0, xmax, axis=1)[1]))
                    for w, _ in parts)
        if not (xt and bound < 2**31):
            raise UnsupportedModelError(
                f"Conv with {x.ftype.width}-bit inputs: the exact reference supports inputs up to 8 bits (ConvInteger)"
            )
        xq = b.op("Cast", [xs[0]], to=xt)
        acc = None
        for w, shift in parts:
            part = b.op("Cast", [b.op("ConvInteger", [xq, b.const(w)], pads=list(attrs.pads), strides=list(attrs.strides))],
                        to="int64")
            if shift:
                part = b.op("Mul", [part, b.const(np.array(1 << shift, dtype=np.int64))])
            acc = part if acc is None else b.op("Add", [acc, part])
        return finish_acc_onnx(b, acc, out.ftype.frac - x.ftype.frac - attrs.wtype.frac,
                               _bias_aligned(attrs, out.ftype.frac).reshape((-1,) + (1,) * attrs.ndim))

    def lower(self, attrs: Attrs, hl, node, ins, out):
        x = ins[0]
        bias = attrs.bias if attrs.bias is not None else np.zeros(attrs.weight.shape[0], dtype=np.int64)
        btype = attrs.btype or FixedType(1, out.ftype.frac, False)
        # kernel layout (*kernel, c_in, c_out), as hls4ml's Conv2D and our Conv3D expect
        w = attrs.weight.transpose(*range(2, 2 + attrs.ndim), 1, 0)
        layer = {
            "data_format": "channels_last",
            "n_chan": attrs.weight.shape[1],
            "n_filt": attrs.weight.shape[0],
            "weight_data": np.ldexp(w.astype(np.float64), -attrs.wtype.frac),
            "bias_data": np.ldexp(bias.astype(np.float64), -btype.frac),
        }
        dims = ("height", "width") if attrs.ndim == 2 else ("depth", "height", "width")
        begin = ("top", "left") if attrs.ndim == 2 else ("front", "top", "left")
        end = ("bottom", "right") if attrs.ndim == 2 else ("back", "bottom", "right")
        for i, d in enumerate(dims):
            layer[f"in_{d}"] = x.shape[1 + i]
            layer[f"out_{d}"] = out.shape[1 + i]
            layer[f"filt_{d}"] = attrs.weight.shape[2 + i]
            layer[f"stride_{d}"] = attrs.strides[i]
            layer[f"pad_{begin[i]}"] = attrs.pads[i]
            layer[f"pad_{end[i]}"] = attrs.pads[attrs.ndim + i]
        layer["class_name"] = "Conv2D" if attrs.ndim == 2 else "TesseraConv3D"
        precision = {"weight": attrs.wtype.hls(), "bias": btype.hls(), "accum": out.ftype.hls(), "result": out.ftype.hls()}
        hl.add_layer(node, layer, precision, layout="channels")

    def macs(self, attrs, ins, out):
        return int(np.prod(out.shape) * np.prod(attrs.weight.shape[1:]))


OP = Conv()
