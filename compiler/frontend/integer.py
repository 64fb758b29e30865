"""Exact integer arithmetic on codes, emitted as IR: a value's codes times an integer per
channel, plus an integer per channel (:func:`integer_scale`), for the in-flight values
(:mod:`.inflight`) and the real-valued constants (:mod:`.real`) that need one."""

from __future__ import annotations

import numpy as np
import onnx

from ..ir.types import FixedType
from ..ops import conv, dense
from .state import ImportState


def integer_scale(state: ImportState, node: onnx.NodeProto, value: str, factors: list[int], part: str,
                  offsets: list[int] | None = None) -> str:
    """``value``'s codes times an integer per channel (axis 0), plus an integer ``offsets``
    per channel (or one), exactly: a 1x1 depthwise convolution of a map, a diagonal dense
    layer of a vector.  Returns the IR value."""
    t = state.type_of(value)
    channels = t.shape[0]
    k = np.asarray(factors if len(factors) > 1 else factors * channels, dtype=np.int64)
    wtype = FixedType.for_range(min(int(k.min()), 0), max(int(k.max()), 0), 0)
    bias = btype = None
    if offsets is not None:
        bias = np.asarray(offsets if len(offsets) > 1 else offsets * channels, dtype=np.int64)
        # on the input's grid: the codes (not their fixed-point values) move by the offsets
        btype = FixedType.for_range(min(int(bias.min()), 0), max(int(bias.max()), 0), t.ftype.frac)
    if len(t.shape) == 1:
        attrs = dense.Attrs(np.diag(k), wtype, bias, btype)
        op = dense.OP
    else:
        n = len(t.shape) - 1
        attrs = conv.Attrs(k.reshape(channels, 1, *(1,) * n), wtype, bias, btype, (1,) * n, (0,) * (2 * n),
                           group=channels)
        op = conv.OP
    return state.add(node, op, [value], attrs, reads_real=True, part=part).output


__all__ = ["integer_scale"]
