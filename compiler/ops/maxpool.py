"""MaxPool (ONNX MaxPool, 1D, 2D or 3D, with pads and dilations): the maximum code of each window.

Padded positions take no part (ONNX: the padding is -inf); every window must hold a real
position.  ``ceil_mode`` is the frontend's extra end padding.  A dilated window reads taps
``d`` apart, spanning ``(k - 1) * d + 1`` positions (:func:`tap_windows`, :func:`tap_index`,
shared with the average pool).  Unpadded, undilated 1D / 2D lower to hls4ml's
``MaxPooling1D`` / ``MaxPooling2D`` (in io_stream only when stride == kernel, which hls4ml's
stream kernels assert); 3D and every other pool to ``TesseraMaxPool3D``
(``hls_templates/pool3d``; 1D / 2D as depth and height 1), which skips padded positions and
reads its taps ``dilation`` apart.  A window op for the partitioner; the estimator costs one
output pixel per iteration with ``C x K`` comparators.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import TensorType
from .base import Layout, OpDef, Trait
from .conv import window_index, windows
from .base.extension import DIMS, Extension, KernelCall, LayerConfig, Weight, attr_shape, computed, layer_reuse, map_shape
from ..exact.spans import window_span
from .base.cost import Work, bits, line_buffer_2d, padded, plane_buffer, prod, window_registers


def _native(attrs: "Attrs", io) -> bool:
    """hls4ml's own 1D / 2D pooling (unpadded, undilated; in io_stream only windows that tile
    the input, stride == kernel, which its stream kernels assert); else Tessera's kernel."""
    tiles = tuple(attrs.kernel) == tuple(attrs.strides) or str(io) != "io_stream"
    return not any(attrs.padding) and not attrs.dilations and len(attrs.kernel) < 3 and tiles


class DilatedWindow:
    """What a pool's attributes say of its window (``kernel`` and ``dilations`` fields)."""

    kernel: tuple[int, ...]
    dilations: tuple[int, ...]

    @property
    def dilation(self) -> tuple[int, ...]:
        return self.dilations or (1,) * len(self.kernel)

    @property
    def span(self) -> tuple[int, ...]:
        return dilated_span(self.kernel, self.dilation)


@dataclass(frozen=True)
class Attrs(DilatedWindow):
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    pads: tuple[int, ...] = ()  # begins of each spatial dim, then ends; () for none
    dilations: tuple[int, ...] = ()  # per spatial dim; () for none (every dilation 1)

    @property
    def padding(self) -> tuple[int, ...]:
        return self.pads or (0,) * (2 * len(self.kernel))


def dilated_span(kernel, dilation) -> tuple[int, ...]:
    """The positions a window of ``kernel`` taps ``dilation`` apart spans, per dim."""
    return tuple((k - 1) * d + 1 for k, d in zip(kernel, dilation))


def tap_windows(x: np.ndarray, kernel, strides, dilation) -> np.ndarray:
    """(N, C, *out, *kernel): every tap of every window of ``x`` (already padded)."""
    win = windows(x, dilated_span(kernel, dilation), strides)
    return win[(Ellipsis,) + tuple(slice(None, None, d) for d in dilation)]


def tap_index(shape, kernel, strides, pads, dilation, out_spatial) -> np.ndarray:
    """(C, *out, *kernel): the flat index into a ``(C, *spatial)`` value of every tap of every
    window, -1 where it reads the padding."""
    idx = window_index(shape, dilated_span(kernel, dilation), strides, pads, out_spatial)
    return idx[(Ellipsis,) + tuple(slice(None, None, d) for d in dilation)]


def onnxruntime_pool(kernel, pads, dilations) -> bool:
    """Whether onnxruntime's own pool computes the window: it refuses a pad as large as the
    kernel on an axis (a dilated window, or extra end padding, may have one)."""
    n = len(kernel)
    return not dilations and all(pads[i] < kernel[i] and pads[n + i] < kernel[i] for i in range(n))


def tap_slices(builder, x: str, kernel, strides, pads, dilation, out_spatial, fill: int = 0) -> list[str]:
    """The exact reference's taps of a pool onnxruntime's own does not compute
    (:func:`onnxruntime_pool`; the reference's opset 17 has no dilated AveragePool either): per
    tap, the strided slice of the int64 codes ``x`` padded with ``fill`` that holds that tap of
    every window."""
    n = len(kernel)
    pad = builder.const(np.array([0, 0, *pads[:n], 0, 0, *pads[n:]], dtype=np.int64))
    padded = builder.op("Pad", [x, pad, builder.const(np.array(fill, dtype=np.int64))])
    steps = np.array(strides, dtype=np.int64)
    axes, last = np.arange(2, 2 + n, dtype=np.int64), (np.array(out_spatial, dtype=np.int64) - 1) * steps
    taps = []
    for tap in np.ndindex(*kernel):
        start = np.array(tap, dtype=np.int64) * np.array(dilation, dtype=np.int64)
        taps.append(builder.op("Slice", [padded, builder.const(start), builder.const(start + last + 1),
                                         builder.const(axes), builder.const(steps)]))
    return taps


def valid_taps(length: int, kernel: int, stride: int, pad: int, dilation: int, outputs: int) -> np.ndarray:
    """Per output position of one spatial dim: how many of its window's taps lie in the input."""
    taps = np.arange(outputs)[:, None] * stride - pad + np.arange(kernel)[None, :] * dilation
    return np.sum((taps >= 0) & (taps < length), axis=1)


def pool_work(kernel, strides, pads, x: TensorType, out: TensorType, io, extra_bits: int = 0,
              native: bool = False, span=None) -> Work:
    """Max / average pooling: one output pixel per iteration, C x K comparators or adders
    (``extra_bits`` wider for an average's sum); io_stream buffers: hls4ml's (``native``: its
    1D / 2D pooling) or Tessera's plane buffer over the window's ``span`` (dilated: wider than
    the kernel)."""
    k = prod(kernel)
    extent = padded(x, pads)
    stream = io == "io_stream"
    buf, fill = plane_buffer(x, out, span or kernel, strides, pads)
    if native:
        buf = window_registers(x, kernel) if len(kernel) == 1 else line_buffer_2d(x, kernel[0], pads)
    return Work(macs=0, steps=prod(extent) if stream else prod(out.shape[1:]), lanes=x.shape[0] * k,
                lut_per_lane=bits(x) + extra_bits, ff_per_lane=bits(out), line_buffer=(buf,) if stream else (),
                fill_steps=fill if stream else 0, out_bits=out.size * bits(out))


@dataclass(frozen=True)
class Pool3dSizes(LayerConfig):
    """What the config templates of the 3D max and average pooling share."""

    in_depth: int
    in_height: int
    in_width: int
    n_filt: int
    out_depth: int
    out_height: int
    out_width: int
    pool_depth: int
    pool_height: int
    pool_width: int
    stride_depth: int
    stride_height: int
    stride_width: int
    dilation_depth: int
    dilation_height: int
    dilation_width: int


@dataclass(frozen=True)
class MaxPool3dConfig(Pool3dSizes):
    template: ClassVar[str] = "pool3d/config.tpl"
    pad_depth: int
    pad_height: int
    pad_width: int
    reuse_factor: int = computed(layer_reuse)


@dataclass(frozen=True)
class MaxPool3dCall(KernelCall):
    template: ClassVar[str] = "pool3d/function.tpl"


def pool3d_extension(layer: str, doc: str, folder: str, header: str, config: type[Pool3dSizes], call: type[KernelCall],
                     weights: tuple[Weight, ...] = ()) -> Extension:
    """A 3D pooling extension layer, channels-last."""
    return Extension(layer, doc, folder, header, config=config, call=call,
                     output_shape=map_shape(attr_shape(*(f"out_{d}" for d in DIMS)), "n_filt"),
                     attributes=("spatial_dims",), weights=weights)


class MaxPool(OpDef[Attrs]):
    name = "maxpool"
    traits = frozenset({Trait.WINDOW, Trait.RANGE_EXACT, Trait.CODE_SELECT})
    extensions = (pool3d_extension("TesseraMaxPool3D", "3D max pooling, channels-last; padded positions skipped.",
                                   "pool3d", "nnet_tessera_pool3d.h", MaxPool3dConfig, MaxPool3dCall),)

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        n = len(attrs.kernel)
        if len(x.shape) != n + 1:
            raise UnsupportedModelError(f"node '{node}': {n}D MaxPool expects a (C, {n} spatial) input, got {x.shape}")
        if len(attrs.strides) != n or min(attrs.strides) < 1 or min(attrs.kernel) < 1:
            raise UnsupportedModelError(f"node '{node}': invalid MaxPool kernel {attrs.kernel} or strides {attrs.strides}")
        p = attrs.padding
        if len(p) != 2 * n or min(p) < 0:
            raise UnsupportedModelError(f"node '{node}': invalid MaxPool pads {attrs.pads}")
        if len(attrs.dilation) != n or min(attrs.dilation) < 1:
            raise UnsupportedModelError(f"node '{node}': invalid MaxPool dilations {attrs.dilations}")
        sp = tuple((x.shape[1 + i] + p[i] + p[n + i] - attrs.span[i]) // attrs.strides[i] + 1 for i in range(n))
        if min(sp) < 1:
            raise UnsupportedModelError(f"node '{node}': MaxPool window larger than input {x.shape}")
        for i in range(n):  # every window must hold a real position (per dim: the windows are boxes)
            if valid_taps(x.shape[1 + i], attrs.kernel[i], attrs.strides[i], p[i], attrs.dilation[i], sp[i]).min() < 1:
                raise UnsupportedModelError(f"node '{node}': MaxPool with pads {list(p)}: a window of dim {i} lies "
                                            "entirely in the padding")
        return TensorType((x.shape[0], *sp), x.ftype, x.lo, x.hi)

    def semantics(self, attrs: Attrs, xs, ins, out):
        n = len(attrs.kernel)
        x = xs[0]
        if any(attrs.padding):  # padded positions below every code: never the maximum
            p = attrs.padding
            x = np.pad(x.astype(np.int64), ((0, 0), (0, 0)) + tuple((p[i], p[n + i]) for i in range(n)),
                       constant_values=int(ins[0].lo) - 1)
        win = tap_windows(x, attrs.kernel, attrs.strides, attrs.dilation)
        win = win[(slice(None), slice(None)) + tuple(slice(0, s) for s in out.shape[1:])]
        return win.max(axis=tuple(range(2 + n, 2 + 2 * n)))

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        """The maximum of each window's taps; a padded tap (never the maximum) reads the
        window's first real position instead."""
        idx = tap_index(ins[0].shape, attrs.kernel, attrs.strides, attrs.padding, attrs.dilation,
                        out.shape[1:]).reshape(*out.shape, -1)
        first = np.take_along_axis(idx, np.argmax(idx >= 0, axis=-1)[..., None], axis=-1)
        return rtl.reduce_max(rtl.gather(xs[0], np.where(idx >= 0, idx, first)), axis=-1)

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        if not onnxruntime_pool(attrs.kernel, attrs.padding, attrs.dilations):
            # the maximum of the taps, the padding below every code
            taps = tap_slices(builder, xs[0], attrs.kernel, attrs.strides, attrs.padding, attrs.dilation,
                              out.shape[1:], fill=int(ins[0].lo) - 1)
            return taps[0] if len(taps) == 1 else builder.op("Max", taps)
        # A max of integers below 2**52 is exact in float64.
        v = builder.op("MaxPool", [builder.op("Cast", [xs[0]], to="double")], kernel_shape=list(attrs.kernel),
                       strides=list(attrs.strides), pads=list(attrs.padding))
        return builder.op("Cast", [v], to="int64")

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        n = len(attrs.kernel)
        if not _native(attrs, hls.opts.io_type):
            self._lower_tessera(attrs, hls, node, x, out)
            return
        if n == 1:  # hls4ml's Pooling1D names its sizes n_in / n_out
            layer = {"class_name": "MaxPooling1D", "data_format": "channels_last", "n_filt": x.shape[0],
                     "n_in": x.shape[1], "n_out": out.shape[1], "pool_width": attrs.kernel[0],
                     "stride_width": attrs.strides[0], "pad_left": 0, "pad_right": 0}
        else:
            layer = {"class_name": "MaxPooling2D", "data_format": "channels_last", "n_filt": x.shape[0],
                     "pad_top": 0, "pad_bottom": 0, "pad_left": 0, "pad_right": 0}
            for i, d in enumerate(("height", "width")):
                layer.update({f"in_{d}": x.shape[1 + i], f"out_{d}": out.shape[1 + i], f"pool_{d}": attrs.kernel[i],
                              f"stride_{d}": attrs.strides[i]})
        hls.add_layer(node, layer, {"result": out.ftype.hls(), "accum": out.ftype.hls()}, layout=Layout.CHANNELS)

    def _lower_tessera(self, attrs: Attrs, hls, node, x, out):
        """3D, padded or dilated: Tessera's kernel (1D / 2D with leading unit dims)."""
        n = len(attrs.kernel)
        lead = 3 - n
        grow = lambda v, one: (one,) * lead + tuple(v)  # noqa: E731
        p = attrs.padding
        layer = {"class_name": "TesseraMaxPool3D", "data_format": "channels_last", "n_filt": x.shape[0],
                 "spatial_dims": n}
        for d, i_, o_, k_, s_, b_, t_ in zip(DIMS, grow(x.shape[1:], 1), grow(out.shape[1:], 1), grow(attrs.kernel, 1),
                                            grow(attrs.strides, 1), grow(p[:n], 0), grow(attrs.dilation, 1)):
            layer.update({f"in_{d}": i_, f"out_{d}": o_, f"pool_{d}": k_, f"stride_{d}": s_, f"pad_{d}": b_,
                          f"dilation_{d}": t_})
        hls.add_layer(node, layer, {"result": out.ftype.hls(), "accum": out.ftype.hls()}, layout=Layout.CHANNELS)

    def cost(self, attrs: Attrs, ins, out, io):
        return pool_work(attrs.kernel, attrs.strides, attrs.padding, ins[0], out, io, native=_native(attrs, io),
                         span=attrs.span)

    def input_span(self, attrs: Attrs, span):
        return window_span(span, attrs.span, attrs.strides, attrs.padding[:len(attrs.kernel)])

    def with_pads(self, attrs: Attrs, pads):
        return dataclasses.replace(attrs, pads=tuple(pads) if any(pads) else ())

    def tiling_refusal(self, attrs: Attrs) -> str | None:
        if any(attrs.padding):
            return "a padded max pool (its padding is -inf) cannot be tiled with zero-filled block borders"
        return None

    def spatial_stride(self, attrs: Attrs):
        return attrs.strides


OP = MaxPool()
