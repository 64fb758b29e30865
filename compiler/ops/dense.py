"""Dense (ONNX Gemm / MatMul [+ Add]): ``acc = x @ W + b`` on integer codes.

Codes are aligned to the accumulator's fractional bits ``facc = max(fx + fw, fb)``; the
accumulator range is the exact interval of ``x @ W + b`` over every x the input type
allows, computed from the actual weight codes, so the derived width cannot overflow.
Because every input range contains 0, every partial sum also lies in that interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import FixedType, TensorType
from .base import OpDef, bias_aligned, check_width, finish_acc_onnx, fits_int8, interval_dot, linear_acc_frac, linear_acc_range


@dataclass(frozen=True, eq=False)
class Attrs:
    weight: np.ndarray  # int64 codes, (n_in, n_out)
    wtype: FixedType
    bias: np.ndarray | None  # int64 codes, (n_out,)
    btype: FixedType | None


def _bias_aligned(attrs: Attrs, facc: int) -> np.ndarray:
    return bias_aligned(attrs.bias, attrs.btype, attrs.weight.shape[1], facc)


class Dense(OpDef):
    name = "dense"

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        if len(x.shape) != 1 or x.shape[0] != attrs.weight.shape[0]:
            raise UnsupportedModelError(f"node '{node}': Dense input of shape {x.shape} does not match weights {attrs.weight.shape}")
        if attrs.bias is not None and attrs.bias.shape != (attrs.weight.shape[1],):
            raise UnsupportedModelError(f"node '{node}': bias of shape {attrs.bias.shape} for {attrs.weight.shape[1]} outputs")
        facc = linear_acc_frac(x, attrs.wtype, attrs.btype)
        shift = facc - x.ftype.frac - attrs.wtype.frac
        lo, hi = linear_acc_range([attrs.weight.T], x, shift, _bias_aligned(attrs, facc))
        t = TensorType.from_range(x.shape[:-1] + (attrs.weight.shape[1],), lo, hi, facc)
        return check_width(t, node, "the accumulator")

    def reference(self, attrs: Attrs, xs, ins, out):
        facc = out.ftype.frac
        shift = np.int64(facc - ins[0].ftype.frac - attrs.wtype.frac)
        acc = np.matmul(xs[0].astype(np.int64), attrs.weight.astype(np.int64))
        return (acc << shift) + _bias_aligned(attrs, facc)

    def emit_onnx(self, attrs: Attrs, b, xs, ins, out):
        x = ins[0]
        xt, wt = fits_int8(x), fits_int8(TensorType(attrs.weight.shape, attrs.wtype, int(attrs.weight.min()), int(attrs.weight.max())))
        _, bound = interval_dot(np.abs(attrs.weight), 0, max(abs(x.lo), abs(x.hi)), axis=0)
        if xt and wt and max(bound) < 2**31:
            # Integer kernel with int32 accumulation; the bound above proves int32 cannot overflow.
            xq = b.op("Cast", [xs[0]], to=xt)
            acc = b.op("MatMulInteger", [xq, b.const(attrs.weight.astype(wt))])
            acc = b.op("Cast", [acc], to="int64")
        else:
            acc = b.op("MatMul", [xs[0], b.const(attrs.weight.astype(np.int64))])
        return finish_acc_onnx(b, acc, out.ftype.frac - x.ftype.frac - attrs.wtype.frac, _bias_aligned(attrs, out.ftype.frac))

    def lower(self, attrs: Attrs, hl, node, ins, out):
        w = attrs.weight[hl.flat_perm(node.inputs[0])]  # rows in the HLS (channels-last) order
        bias = attrs.bias if attrs.bias is not None else np.zeros(w.shape[1], dtype=np.int64)
        btype = attrs.btype or FixedType(1, out.ftype.frac, False)
        hl.add_layer(
            node,
            {
                "class_name": "Dense",
                "n_in": int(w.shape[0]),
                "n_out": int(w.shape[1]),
                "weight_data": np.ldexp(w.astype(np.float64), -attrs.wtype.frac),
                "bias_data": np.ldexp(bias.astype(np.float64), -btype.frac),
            },
            {
                "weight": attrs.wtype.hls(),
                "bias": btype.hls(),
                "accum": out.ftype.hls(),
                "result": out.ftype.hls(),
            },
        )

    def macs(self, attrs, ins, out):
        return int(attrs.weight.size)


OP = Dense()
