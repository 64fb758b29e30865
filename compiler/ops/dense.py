"""Dense (ONNX Gemm / MatMul [+ Add]): ``acc = x @ W + b`` on integer codes.

Codes are aligned to the accumulator's fractional bits ``facc = max(fx + fw, fb)``; the
accumulator range is the exact interval of ``x @ W + b`` over every x the input type
allows, computed from the actual weight codes, so the derived width cannot overflow.
Because every input range contains 0, every partial sum also lies in that interval.
Lowers to hls4ml's ``Dense``; the estimator costs hls4ml's ``dense_latency`` (all products
of one sample in one iteration, hls4ml's reuse-factor rule).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import FixedType, TensorType
from ..exact.integer import exact_einsum
from .base import Layout, check_width, limb_kernel
from .base.linear import LinearOp, bias_aligned, bias_or_zeros, finish_acc_onnx, linear_acc_frac, linear_acc_range
from .base.cost import linear_work


@dataclass(frozen=True, eq=False)
class Attrs:
    weight: np.ndarray  # int64 codes, (n_in, n_out)
    wtype: FixedType
    bias: np.ndarray | None  # int64 codes, (n_out,)
    btype: FixedType | None


def _bias_aligned(attrs: Attrs, facc: int) -> np.ndarray:
    return bias_aligned(attrs.bias, attrs.btype, attrs.weight.shape[1], facc)


class Dense(LinearOp[Attrs]):
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

    def semantics(self, attrs: Attrs, xs, ins, out):
        facc = out.ftype.frac
        shift = np.int64(facc - ins[0].ftype.frac - attrs.wtype.frac)
        acc = exact_einsum("...i,io->...o", xs[0], attrs.weight)
        return (acc << shift) + _bias_aligned(attrs, facc)

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        x = ins[0]
        # integer kernels on 7-bit weight limbs (int32 accumulation, proven not to overflow),
        # else int64 MatMul: both exact
        acc = limb_kernel(builder, "MatMulInteger", xs[0], x, attrs.weight, out_axis=1)
        if acc is None:
            acc = builder.op("MatMul", [xs[0], builder.const(attrs.weight.astype(np.int64))])
        return finish_acc_onnx(builder, acc, out.ftype.frac - x.ftype.frac - attrs.wtype.frac, _bias_aligned(attrs, out.ftype.frac))

    def lower(self, attrs: Attrs, hls, node, ins, out):
        w = attrs.weight[hls.flat_perm(node.inputs[0])]  # rows in the HLS (channels-last) order
        bias, btype = bias_or_zeros(attrs, w.shape[1], out)
        hls.add_layer(
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
            layout=Layout.FLAT,
        )

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        acc = rtl.shift_left(rtl.matmul(xs[0], attrs.weight), out.ftype.frac - ins[0].ftype.frac - attrs.wtype.frac)
        bias = _bias_aligned(attrs, out.ftype.frac)
        return rtl.add(acc, rtl.const(bias)) if bias.any() else acc

    def macs(self, attrs, ins, out):
        return int(attrs.weight.size)

    def bias_size(self, attrs: Attrs) -> int:
        return int(attrs.weight.shape[1])

    def cost(self, attrs: Attrs, ins, out, io):
        n_in, n_out = attrs.weight.shape
        return linear_work(ins, out, macs=self.macs(attrs, ins, out), weight_bits=self.weight_bits(attrs),
                           mults=n_in * n_out, taps=n_in, steps=1, kind=self.weight_kind(attrs),
                           w_bits=attrs.wtype.width, reuse_dims=(n_in, n_out),
                           zero_mults=int(np.count_nonzero(attrs.weight == 0)))


OP = Dense()
