"""Transposed convolution (ONNX ConvTranspose, groups 1, dilation 1), 1D, 2D or 3D.

``y[o, s*i + k - pad] += x[c, i] * w[c, o, k]``, then bias; ``output_padding`` adds that many
positions at the end of an axis (ONNX: its output size is ``(in - 1) * s + k - pads +
output_padding``), the ones no input reaches holding the bias alone.  The accumulator range is
the exact interval over every input, per output channel and per output phase (position modulo
stride), from the actual weight codes.  hls4ml has no transposed convolution: every rank
lowers to ``TesseraConvTranspose3D`` (``hls_templates/convtranspose3d``; 1D and 2D with unit
leading axes), whose gather form computes each output position from the taps that reach it.  onnxruntime has no integer ConvTranspose, so the
reference uses float32 ConvTranspose only after proving every partial sum is an integer
below 2**24 (exact in float32); otherwise the model is refused.  A scatter op for the
partitioner (a block computes its local output and crops it); the estimator costs the
gather form of the kernel (one output pixel per iteration).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import FixedType, TensorType
from ..exact.integer import exact_einsum, interval_dot
from .base import Layout, Trait, check_width
from .conv import Conv3dCall, Conv3dSizes, conv3d_extension, conv_multiplier_limit
from .base.extension import DIMS, computed
from .base.linear import (LinearOp, bias_aligned, bias_or_zeros, check_linear_attrs, finish_acc_onnx, linear_acc_frac,
                     linear_acc_range)
from ..exact.spans import transposed_input
from .base.cost import Memory, bits, linear_work, prod


@dataclass(frozen=True, eq=False)
class Attrs:
    weight: np.ndarray  # int64 codes, (c_in, c_out, *kernel)  (ONNX ConvTranspose layout)
    wtype: FixedType
    bias: np.ndarray | None
    btype: FixedType | None
    strides: tuple[int, ...]
    pads: tuple[int, ...]  # begins then ends
    output_padding: tuple[int, ...] = ()  # per spatial dim; () for none

    @property
    def ndim(self) -> int:
        return self.weight.ndim - 2

    @property
    def extra(self) -> tuple[int, ...]:
        """The output padding of every spatial dim."""
        return self.output_padding or (0,) * self.ndim


def out_spatial(attrs: Attrs, spatial) -> tuple[int, ...]:
    n, k = attrs.ndim, attrs.weight.shape[2:]
    return tuple((spatial[i] - 1) * attrs.strides[i] + k[i] - attrs.pads[i] - attrs.pads[n + i] + attrs.extra[i]
                 for i in range(n))


def _bias_aligned(attrs: Attrs, facc: int) -> np.ndarray:
    return bias_aligned(attrs.bias, attrs.btype, attrs.weight.shape[1], facc)


def scatter_index(attrs: Attrs, in_shape: tuple[int, ...], out_spatial_shape: tuple[int, ...]) -> np.ndarray:
    """(positions, c_in, taps): the flat index into the ``(c_in, *spatial)`` input of the value
    each kernel tap brings to each output position (-1: none reaches it)."""
    n, k, s = attrs.ndim, attrs.weight.shape[2:], attrs.strides
    c_in, spatial = in_shape[0], in_shape[1:]
    flat = np.arange(int(np.prod(in_shape))).reshape(in_shape)
    positions = list(itertools.product(*(range(v) for v in out_spatial_shape)))
    taps = list(itertools.product(*(range(v) for v in k)))
    idx = np.full((len(positions), c_in, len(taps)), -1, dtype=np.int64)
    for a, o in enumerate(positions):
        for b, t in enumerate(taps):
            full = [o[d] + attrs.pads[d] - t[d] for d in range(n)]
            if all(f % s[d] == 0 and 0 <= f // s[d] < spatial[d] for d, f in enumerate(full)):
                idx[a, :, b] = flat[(slice(None), *(f // s[d] for d, f in enumerate(full)))]
    return idx


def phase_weights(attrs: Attrs):
    """For every output phase (kernel offsets congruent modulo the stride): (c_out, taps) weights."""
    n, k, s = attrs.ndim, attrs.weight.shape[2:], attrs.strides
    for phase in itertools.product(*(range(min(s[i], k[i])) for i in range(n))):
        idx = tuple(slice(phase[i], None, s[i]) for i in range(n))
        sub = attrs.weight[(slice(None), slice(None)) + idx]  # (c_in, c_out, taps...)
        yield np.moveaxis(sub, 1, 0).reshape(attrs.weight.shape[1], -1)


def phase_taps(kernel, strides) -> list[int]:
    """Taps one output position gathers along each axis: ceil(k / s) (the stride phase of
    the output fixes which; hls_templates/convtranspose3d)."""
    return [math.ceil(k / s) for k, s in zip(kernel, strides)]


def tconv_products(layer) -> tuple[int, int]:
    """The kernel's products per pipelined output position (no zero-weight discount: which
    weights a position reads depends on its stride phase)."""
    kernel = [layer.get_attr(f"filt_{d}") for d in DIMS]
    strides = [layer.get_attr(f"stride_{d}") for d in DIMS]
    return prod(phase_taps(kernel, strides)) * layer.get_attr("n_chan") * layer.get_attr("n_filt"), 0


@dataclass(frozen=True)
class ConvTranspose3dConfig(Conv3dSizes):
    template: ClassVar[str] = "convtranspose3d/config.tpl"
    multiplier_limit: int = computed(conv_multiplier_limit(tconv_products))


@dataclass(frozen=True)
class ConvTranspose3dCall(Conv3dCall):
    template: ClassVar[str] = "convtranspose3d/function.tpl"


class ConvTranspose(LinearOp[Attrs]):
    name = "convtranspose"
    traits = LinearOp.traits | {Trait.SCATTER}
    extensions = (conv3d_extension("TesseraConvTranspose3D", "3D transposed convolution, channels-last.",
                                   "convtranspose3d", "nnet_tessera_convtranspose3d.h", ConvTranspose3dConfig,
                                   ConvTranspose3dCall, of_maps=True),)

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        check_linear_attrs(attrs, x, attrs.weight.shape[0], attrs.weight.shape[1], node, "ConvTranspose")
        facc = linear_acc_frac(x, attrs.wtype, attrs.btype)
        shift = facc - x.ftype.frac - attrs.wtype.frac
        lo, hi = linear_acc_range(phase_weights(attrs), x, shift, _bias_aligned(attrs, facc))
        sp = out_spatial(attrs, x.shape[1:])
        if min(sp) < 1:
            raise UnsupportedModelError(f"node '{node}': ConvTranspose output would be empty")
        if len(attrs.extra) != attrs.ndim or any(not 0 <= e < max(s, 1) for e, s in zip(attrs.extra, attrs.strides)):
            raise UnsupportedModelError(f"node '{node}': ConvTranspose output_padding {list(attrs.extra)} must be below "
                                        f"the strides {list(attrs.strides)}")
        return check_width(TensorType.from_range((attrs.weight.shape[1], *sp), lo, hi, facc), node, "the accumulator")

    def semantics(self, attrs: Attrs, xs, ins, out):
        x = xs[0].astype(np.int64)
        n, k, s = attrs.ndim, attrs.weight.shape[2:], attrs.strides
        full = tuple((x.shape[2 + i] - 1) * s[i] + k[i] for i in range(n))
        y = np.zeros((x.shape[0], attrs.weight.shape[1], *full), dtype=np.int64)
        for taps in itertools.product(*(range(v) for v in k)):
            contrib = exact_einsum("nc...,co->no...", x, attrs.weight[(slice(None), slice(None)) + taps])
            idx = tuple(slice(taps[i], taps[i] + (x.shape[2 + i] - 1) * s[i] + 1, s[i]) for i in range(n))
            y[(slice(None), slice(None)) + idx] += contrib
        # output_padding past the full output: positions no input reaches (0 before the bias)
        y = np.pad(y, ((0, 0), (0, 0)) + tuple((0, max(attrs.extra[i] - attrs.pads[n + i], 0)) for i in range(n)))
        crop = tuple(slice(attrs.pads[i], full[i] - attrs.pads[n + i] + attrs.extra[i]) for i in range(n))
        y = y[(slice(None), slice(None)) + crop]
        shift = np.int64(out.ftype.frac - ins[0].ftype.frac - attrs.wtype.frac)
        return (y << shift) + _bias_aligned(attrs, out.ftype.frac).reshape((-1,) + (1,) * n)

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        """Each output position gathers the input taps that reach it (``full = i * s + t``;
        none: a constant zero), one constant matrix product of (positions, c_in x taps) by the
        kernel, then the shift and bias of :meth:`semantics`."""
        idx = scatter_index(attrs, ins[0].shape, out.shape[1:])  # (positions, c_in, taps)
        cols = rtl.gather(xs[0], idx.reshape(idx.shape[0], -1))
        w = np.moveaxis(attrs.weight.reshape(attrs.weight.shape[0], attrs.weight.shape[1], -1), 1, -1)
        acc = rtl.matmul(cols, w.reshape(-1, attrs.weight.shape[1])).T.reshape(out.shape)
        acc = rtl.shift_left(acc, out.ftype.frac - ins[0].ftype.frac - attrs.wtype.frac)
        bias = _bias_aligned(attrs, out.ftype.frac)
        return rtl.add(acc, rtl.const(bias.reshape((-1,) + (1,) * attrs.ndim))) if bias.any() else acc

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        x = ins[0]
        bound = 0
        for w in phase_weights(attrs):
            _, mx = interval_dot(np.abs(w), 0, max(abs(x.lo), abs(x.hi)), axis=1)
            bound = max(bound, max(int(v) for v in mx))
        if bound >= 2**24 or max(abs(x.lo), abs(x.hi)) >= 2**24:
            raise UnsupportedModelError(
                f"ConvTranspose partial sums reach {bound}: not provably exact in float32 (the exact reference "
                "needs them below 2**24)")
        acc = builder.op("ConvTranspose", [builder.op("Cast", [xs[0]], to="float"), builder.const(attrs.weight.astype(np.float32))],
                   strides=list(attrs.strides), pads=list(attrs.pads), output_padding=list(attrs.extra))
        return finish_acc_onnx(builder, builder.op("Cast", [acc], to="int64"), out.ftype.frac - x.ftype.frac - attrs.wtype.frac,
                               _bias_aligned(attrs, out.ftype.frac).reshape((-1,) + (1,) * attrs.ndim))

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x, n = ins[0], attrs.ndim
        lead = 3 - n  # 1D / 2D as unit leading axes of the 3D kernel
        if not np.array_equal(hls.flat_perm(node.inputs[0]), np.moveaxis(np.arange(x.size).reshape(x.shape), 0, -1).ravel()):
            raise UnsupportedModelError(f"node '{node.name}': ConvTranspose of a tensor that is not stored channels-last")
        bias, btype = bias_or_zeros(attrs, attrs.weight.shape[1], out)
        weight = attrs.weight.reshape(attrs.weight.shape[:2] + (1,) * lead + attrs.weight.shape[2:])
        w = weight.transpose(2, 3, 4, 0, 1)  # (kd, kh, kw, c_in, c_out)
        layer = {"class_name": "TesseraConvTranspose3D", "data_format": "channels_last", "spatial_dims": n,
                 "n_chan": attrs.weight.shape[0], "n_filt": attrs.weight.shape[1],
                 "weight_data": np.ldexp(w.astype(np.float64), -attrs.wtype.frac),
                 "bias_data": np.ldexp(bias.astype(np.float64), -btype.frac)}
        grow = lambda v, one: (one,) * lead + tuple(v)  # noqa: E731
        begins, ends = grow(attrs.pads[:n], 0), grow(attrs.pads[n:], 0)
        for d, i_, o_, k_, s_ in zip(DIMS, grow(x.shape[1:], 1), grow(out.shape[1:], 1), weight.shape[2:],
                                     grow(attrs.strides, 1)):
            layer.update({f"in_{d}": i_, f"out_{d}": o_, f"filt_{d}": k_, f"stride_{d}": s_})
        layer.update(pad_front=begins[0], pad_top=begins[1], pad_left=begins[2],
                     pad_back=ends[0], pad_bottom=ends[1], pad_right=ends[2])
        hls.add_layer(node, layer, {"weight": attrs.wtype.hls(), "bias": btype.hls(), "accum": out.ftype.hls(),
                                   "result": out.ftype.hls()}, layout=Layout.CHANNELS)

    def macs(self, attrs, ins, out):
        return int(np.prod(ins[0].shape) * np.prod(attrs.weight.shape[1:]))

    def bias_size(self, attrs: Attrs) -> int:
        return int(attrs.weight.shape[1])

    def cost(self, attrs: Attrs, ins, out, io):
        """Gather form (hls_templates/convtranspose3d): each output pixel sums C x prod(ceil(k/s))
        input taps per filter; io_stream keeps a ring of ceil(k0/s0) input planes."""
        x = ins[0]
        c, f = attrs.weight.shape[:2]
        k = attrs.weight.shape[2:]
        per_dim = phase_taps(k, attrs.strides)
        taps = c * prod(per_dim)
        stream = io == "io_stream"
        # ring[ceil(k0/s0)][H][W][C]: complete over planes and channels, cyclic by the taps of H, W
        ring = Memory(prod(per_dim) * c, prod([-(-x.shape[2 + i] // per_dim[1 + i]) for i in range(attrs.ndim - 1)]),
                      bits(x))
        return linear_work(ins, out, macs=self.macs(attrs, ins, out), weight_bits=self.weight_bits(attrs),
                           mults=taps * f, taps=taps, steps=prod(out.shape[1:]), kind=self.weight_kind(attrs),
                           w_bits=attrs.wtype.width, line_buffer=(ring,) if stream else (),
                           fill_steps=(per_dim[0] - 1) * prod(out.shape[2:]) if stream else 0)

    def input_span(self, attrs: Attrs, span):
        k = attrs.weight.shape[2:]
        return tuple(transposed_input(lo, hi, k[i], attrs.strides[i], attrs.pads[i]) for i, (lo, hi) in enumerate(span))

    def with_pads(self, attrs: Attrs, pads):
        return dataclasses.replace(attrs, pads=tuple(pads))

    def tiling_refusal(self, attrs: Attrs) -> str | None:
        if any(attrs.extra):
            return "a transposed convolution's output_padding adds positions no block's input reaches"
        return None

    def spatial_stride(self, attrs: Attrs):
        return attrs.strides

    def scatter_origin(self, attrs: Attrs, have):
        # local output index 0 is global need * stride - pad
        return tuple(lo * s - p for (lo, _), s, p in zip(have, attrs.strides, attrs.pads))


OP = ConvTranspose()
