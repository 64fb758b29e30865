"""One module per op; this explicit registry is the only list of supported ops.

Consumers ask ``OPS[node.op]`` for a facet (``infer``, ``semantics``, ``onnx_reference``,
``lower``, ``cost``, ``input_span``, ...) or a trait (``Trait.WINDOW in OPS[node.op].traits``);
see :mod:`.base` for the contract and docs/architecture.md for how to add an op.
"""

from __future__ import annotations

from . import (avgpool, conv, convlstm, convtranspose, crop, dense, depthtospace, flatten, globalavgpool, gru,
               interpolate, leakyrelu, lstm, lut, maximum, maxpool, merge, pad, piecewise, quant, relu, rescale, staircase,
               transpose, upsample)
from .base import IoType, Layout, OpDef, Trait

OPS: dict[str, OpDef] = {
    quant.OP.name: quant.OP,
    dense.OP.name: dense.OP,
    conv.OP.name: conv.OP,
    convtranspose.OP.name: convtranspose.OP,
    relu.OP.name: relu.OP,
    leakyrelu.OP.name: leakyrelu.OP,
    maxpool.OP.name: maxpool.OP,
    flatten.OP.name: flatten.OP,
    lut.OP.name: lut.OP,
    avgpool.OP.name: avgpool.OP,
    globalavgpool.OP.name: globalavgpool.OP,
    upsample.OP.name: upsample.OP,
    interpolate.OP.name: interpolate.OP,
    crop.OP.name: crop.OP,
    merge.CONCAT.name: merge.CONCAT,
    merge.ADD.name: merge.ADD,
    lstm.OP.name: lstm.OP,
    gru.OP.name: gru.OP,
    convlstm.OP.name: convlstm.OP,
    transpose.OP.name: transpose.OP,
    rescale.OP.name: rescale.OP,
    piecewise.OP.name: piecewise.OP,
    staircase.OP.name: staircase.OP,
    depthtospace.OP.name: depthtospace.OP,
    maximum.OP.name: maximum.OP,
    pad.OP.name: pad.OP,
}

__all__ = ["IoType", "Layout", "OPS", "OpDef", "Trait"]
