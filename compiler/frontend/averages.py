"""Averages and QONNX ``Trunc``: mixin of the importer (``qonnx_import._Importer``).

An average is not a fixed-point number.  On a power-of-two grid with a power-of-two
``Quant`` after it, ``AveragePool`` / ``GlobalAveragePool`` fuse with that Quant into one op
(``avgpool`` / ``globalavgpool``: the window sum and one exact rational rounding).  Anywhere
else (float scales, zero points, a float-scaled Quant after it) the average is the exact
window sum ``S`` (a depthwise convolution whose weights are all 1) with its real meaning
``s_x * S / n - z_x * s_x`` in flight, so that the Quant after it is one proven ``rescale``
(the requantization primitive of docs/bit-exact.md).

QONNX ``Trunc`` (Brevitas' ``TruncAvgPool``), by qonnx's definition (``trunc_v2``): with equal
input and output scales exactly a ``Quant`` with ``ROUND``; dropping bits of a sum on its
scale's grid, one rounding of the sum (``on_Trunc``).  Other truncations are refused in one line.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import onnx
from onnx import helper

from ..errors import UnsupportedModelError
from ..ir.types import FixedType, power_of_two_exponent
from ..ops import avgpool, conv, globalavgpool, quant
from ..ops.rounding import Rounding
from .attributes import ceil_mode_extra
from .real import Affine, Const, Padded, node_attr

_QUANTIZERS = ("Quant", "Trunc")


class Averages:
    """``on_AveragePool``, ``on_GlobalAveragePool`` and ``on_Trunc``."""

    def on_AveragePool(self, node: onnx.NodeProto) -> None:
        k = tuple(int(v) for v in node_attr(node, "kernel_shape"))
        n = len(k)
        why = "must be 2D/3D and followed by exactly one Quant to be exact"
        if n not in (2, 3):
            raise UnsupportedModelError(f"node '{node.name}' (AveragePool): {why}")
        # a Pad before: its zeros are data, counted by the divisor (only where the pool pads nothing itself)
        explicit = isinstance(self.env.get(node.input[0]), Padded)
        cip = bool(node_attr(node, "count_include_pad", 0))
        own_pads = any(node_attr(node, "pads", ())) or node_attr(node, "auto_pad", "NOTSET") not in ("NOTSET", "VALID")
        if explicit and own_pads and not cip:
            raise UnsupportedModelError(f"node '{node.name}' (AveragePool): pads of its own with count_include_pad=0 after "
                                        "a Pad are not supported (the divisor would count some padding and not other)")
        s, pads = self.window(node, k)
        cip = cip or explicit
        on_grid = self._average_on_grid(node)
        if int(node_attr(node, "ceil_mode", 0) or 0):
            pads = self._ceil_pads(node, k, s, pads, refuse_partial=cip or not on_grid)
        if on_grid:
            self.defer_to_quant(node, avgpool.OP, lambda q: avgpool.Attrs(k, s, pads, cip, q), why)
            return
        if any(pads) and not cip:
            raise UnsupportedModelError(
                f"node '{node.name}' (AveragePool): count_include_pad=0 with pads {list(pads)} on real-scaled codes is not "
                "supported (its divisor varies by position; pad explicitly or use count_include_pad=1)")
        self._window_sum(node, k, s, pads)

    def _ceil_pads(self, node: onnx.NodeProto, k, s, pads, refuse_partial: bool) -> tuple[int, ...]:
        """``ceil_mode=1``: ONNX's ``ceil((L - k) / s) + 1`` outputs.  A last window that
        runs past the end averages its valid elements only (count_include_pad=0): the
        overhang is extra end padding of the exact average.  Refused with
        ``refuse_partial`` (count_include_pad=1 counts the declared pads and not the
        overhang; the window sum on real scales has one divisor) and where a window would
        lie past the input entirely."""
        n = len(k)
        size = self.type_of(self.value(node.input[0], node)).shape[1:]
        extra = ceil_mode_extra(size, k, s, pads)
        for i, e in enumerate(extra):
            if not e:
                continue
            if refuse_partial:
                raise UnsupportedModelError(
                    f"node '{node.name}' (AveragePool): ceil_mode=1 adds a partial last window on spatial axis {i} "
                    "(its divisor differs from the others); supported only with count_include_pad=0 on a power-of-two "
                    "grid")
            last = (size[i] + pads[i] + pads[n + i] + e - k[i]) // s[i] * s[i] - pads[i]
            if last >= size[i]:
                raise UnsupportedModelError(f"node '{node.name}' (AveragePool): ceil_mode=1 puts the last window on "
                                            f"spatial axis {i} entirely past the input")
        return tuple(pads[:n]) + tuple(p + e for p, e in zip(pads[n:], extra))

    def on_GlobalAveragePool(self, node: onnx.NodeProto) -> None:
        """The mean over the spatial axes (no attributes)."""
        if self._average_on_grid(node):
            self.defer_to_quant(node, globalavgpool.OP, globalavgpool.Attrs,
                                "must be followed by exactly one Quant to be exact (an average is not a fixed-point "
                                "number)")
            return
        spatial = tuple(self.type_of(self.value(node.input[0], node)).shape[1:])
        self._window_sum(node, spatial, spatial, (0,) * (2 * len(spatial)))

    def _average_on_grid(self, node: onnx.NodeProto) -> bool:
        """Whether the average's input is on a power-of-two grid and exactly one Quant with a
        power-of-two scale and zero point 0 reads it (the fused, exact-division form); also
        True where the fused form's own checks refuse the node in one line."""
        src = node.input[0]
        if isinstance(self.env.get(src), Affine) or src in self.graph.scales or src == self.pending_input:
            return src == self.pending_input  # the input's own refusal (no Quant before the pool)
        users = [u for u in self.model.graph.node if node.output[0] in u.input]
        if len(users) != 1 or users[0].op_type not in _QUANTIZERS:
            return True
        q = users[0]
        scale, zero = (self.env.get(v) for v in q.input[1:3])
        if not isinstance(scale, Const) or not isinstance(zero, Const):
            return True
        if q.op_type == "Trunc" and not self._drops_no_bits(q):
            return False  # its rounding of the sum: the primitive
        return power_of_two_exponent(scale.value) is not None and not np.any(zero.value)

    def _window_sum(self, node: onnx.NodeProto, kernel: tuple[int, ...], strides, pads) -> None:
        """The exact window sum ``S`` of each channel, its average in flight as an Affine."""
        x = self.value(node.input[0], node)
        s_x, z_x = self.code_scale(x)
        if z_x != 0 and any(pads):
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): a zero point {z_x} on a padded input is not "
                                        "supported (the padding is real 0, not code 0)")
        c = self.type_of(x).shape[0]
        ones = np.ones((c, 1, *kernel), dtype=np.int64)
        self.add(node, conv.OP, [x], conv.Attrs(ones, FixedType(1, 0, False), None, None, tuple(strides), tuple(pads),
                                                group=c))
        count = math.prod(kernel)
        self.env[node.output[0]] = Affine(node.output[0], (s_x / count,), (-z_x * s_x,), source=node.name)

    # -- QONNX Trunc ----------------------------------------------------------------------
    def _drops_no_bits(self, node: onnx.NodeProto) -> bool:
        """A 6-input (v2) Trunc whose output_scale equals its scale (one number each)."""
        if len(node.input) != 6:
            return False
        scale, out_scale = (self.env.get(node.input[i]) for i in (1, 4))
        return (isinstance(scale, Const) and isinstance(out_scale, Const) and scale.value.size == 1 and
                out_scale.value.size == 1 and float(scale.value.ravel()[0]) == float(out_scale.value.ravel()[0]))

    def on_Trunc(self, node: onnx.NodeProto) -> None:
        """qonnx ``trunc_v2``: ``y = R(clamp(round(x / s + z) / t)) - z / t``, times the output
        scale ``s * t`` (``t`` a power of two).  With ``t = 1`` that is a Quant with ROUND; with
        ``t > 1`` where ``x / s`` is an integer for every input (an average of codes scaled by
        ``s``: Brevitas' TruncAvgPool), the inner round is exact and it is one rounding
        ``clamp(R(x / (s * t)))``: the primitive."""
        if len(node.input) != 6:
            raise UnsupportedModelError(f"node '{node.name}' (Trunc): the {len(node.input)}-input Trunc (QONNX Trunc v1) is "
                                        "not supported; only the 6-input form current brevitas exports")
        if self._drops_no_bits(node):
            as_quant = helper.make_node("Quant", [node.input[0], node.input[1], node.input[2], node.input[5]],
                                     list(node.output), name=node.name, signed=int(node_attr(node, "signed", 1)),
                                     narrow=int(node_attr(node, "narrow", 0)), rounding_mode="ROUND")
            self.on_Quant(as_quant)
            return
        scale, out_scale = (self.const(node.input[i], node, what).ravel() for i, what in ((1, "the scale"),
                                                                                            (4, "the output scale")))
        zero = self.const(node.input[2], node, "the zero point").ravel()
        bits = self.const(node.input[5], node, "the output bit width").ravel()
        if scale.size != 1 or out_scale.size != 1 or zero.size != 1 or np.any(zero) or bits.size != 1:
            raise UnsupportedModelError(f"node '{node.name}' (Trunc): only one scale, output scale and bit width and a zero "
                                        f"point 0 are supported, got scale {scale[:4].tolist()}, zero {zero[:4].tolist()}")
        s, t = Fraction(float(scale[0])), Fraction(float(out_scale[0])) / Fraction(float(scale[0]))
        if t < 1 or t.numerator & (t.numerator - 1) or t.denominator != 1:
            raise UnsupportedModelError(f"node '{node.name}' (Trunc): output scale {float(out_scale[0]):.9g} over scale "
                                        f"{float(scale[0]):.9g} is {float(t):.9g}, not a power of two >= 1")
        f = self.as_affine(node.input[0], node)
        if f.clipped:  # a clip bound off the grid would make the inner round count: two roundings
            raise UnsupportedModelError(f"node '{node.name}' (Trunc): after a ReLU/Clip without a Quant (from "
                                        f"'{f.source}') is not supported")
        if any((a / s).denominator != 1 or (b / s).denominator != 1 for a, b in f.each()):
            raise UnsupportedModelError(f"node '{node.name}' (Trunc): its input is not an integer multiple of its scale "
                                        f"{float(scale[0]):.9g} (from '{f.source}'); only a Trunc of codes on its scale's "
                                        "grid (e.g. TruncAvgPool's sum) is supported")
        signed, narrow = bool(node_attr(node, "signed", 1)), bool(node_attr(node, "narrow", 0))
        try:
            rounding = Rounding.parse(node_attr(node, "rounding_mode", "FLOOR"))
        except ValueError as exc:
            raise UnsupportedModelError(f"node '{node.name}' (Trunc): {exc}") from None
        n = int(bits[0])
        self.quant_of_affine(node, f, s * t, Fraction(0), quant.min_int(signed, narrow, n), quant.max_int(signed, narrow, n),
                             rounding, False)
