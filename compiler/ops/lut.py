"""Lookup-table activations: a nonlinearity followed by its output ``Quant``, as one table.

For ONNX ``Sigmoid``/``Tanh`` (and ``HardSigmoid``, ``HardSwish``, ``Elu``, ``Selu``, ``Celu``,
``Softsign``, ``Softplus``, ``ThresholdedRelu``) whose output goes straight into a ``Quant``, the compiler
computes ``table[k] = Quant(f(k * s_x))`` once for every input code ``k`` in the input's
reachable range (float64 ``f`` of the exact input, then the Quant's exact rounding; ``s_x`` a
power of two or a float scale ``m * 2**-f``, the output's scale likewise: its codes then carry
it in the graph); the onnxruntime
reference (``Gather``) and the HLS kernel (``hls_templates/lut``) read the same table.
Domains above ``MAX_DOMAIN`` codes are refused: quantize the input first.  A table may also
come as it is (``Attrs.codes``): each quantizer of a graph input that several quantizers read,
differently, as a function of the cell of the real line the input lies in (the design's input
codes: ``ir.meaning.InputMap.cuts``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import FixedType, TensorType
from .base import OpDef, Trait
from .base.extension import Extension, KernelCall, LayerConfig, Weight, elementwise_shape
from .quant import Attrs as QuantAttrs
from .quant import quantize_float
from .base.cost import table_work

MAX_DOMAIN = 1 << 16

def _hard_sigmoid(v, alpha, beta):
    return np.maximum(0, np.minimum(1, v * alpha + beta))


#: Each function of the ONNX operator of that name, in float64, with its attributes in the
#: order the frontend passes them (``lut.Attrs.params``: the model's float32 values)
FUNCTIONS = {
    "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
    "tanh": np.tanh,
    "hardsigmoid": _hard_sigmoid,
    "hardswish": lambda v: v * _hard_sigmoid(v, float(np.float32(1 / 6)), 0.5),  # ONNX's function body
    "elu": lambda v, alpha: np.where(v > 0, v, alpha * np.expm1(v)),
    "selu": lambda v, alpha, gamma: np.where(v > 0, v, alpha * np.expm1(v)) * gamma,
    "celu": lambda v, alpha: np.maximum(0, v) + np.minimum(0, alpha * np.expm1(v / alpha)),
    "softsign": lambda v: v / (1 + np.abs(v)),
    "softplus": lambda v: np.logaddexp(0, v),
    "thresholdedrelu": lambda v, alpha: np.where(v > alpha, v, 0.0),
}


@dataclass(frozen=True)
class Attrs:
    function: str
    out: QuantAttrs
    params: tuple[float, ...] = ()  # the function's attributes (e.g. HardSigmoid's alpha, beta)
    #: a float-scale output quantizer: its scale is ``mult * 2**-out.out.frac`` (``mult`` odd),
    #: the table holds its integer codes and the graph carries the scale
    mult: int = 1
    #: float-scaled input codes: their scale is ``in_mult * 2**-frac`` (None: the input's own grid)
    in_scale: tuple[int, int] | None = None
    #: a table given as it is, the output code of every input code from the input's lowest
    #: (``function`` then only names it): a quantizer of a graph input that several read, on
    #: the cells of the real line the design's input codes are (``ir.meaning.InputMap.cuts``)
    codes: tuple[int, ...] = ()


def function_table(function: str, out: QuantAttrs, lo: int, hi: int, frac: int, mult: int = 1,
                   in_mult: int = 1, params: tuple[float, ...] = ()) -> np.ndarray:
    """``out(f(k * in_mult * 2**-frac))`` for every input code ``k`` in ``[lo, hi]`` (float64
    ``f`` of the exact input, then the output quantizer's rounding) where ``out``'s scale is
    ``mult * 2**-out.out.frac``."""
    codes = np.arange(lo, hi + 1, dtype=np.int64)
    return function_codes(function, out, np.ldexp((codes * in_mult).astype(np.float64), -frac), mult, params)


def function_codes(function: str, out: QuantAttrs, values: np.ndarray, mult: int = 1,
                   params: tuple[float, ...] = ()) -> np.ndarray:
    """``out(f(v))`` for float64 inputs ``v``: the function in float64, then the output
    quantizer's rounding, ``out``'s scale ``mult * 2**-out.out.frac``."""
    y = np.asarray(FUNCTIONS[function](values, *params), dtype=np.float64)
    return quantize_float(out, y / mult if mult != 1 else y)


def table(attrs: Attrs, x: TensorType) -> np.ndarray:
    if attrs.codes:
        if len(attrs.codes) != x.hi - x.lo + 1:
            raise ValueError(f"a table of {len(attrs.codes)} codes for inputs in [{x.lo}, {x.hi}]")
        return np.array(attrs.codes, dtype=np.int64)
    frac, in_mult = attrs.in_scale if attrs.in_scale is not None else (x.ftype.frac, 1)
    return function_table(attrs.function, attrs.out, x.lo, x.hi, frac, attrs.mult, in_mult, attrs.params)


@dataclass(frozen=True)
class LutConfig(LayerConfig):
    template: ClassVar[str] = "lut/config.tpl"
    n_in: int
    n_table: int
    in_width: int
    table_lo: int
    in_signed: bool
    table_t: str


@dataclass(frozen=True)
class LutCall(KernelCall):
    template: ClassVar[str] = "lut/function.tpl"
    table: str


class Lut(OpDef[Attrs]):
    name = "lut"
    traits = frozenset({Trait.ELEMENTWISE})
    extensions = (Extension(
        "TesseraLUT", "Elementwise lookup table indexed by the input's integer code (table from the compiler).",
        "lut", "nnet_tessera_lut.h", config=LutConfig, call=LutCall,
        output_shape=elementwise_shape, weights=(Weight("table", "t{index}"),)),)

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        if x.hi - x.lo + 1 > MAX_DOMAIN:
            raise UnsupportedModelError(
                f"node '{node}': {attrs.function} over {x.hi - x.lo + 1} input codes ({x.ftype.width} bits) is too large "
                f"for a lookup table (max {MAX_DOMAIN}); quantize its input first")
        t = table(attrs, x)
        out = attrs.out.out if attrs.mult == 1 else FixedType(attrs.out.out.width, 0, attrs.out.out.signed)
        return TensorType(x.shape, out, int(t.min()), int(t.max()))

    def semantics(self, attrs: Attrs, xs, ins, out):
        return table(attrs, ins[0])[xs[0].astype(np.int64) - ins[0].lo]

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        idx = builder.op("Sub", [xs[0], builder.const(np.array(ins[0].lo, dtype=np.int64))])
        return builder.op("Gather", [builder.const(table(attrs, ins[0])), idx], axis=0)

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        return rtl.lookup(xs[0], table(attrs, ins[0]), ins[0].lo)

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        t = table(attrs, x)
        hls.add_layer(node, {"class_name": "TesseraLUT", "n_in": x.size, "n_table": int(t.size), "table_lo": int(x.lo),
                            "in_width": x.ftype.width, "in_signed": x.ftype.signed,
                            "table_data": np.ldexp(t.astype(np.float64), -out.ftype.frac)},
                     {"result": out.ftype.hls(), "table": out.ftype.hls()})

    def cost(self, attrs: Attrs, ins, out, io):
        return table_work(ins[0], out, io)


OP = Lut()
