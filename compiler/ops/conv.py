"""Convolution (ONNX Conv, N C spatial..., any ``group``, dilation 1) in 1D, 2D or 3D.

``acc = sum(w * x) + b`` on integer codes, each output channel summing the input channels of
its group; accumulator typing follows :mod:`.dense`: the exact interval over every input the
type allows, per output channel, from the actual weight codes.  1D lowers to hls4ml's
``Conv1D``, 2D to hls4ml's ``Conv2D`` (a depthwise 2D conv, ``group == c_in == c_out``, to hls4ml's ``DepthwiseConv2D``);
3D (which hls4ml lacks) to Tessera's ``TesseraConv3D`` extension layer
(``hls_templates/conv3d``).  Any other grouped conv is lowered as the ungrouped conv whose
weights are block-diagonal (zero between groups): the same sums, exactly; its zero products
are constant and the estimator does not count them.  A window op for the
partitioner; the estimator costs one output pixel per iteration (io_stream: one padded
input pixel per iteration, the last ``k_depth`` planes in a line buffer).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import FixedType, TensorType
from ..exact.integer import exact_einsum
from .base import Layout, Trait, check_width, limb_kernel
from .base.extension import DIMS, Extension, KernelCall, LayerConfig, Weight, attr_shape, computed, layer_reuse, map_shape
from .base.linear import (LinearOp, bias_aligned, bias_or_zeros, check_linear_attrs, finish_acc_onnx,
                     linear_acc_frac, linear_acc_range)
from ..exact.spans import window_span
from .base.cost import line_buffer_2d, linear_work, multiplier_limit, padded, plane_buffer, prod, window_registers


@dataclass(frozen=True, eq=False)
class Attrs:
    weight: np.ndarray  # int64 codes, (c_out, c_in, *kernel)
    wtype: FixedType
    bias: np.ndarray | None
    btype: FixedType | None
    strides: tuple[int, ...]
    pads: tuple[int, ...]  # ONNX order: begins of each spatial dim, then ends
    group: int = 1  # weight is (c_out, c_in / group, *kernel)

    @property
    def ndim(self) -> int:
        return self.weight.ndim - 2

    @property
    def c_in(self) -> int:
        return self.weight.shape[1] * self.group

    @property
    def depthwise(self) -> bool:
        """One input channel per output channel (ONNX group == c_in == c_out)."""
        return self.group > 1 and self.group == self.c_in == self.weight.shape[0]


def _one_row_strided(attrs: "Attrs", io) -> bool:
    """A 2D convolution hls4ml's io_stream Conv2D computes wrongly: a one-row kernel wider than
    one column with a row stride above 1 (its stream kernel ignores that stride: measured
    595 of 960 outputs wrong for a 1x3 kernel of strides (2, 1)); Tessera's 3D kernel
    computes it as depth 1."""
    k, s = attrs.weight.shape[2:], attrs.strides
    return attrs.ndim == 2 and str(io) == "io_stream" and k[0] == 1 and s[0] > 1 and k[1] > 1


def dense_weight(attrs: Attrs) -> np.ndarray:
    """The (c_out, c_in, *kernel) weights of the ungrouped conv that computes the same sums:
    zero between groups."""
    f, cg = attrs.weight.shape[:2]
    fg = f // attrs.group
    full = np.zeros((f, attrs.c_in, *attrs.weight.shape[2:]), dtype=np.int64)
    for g in range(attrs.group):
        full[g * fg:(g + 1) * fg, g * cg:(g + 1) * cg] = attrs.weight[g * fg:(g + 1) * fg]
    return full


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


def window_index(shape: tuple[int, ...], kernel: tuple[int, ...], strides: tuple[int, ...], pads: tuple[int, ...],
                 out_spatial: tuple[int, ...]) -> np.ndarray:
    """(C, *out, *kernel): the flat index into a ``(C, *spatial)`` value of every tap of every
    window (:func:`windows` on the indices), -1 where a tap reads the padding."""
    n = len(kernel)
    idx = np.arange(int(np.prod(shape))).reshape(1, *shape)
    pad = ((0, 0), (0, 0)) + tuple((pads[i], pads[n + i]) for i in range(n))
    win = windows(np.pad(idx, pad, constant_values=-1), kernel, strides)
    return win[(0, slice(None)) + tuple(slice(0, s) for s in out_spatial)]


def conv_products(layer) -> tuple[int, int]:
    """(products of one pipelined output position, of them by zero weights) of the 3D
    convolution kernel: every tap of every channel and filter (its cost facet's count)."""
    weights = layer.get_weights("weight")
    mults = int(np.prod([layer.get_attr(f"filt_{d}") for d in DIMS])) * layer.get_attr("n_chan") * layer.get_attr("n_filt")
    return mults, int(np.count_nonzero(np.asarray(weights.data) == 0))


def conv_multiplier_limit(products: Callable[[Any], tuple[int, int]]) -> Callable[[Any], int]:
    """The 3D (transposed) convolution kernel's multiplier limit (its ALLOCATION pragma; the
    estimator's count, ops/base/cost.py) from ``products`` (the kernel's products per
    pipelined iteration and its zero ones)."""
    def limit(layer) -> int:
        mults, zeros = products(layer)
        return multiplier_limit(mults, zeros, layer_reuse(layer))
    return limit


@dataclass(frozen=True)
class Conv3dSizes(LayerConfig):
    """What the config templates of the 3D convolution and transposed convolution share."""

    in_depth: int
    in_height: int
    in_width: int
    n_chan: int
    out_depth: int
    out_height: int
    out_width: int
    n_filt: int
    filt_depth: int
    filt_height: int
    filt_width: int
    stride_depth: int
    stride_height: int
    stride_width: int
    pad_front: int
    pad_top: int
    pad_left: int
    reuse_factor: int = computed(layer_reuse)
    accum_t: str
    weight_t: str
    bias_t: str


@dataclass(frozen=True)
class Conv3dConfig(Conv3dSizes):
    template: ClassVar[str] = "conv3d/config.tpl"
    n_zeros: int = computed(lambda layer: conv_products(layer)[1])
    multiplier_limit: int = computed(conv_multiplier_limit(conv_products))


@dataclass(frozen=True)
class Conv3dCall(KernelCall):
    template: ClassVar[str] = "conv3d/function.tpl"
    weight: str
    bias: str


def conv3d_extension(layer: str, doc: str, folder: str, header: str, config: type[Conv3dSizes],
                     call: type[Conv3dCall], of_maps: bool = False) -> Extension:
    """The extension layer of a 3D (transposed) convolution, channels-last; attributes
    mirror hls4ml's Conv2D plus depth.  ``of_maps``: the layer also runs 1D and 2D maps (as
    volumes of unit leading axes) and its output takes the map's rank (attribute
    ``spatial_dims``), which hls4ml's own layers after it read (a Conv1D's im2col reads
    (W, C))."""
    sizes = attr_shape(*(f"out_{d}" for d in DIMS))
    return Extension(
        layer, doc, folder, header, config=config, call=call,
        output_shape=map_shape(sizes, "n_filt") if of_maps else attr_shape(*(f"out_{d}" for d in DIMS), last="n_filt"),
        attributes=("pad_back", "pad_bottom", "pad_right", *(("spatial_dims",) if of_maps else ())),
        weights=(Weight("weight", "w{index}"), Weight("bias", "b{index}")))


class Conv(LinearOp[Attrs]):
    name = "conv"
    traits = LinearOp.traits | {Trait.WINDOW}
    extensions = (conv3d_extension("TesseraConv3D", "3D convolution, channels-last.", "conv3d",
                                   "nnet_tessera_conv3d.h", Conv3dConfig, Conv3dCall),)

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        if attrs.group < 1 or attrs.weight.shape[0] % attrs.group:
            raise UnsupportedModelError(f"node '{node}': Conv attribute group={attrs.group} does not divide the "
                                        f"{attrs.weight.shape[0]} output channels")
        if attrs.group > 1 and x.shape[0] != attrs.c_in:
            raise UnsupportedModelError(f"node '{node}': Conv with group={attrs.group} and weights {attrs.weight.shape} "
                                        f"needs {attrs.c_in} input channels, got {x.shape[0]}")
        check_linear_attrs(attrs, x, attrs.c_in, attrs.weight.shape[0], node, "Conv")
        facc = linear_acc_frac(x, attrs.wtype, attrs.btype)
        shift = facc - x.ftype.frac - attrs.wtype.frac
        lo, hi = linear_acc_range([attrs.weight.reshape(attrs.weight.shape[0], -1)], x, shift, _bias_aligned(attrs, facc))
        sp = out_spatial(attrs, x.shape[1:])
        if min(sp) < 1:
            raise UnsupportedModelError(f"node '{node}': Conv output would be empty for input {x.shape}")
        return check_width(TensorType.from_range((attrs.weight.shape[0], *sp), lo, hi, facc), node, "the accumulator")

    def semantics(self, attrs: Attrs, xs, ins, out):
        n = attrs.ndim
        pad = ((0, 0), (0, 0)) + tuple((attrs.pads[i], attrs.pads[n + i]) for i in range(n))
        win = windows(np.pad(xs[0].astype(np.int64), pad), attrs.weight.shape[2:], attrs.strides)
        win = win[(slice(None), slice(None)) + tuple(slice(0, s) for s in out.shape[1:])]
        letters = "defg"[:n]
        ks = "ijkl"[:n]
        g = attrs.group
        win = win.reshape(win.shape[0], g, -1, *win.shape[2:])  # (N, group, c_in / group, *out, *kernel)
        w = attrs.weight.reshape(g, -1, *attrs.weight.shape[1:])
        acc = exact_einsum(f"ngc{letters}{ks},goc{ks}->ngo{letters}", win, w)
        acc = acc.reshape(acc.shape[0], -1, *acc.shape[3:])
        shift = np.int64(out.ftype.frac - ins[0].ftype.frac - attrs.wtype.frac)
        return (acc << shift) + _bias_aligned(attrs, out.ftype.frac).reshape((-1,) + (1,) * n)

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        """im2col by a gather (the padding: constant zeros), then per group one constant
        matrix product of the (positions, c_in / group x taps) columns."""
        g, (f, cg) = attrs.group, attrs.weight.shape[:2]
        idx = window_index(ins[0].shape, attrs.weight.shape[2:], attrs.strides, attrs.pads, out.shape[1:])
        taps = cg * int(np.prod(attrs.weight.shape[2:]))
        idx = np.moveaxis(idx.reshape(g, cg, *out.shape[1:], -1), 1, -2).reshape(g, -1, taps)  # (group, positions, taps)
        cols = rtl.gather(xs[0], idx)
        w = attrs.weight.reshape(g, f // g, -1)
        acc = rtl.concat([rtl.matmul(cols[i], w[i].T) for i in range(g)], axis=1).T.reshape(out.shape)
        acc = rtl.shift_left(acc, out.ftype.frac - ins[0].ftype.frac - attrs.wtype.frac)
        bias = _bias_aligned(attrs, out.ftype.frac)
        return rtl.add(acc, rtl.const(bias.reshape((-1,) + (1,) * attrs.ndim))) if bias.any() else acc

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        x = ins[0]
        # one ConvInteger per 7-bit weight limb (also weights wider than 8 bits, e.g.
        # per-channel scales moved onto one grid) and per 7-bit digit of wider inputs,
        # recombined in int64: exact
        acc = limb_kernel(builder, "ConvInteger", xs[0], x, attrs.weight, out_axis=0, pads=list(attrs.pads),
                          strides=list(attrs.strides), group=attrs.group)
        if acc is None:
            raise UnsupportedModelError(
                f"Conv with {x.ftype.width}-bit inputs: an int32 sum of the exact reference's ConvInteger could overflow"
            )
        return finish_acc_onnx(builder, acc, out.ftype.frac - x.ftype.frac - attrs.wtype.frac,
                               _bias_aligned(attrs, out.ftype.frac).reshape((-1,) + (1,) * attrs.ndim))

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        if hls.flat_perm(node.inputs[0]).tolist() != hls.layout_perm(x.shape, Layout.CHANNELS).tolist():
            raise UnsupportedModelError(f"node '{node.name}': a convolution over a tensor that is not stored "
                                        f"channels-last (its {x.shape} codes are held in another order, e.g. a "
                                        "MatMul over the length of a 1D signal) is not supported")
        bias, btype = bias_or_zeros(attrs, attrs.weight.shape[0], out)
        lifted = _one_row_strided(attrs, hls.opts.io_type)  # our 3D kernel, as depth 1
        native_depthwise = attrs.depthwise and attrs.ndim == 2 and not lifted
        # kernel layout (*kernel, c_in, c_out), as hls4ml's Conv2D and our Conv3D expect;
        # hls4ml's DepthwiseConv2D takes (*kernel, c)
        full = attrs.weight if native_depthwise else dense_weight(attrs)
        w = full.transpose(*range(2, 2 + attrs.ndim), 1, 0)
        if native_depthwise:
            w = w[..., 0, :]
        if lifted:
            w = w[None]
        layer = {
            "data_format": "channels_last",
            "n_chan": attrs.c_in,
            "n_filt": attrs.weight.shape[0],
            ("depthwise_data" if native_depthwise else "weight_data"): np.ldexp(w.astype(np.float64), -attrs.wtype.frac),
            "bias_data": np.ldexp(bias.astype(np.float64), -btype.frac),
        }
        ndim = 3 if lifted else attrs.ndim
        dims = {1: ("width",), 2: ("height", "width"), 3: ("depth", "height", "width")}[ndim]
        begin = {1: ("left",), 2: ("top", "left"), 3: ("front", "top", "left")}[ndim]
        end = {1: ("right",), 2: ("bottom", "right"), 3: ("back", "bottom", "right")}[ndim]
        lift = (1,) * (ndim - attrs.ndim)  # a lifted 2D convolution: depth 1
        spatial_in, spatial_out = lift + tuple(x.shape[1:]), lift + tuple(out.shape[1:])
        kernel, strides = lift + tuple(attrs.weight.shape[2:]), lift + tuple(attrs.strides)
        pads = (0,) * len(lift) + tuple(attrs.pads[:attrs.ndim]) + (0,) * len(lift) + tuple(attrs.pads[attrs.ndim:])
        for i, d in enumerate(dims):
            layer[f"in_{d}"] = spatial_in[i]
            layer[f"out_{d}"] = spatial_out[i]
            layer[f"filt_{d}"] = kernel[i]
            layer[f"stride_{d}"] = strides[i]
            layer[f"pad_{begin[i]}"] = pads[i]
            layer[f"pad_{end[i]}"] = pads[ndim + i]
        layer["class_name"] = {1: "Conv1D", 3: "TesseraConv3D"}.get(ndim, "DepthwiseConv2D" if native_depthwise else "Conv2D")
        if native_depthwise:
            layer["depth_multiplier"] = 1
        precision = {"weight": attrs.wtype.hls(), "bias": btype.hls(), "accum": out.ftype.hls(), "result": out.ftype.hls()}
        hls.add_layer(node, layer, precision, layout=Layout.CHANNELS)

    def macs(self, attrs, ins, out):
        return int(np.prod(out.shape) * np.prod(attrs.weight.shape[1:]))

    def bias_size(self, attrs: Attrs) -> int:
        return int(attrs.weight.shape[0])

    def cost(self, attrs: Attrs, ins, out, io):
        x = ins[0]
        w = attrs.weight if attrs.group == 1 or attrs.depthwise else dense_weight(attrs)  # the weights as lowered
        f, c = w.shape[:2]
        k = w.shape[2:]
        extent = padded(x, attrs.pads)
        buf, fill = plane_buffer(x, out, k, attrs.strides, attrs.pads)  # Tessera's 3D kernel
        if attrs.ndim < 3 and not _one_row_strided(attrs, io):  # hls4ml's Conv1D / Conv2D
            buf = window_registers(x, k) if attrs.ndim == 1 else line_buffer_2d(x, k[0], attrs.pads)
        stream = io == "io_stream"
        return linear_work(ins, out, macs=self.macs(attrs, ins, out), weight_bits=self.weight_bits(attrs),
                           mults=prod(k) * c * f, taps=prod(k) * c,
                           steps=prod(extent) if stream else prod(out.shape[1:]), kind=self.weight_kind(attrs),
                           w_bits=attrs.wtype.width, reuse_dims=(prod(k) * c, f) if attrs.ndim < 3 else None,
                           line_buffer=(buf,) if stream else (), fill_steps=fill if stream else 0,
                           zero_mults=int(np.count_nonzero(w == 0)))

    def input_span(self, attrs: Attrs, span):
        return window_span(span, attrs.weight.shape[2:], attrs.strides, attrs.pads)

    def with_pads(self, attrs: Attrs, pads):
        return dataclasses.replace(attrs, pads=tuple(pads))

    def spatial_stride(self, attrs: Attrs):
        return attrs.strides


OP = Conv()
