"""One module per op; this explicit registry is the only list of supported ops."""

from __future__ import annotations

from . import (avgpool, conv, convlstm, convtranspose, crop, dense, flatten, gru, leakyrelu, lstm, lut, maxpool, merge, quant,
               relu, transpose, upsample)
from .base import OpDef

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
    upsample.OP.name: upsample.OP,
    crop.OP.name: crop.OP,
    merge.CONCAT.name: merge.CONCAT,
    merge.ADD.name: merge.ADD,
    lstm.OP.name: lstm.OP,
    gru.OP.name: gru.OP,
    convlstm.OP.name: convlstm.OP,
    transpose.OP.name: transpose.OP,
}

__all__ = ["OPS", "OpDef"]
