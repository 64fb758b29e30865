"""Conv2d (ONNX Conv, NCHW, groups 1, dilation 1): integer convolution plus aligned bias.

Accumulator typing follows :mod:`.dense`: exact interval over every input the type allows,
per output channel, from the actual weight codes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import FixedType, TensorType
from .base import OpDef, check_width, fits_int8, interval_dot


@dataclass(frozen=True, eq=False)
class Attrs:
    weight: np.ndarray  # int64 codes, (c_out, c_in, kh, kw)
    wtype: FixedType
    bias: np.ndarray | None
    btype: FixedType | None
    strides: tuple[int, int]
    pads: tuple[int, int, int, int]  # top, left, bottom, right


def out_hw(attrs: Attrs, h: int, w: int) -> tuple[int, int]:
    kh, kw = attrs.weight.shape[2:]
    t, l, btm, r = attrs.pads
    return (h + t + btm - kh) // attrs.strides[0] + 1, (w + l + r - kw) // attrs.strides[1] + 1


def _facc(attrs: Attrs, x: TensorType) -> int:
    f = x.ftype.frac + attrs.wtype.frac
    return max(f, attrs.btype.frac) if attrs.btype is not None else f


def _bias_aligned(attrs: Attrs, facc: int) -> np.ndarray:
    if attrs.bias is None:
        return np.zeros(attrs.weight.shape[0], dtype=np.int64)
    return attrs.bias.astype(np.int64) << np.int64(facc - attrs.btype.frac)


class Conv2d(OpDef):
    name = "conv2d"

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        if len(x.shape) != 3 or x.shape[0] != attrs.weight.shape[1]:
            raise UnsupportedModelError(f"node '{node}': Conv input shape {x.shape} does not match weights {attrs.weight.shape}")
        facc = _facc(attrs, x)
        shift = facc - x.ftype.frac - attrs.wtype.frac
        w2 = attrs.weight.reshape(attrs.weight.shape[0], -1)
        mn, mx = interval_dot(w2, x.lo, x.hi, axis=1)
        bias = [int(v) for v in _bias_aligned(attrs, facc)]
        lo = min(min(int(m) * (1 << shift) + b for m, b in zip(mn, bias)), 0)
        hi = max(max(int(m) * (1 << shift) + b for m, b in zip(mx, bias)), 0)
        oh, ow = out_hw(attrs, x.shape[1], x.shape[2])
        if oh < 1 or ow < 1:
            raise UnsupportedModelError(f"node '{node}': Conv output would be empty for input {x.shape}")
        return check_width(TensorType.from_range((attrs.weight.shape[0], oh, ow), lo, hi, facc), node, "the accumulator")

    def reference(self, attrs: Attrs, xs, ins, out):
        x = xs[0].astype(np.int64)
        t, l, btm, r = attrs.pads
        xp = np.pad(x, ((0, 0), (0, 0), (t, btm), (l, r)))
        kh, kw = attrs.weight.shape[2:]
        win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
        win = win[:, :, :: attrs.strides[0], :: attrs.strides[1]]  # (N, C, OH, OW, kh, kw)
        acc = np.einsum("nchwij,ocij->nohw", win, attrs.weight.astype(np.int64), optimize=False)
        shift = np.int64(out.ftype.frac - ins[0].ftype.frac - attrs.wtype.frac)
        return (acc << shift) + _bias_aligned(attrs, out.ftype.frac)[None, :, None, None]

    def emit_onnx(self, attrs: Attrs, b, xs, ins, out):
        x = ins[0]
        xt = fits_int8(x)
        wt = fits_int8(TensorType(attrs.weight.shape, attrs.wtype, int(attrs.weight.min()), int(attrs.weight.max())))
        _, bound = interval_dot(np.abs(attrs.weight.reshape(attrs.weight.shape[0], -1)), 0, max(abs(x.lo), abs(x.hi)), axis=1)
        if not (xt and wt and max(bound) < 2**31):
            raise UnsupportedModelError(
                f"Conv with {x.ftype.width}-bit inputs and {attrs.wtype.width}-bit weights: the exact reference "
                "supports operands up to 8 bits (ConvInteger)"
            )
        acc = b.op(
            "ConvInteger",
            [b.op("Cast", [xs[0]], to=xt), b.const(attrs.weight.astype(wt))],
            pads=list(attrs.pads[:2]) + list(attrs.pads[2:]),
            strides=list(attrs.strides),
        )
        acc = b.op("Cast", [acc], to="int64")
        shift = out.ftype.frac - x.ftype.frac - attrs.wtype.frac
        if shift:
            acc = b.op("Mul", [acc, b.const(np.array(1 << shift, dtype=np.int64))])
        return b.op("Add", [acc, b.const(_bias_aligned(attrs, out.ftype.frac).reshape(-1, 1, 1))])

    def lower(self, attrs: Attrs, hl, node, ins, out):
        x = ins[0]
        c_out, c_in, kh, kw = attrs.weight.shape
        bias = attrs.bias if attrs.bias is not None else np.zeros(c_out, dtype=np.int64)
        btype = attrs.btype or FixedType(1, out.ftype.frac, False)
        t, l, btm, r = attrs.pads
        hl.add_layer(
            node,
            {
                "class_name": "Conv2D",
                "data_format": "channels_last",
                "in_height": x.shape[1],
                "in_width": x.shape[2],
                "out_height": out.shape[1],
                "out_width": out.shape[2],
                "n_chan": c_in,
                "n_filt": c_out,
                "filt_height": kh,
                "filt_width": kw,
                "stride_height": attrs.strides[0],
                "stride_width": attrs.strides[1],
                "pad_top": t,
                "pad_bottom": btm,
                "pad_left": l,
                "pad_right": r,
                # hls4ml expects (kh, kw, c_in, c_out)
                "weight_data": np.ldexp(attrs.weight.transpose(2, 3, 1, 0).astype(np.float64), -attrs.wtype.frac),
                "bias_data": np.ldexp(bias.astype(np.float64), -btype.frac),
            },
            {
                "weight": attrs.wtype.hls(),
                "bias": btype.hls(),
                "accum": out.ftype.hls(),
                "result": out.ftype.hls(),
            },
            layout="chw",
        )

    def macs(self, attrs, ins, out):
        return int(np.prod(out.shape) * np.prod(attrs.weight.shape[1:]))


OP = Conv2d()
