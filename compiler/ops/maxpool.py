"""MaxPool (ONNX MaxPool, 1D, 2D or 3D, no padding, floor mode): the maximum code of each window.

1D lowers to hls4ml's ``MaxPooling1D``, 2D to ``MaxPooling2D``, 3D to ``TesseraMaxPool3D`` (``hls_templates/pool3d``).
A window op for the partitioner; the estimator costs one output pixel per iteration with
``C x K`` comparators.
"""

from __future__ import annotations

from dataclasses import dataclass


from ..errors import UnsupportedModelError
from ..ir.types import TensorType
from .base import Layout, OpDef, Trait
from .conv import windows
from .extension import DIMS, Extension, attr_shape
from .spans import window_span
from .work import Work, bits, padded, prod, window_buffer


@dataclass(frozen=True)
class Attrs:
    kernel: tuple[int, ...]
    strides: tuple[int, ...]


def pool_work(kernel, pads, x: TensorType, out: TensorType, io, extra_bits: int = 0) -> Work:
    """Max / average pooling: one output pixel per iteration, C x K comparators or adders
    (``extra_bits`` wider for an average's sum)."""
    k = prod(kernel)
    extent = padded(x, pads)
    stream = io == "io_stream"
    buf, fill = window_buffer(x, kernel[0], extent)
    return Work(macs=0, steps=prod(extent) if stream else prod(out.shape[1:]), lanes=x.shape[0] * k,
                lut_per_lane=bits(x) + extra_bits, ff_per_lane=bits(out), line_buffer_bits=buf if stream else 0,
                fill_steps=fill if stream else 0, out_bits=out.size * bits(out))


def pool3d_extension(layer: str, doc: str, folder: str, header: str, extra: tuple[str, ...] = (),
                     texts: tuple[str, ...] = (), types: tuple[str, ...] = (), config_types=None) -> Extension:
    """A 3D pooling extension layer, channels-last (``extra`` integer and ``texts`` string
    attributes after the sizes, all in its config)."""
    sizes = tuple(f"{p}_{d}" for p in ("in", "out", "pool", "stride") for d in DIMS) + ("n_filt",) + extra
    return Extension(layer, doc, folder, header, config_keys=sizes + texts,
                     output_shape=attr_shape(*(f"out_{d}" for d in DIMS), last="n_filt"), attributes=sizes,
                     texts=texts, types=types, config_types=config_types)


class MaxPool(OpDef[Attrs]):
    name = "maxpool"
    traits = frozenset({Trait.WINDOW, Trait.RANGE_EXACT, Trait.CODE_SELECT})
    extensions = (pool3d_extension("TesseraMaxPool3D", "3D max pooling, channels-last, no padding.", "pool3d",
                                   "nnet_tessera_pool3d.h"),)

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

    def semantics(self, attrs: Attrs, xs, ins, out):
        n = len(attrs.kernel)
        win = windows(xs[0], attrs.kernel, attrs.strides)
        win = win[(slice(None), slice(None)) + tuple(slice(0, s) for s in out.shape[1:])]
        return win.max(axis=tuple(range(2 + n, 2 + 2 * n)))

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        # A max of integers below 2**52 is exact in float64.
        v = builder.op("MaxPool", [builder.op("Cast", [xs[0]], to="double")], kernel_shape=list(attrs.kernel), strides=list(attrs.strides))
        return builder.op("Cast", [v], to="int64")

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        n = len(attrs.kernel)
        if n == 1:  # hls4ml's Pooling1D names its sizes n_in / n_out
            layer = {"class_name": "MaxPooling1D", "data_format": "channels_last", "n_filt": x.shape[0],
                     "n_in": x.shape[1], "n_out": out.shape[1], "pool_width": attrs.kernel[0],
                     "stride_width": attrs.strides[0], "pad_left": 0, "pad_right": 0}
            hls.add_layer(node, layer, {"result": out.ftype.hls(), "accum": out.ftype.hls()}, layout=Layout.CHANNELS)
            return
        dims = ("height", "width") if n == 2 else DIMS
        layer = {"class_name": "MaxPooling2D" if n == 2 else "TesseraMaxPool3D", "data_format": "channels_last",
                 "n_filt": x.shape[0]}
        for i, d in enumerate(dims):
            layer[f"in_{d}"] = x.shape[1 + i]
            layer[f"out_{d}"] = out.shape[1 + i]
            layer[f"pool_{d}"] = attrs.kernel[i]
            layer[f"stride_{d}"] = attrs.strides[i]
        if n == 2:
            layer.update(pad_top=0, pad_bottom=0, pad_left=0, pad_right=0)
        hls.add_layer(node, layer, {"result": out.ftype.hls(), "accum": out.ftype.hls()}, layout=Layout.CHANNELS)

    def cost(self, attrs: Attrs, ins, out, io):
        return pool_work(attrs.kernel, (0,) * (2 * len(attrs.kernel)), ins[0], out, io)

    def input_span(self, attrs: Attrs, span):
        return window_span(span, attrs.kernel, attrs.strides, (0,) * len(attrs.kernel))

    def spatial_stride(self, attrs: Attrs):
        return attrs.strides


OP = MaxPool()
