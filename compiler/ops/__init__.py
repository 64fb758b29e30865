"""One module per op; this explicit registry is the only list of supported ops."""

from __future__ import annotations

from . import conv2d, dense, flatten, maxpool2d, quant, relu
from .base import OpDef

OPS: dict[str, OpDef] = {
    quant.OP.name: quant.OP,
    dense.OP.name: dense.OP,
    conv2d.OP.name: conv2d.OP,
    relu.OP.name: relu.OP,
    maxpool2d.OP.name: maxpool2d.OP,
    flatten.OP.name: flatten.OP,
}

__all__ = ["OPS", "OpDef"]
