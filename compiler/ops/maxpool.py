"""MaxPool (ONNX MaxPool, 1D, 2D or 3D, with pads): the maximum code of each window.

Padded positions take no part (ONNX: the padding is -inf); every window must hold a real
position.  ``ceil_mode`` is the frontend's extra end padding.  Unpadded 1D / 2D lower to
hls4ml's ``MaxPooling1D`` / ``MaxPooling2D`` (in io_stream only when stride == kernel, which
hls4ml's stream kernels assert); 3D and every other pool to ``TesseraMaxPool3D``
(``hls_templates/pool3d``; 1D / 2D as depth and height 1), which skips padded positions.
A window op for the partitioner; the estimator costs one output pixel per iteration with
``C x K`` comparators.
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
    """hls4ml's own 1D / 2D pooling (unpadded; in io_stream only windows that tile the input,
    stride == kernel, which its stream kernels assert); else Tessera's kernel."""
    tiles = tuple(attrs.kernel) == tuple(attrs.strides) or str(io) != "io_stream"
    return not any(attrs.padding) and len(attrs.kernel) < 3 and tiles


@dataclass(frozen=True)
class Attrs:
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    pads: tuple[int, ...] = ()  # begins of each spatial dim, then ends; () for none

    @property
    def padding(self) -> tuple[int, ...]:
        return self.pads or (0,) * (2 * len(self.kernel))


def pool_work(kernel, strides, pads, x: TensorType, out: TensorType, io, extra_bits: int = 0,
              native: bool = False) -> Work:
    """Max / average pooling: one output pixel per iteration, C x K comparators or adders
    (``extra_bits`` wider for an average's sum); io_stream buffers: hls4ml's (``native``: its
    1D / 2D pooling) or Tessera's plane buffer."""
    k = prod(kernel)
    extent = padded(x, pads)
    stream = io == "io_stream"
    buf, fill = plane_buffer(x, out, kernel, strides, pads)
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
        sp = tuple((x.shape[1 + i] + p[i] + p[n + i] - attrs.kernel[i]) // attrs.strides[i] + 1 for i in range(n))
        if min(sp) < 1:
            raise UnsupportedModelError(f"node '{node}': MaxPool window larger than input {x.shape}")
        for i in range(n):  # the first and the last window of each dim must hold a real position
            last = (sp[i] - 1) * attrs.strides[i] - p[i]
            if p[i] >= attrs.kernel[i] or last >= x.shape[1 + i]:
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
        win = windows(x, attrs.kernel, attrs.strides)
        win = win[(slice(None), slice(None)) + tuple(slice(0, s) for s in out.shape[1:])]
        return win.max(axis=tuple(range(2 + n, 2 + 2 * n)))

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        """The maximum of each window's taps; a padded tap (never the maximum) reads the
        window's first real position instead."""
        idx = window_index(ins[0].shape, attrs.kernel, attrs.strides, attrs.padding, out.shape[1:]).reshape(*out.shape, -1)
        first = np.take_along_axis(idx, np.argmax(idx >= 0, axis=-1)[..., None], axis=-1)
        return rtl.reduce_max(rtl.gather(xs[0], np.where(idx >= 0, idx, first)), axis=-1)

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
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
        """3D or padded: Tessera's kernel (1D / 2D with leading unit dims)."""
        n = len(attrs.kernel)
        lead = 3 - n
        grow = lambda v, one: (one,) * lead + tuple(v)  # noqa: E731
        p = attrs.padding
        layer = {"class_name": "TesseraMaxPool3D", "data_format": "channels_last", "n_filt": x.shape[0],
                 "spatial_dims": n}
        for d, i_, o_, k_, s_, b_ in zip(DIMS, grow(x.shape[1:], 1), grow(out.shape[1:], 1), grow(attrs.kernel, 1),
                                        grow(attrs.strides, 1), grow(p[:n], 0)):
            layer.update({f"in_{d}": i_, f"out_{d}": o_, f"pool_{d}": k_, f"stride_{d}": s_, f"pad_{d}": b_})
        hls.add_layer(node, layer, {"result": out.ftype.hls(), "accum": out.ftype.hls()}, layout=Layout.CHANNELS)

    def cost(self, attrs: Attrs, ins, out, io):
        return pool_work(attrs.kernel, attrs.strides, attrs.padding, ins[0], out, io, native=_native(attrs, io))

    def input_span(self, attrs: Attrs, span):
        return window_span(span, attrs.kernel, attrs.strides, attrs.padding[:len(attrs.kernel)])

    def with_pads(self, attrs: Attrs, pads):
        return dataclasses.replace(attrs, pads=tuple(pads) if any(pads) else ())

    def tiling_refusal(self, attrs: Attrs) -> str | None:
        if any(attrs.padding):
            return "a padded max pool (its padding is -inf) cannot be tiled with zero-filled block borders"
        return None

    def spatial_stride(self, attrs: Attrs):
        return attrs.strides


OP = MaxPool()
