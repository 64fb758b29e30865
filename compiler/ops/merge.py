"""Two-input merges on activations: channel Concat and elementwise Add.

Inputs may have different fixed-point types: both are aligned to ``frac = max(f1, f2)`` by
exact left shifts, so nothing rounds.  Concat is along channels (ONNX axis 1), the U-Net
skip connection; Add is the residual sum.  Both lower to Tessera extension layers
(``hls_templates/merge``) that work on channels-last tensors of any rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import TensorType
from .base import Layout, OpDef, Trait, check_width
from .extension import Extension, out_shape_attr
from .work import elementwise_work


@dataclass(frozen=True)
class Attrs:
    pass


def _aligned(x: np.ndarray, t: TensorType, frac: int) -> np.ndarray:
    return x.astype(np.int64) << np.int64(frac - t.ftype.frac)


class Concat(OpDef[Attrs]):
    name = "concat"
    traits = frozenset({Trait.MERGE, Trait.RANGE_EXACT})
    host_merge = "concat"
    extensions = (Extension(
        "TesseraConcat", "Channel concatenation of two channels-last tensors of any rank.", "merge",
        "nnet_tessera_merge.h", config_keys=("n_pos", "n_chan1", "n_chan2"), output_shape=out_shape_attr,
        attributes=("n_pos", "n_chan1", "n_chan2"), prefix="concat_", n_inputs=2),)

    def infer(self, attrs, ins, node):
        a, b = ins
        if a.shape[1:] != b.shape[1:]:
            raise UnsupportedModelError(f"node '{node}': Concat of shapes {a.shape} and {b.shape} along channels")
        f = max(a.ftype.frac, b.ftype.frac)
        lo = min(a.lo << (f - a.ftype.frac), b.lo << (f - b.ftype.frac))
        hi = max(a.hi << (f - a.ftype.frac), b.hi << (f - b.ftype.frac))
        return check_width(TensorType.from_range((a.shape[0] + b.shape[0], *a.shape[1:]), lo, hi, f), node, "Concat")

    def semantics(self, attrs, xs, ins, out):
        f = out.ftype.frac
        return np.concatenate([_aligned(xs[0], ins[0], f), _aligned(xs[1], ins[1], f)], axis=1)

    def onnx_reference(self, attrs, builder, xs, ins, out):
        parts = [builder.op("Mul", [x, builder.const(np.array(1 << (out.ftype.frac - t.ftype.frac), dtype=np.int64))])
                 for x, t in zip(xs, ins)]
        return builder.op("Concat", parts, axis=1)

    def lower(self, attrs, hls, node, ins, out):
        a, b = ins
        hls.add_layer(node, {"class_name": "TesseraConcat", "n_pos": int(np.prod(a.shape[1:])), "n_chan1": a.shape[0],
                            "n_chan2": b.shape[0], "out_shape": [*out.shape[1:], out.shape[0]]},
                     {"result": out.ftype.hls()}, layout=Layout.CHANNELS)

    def cost(self, attrs, ins, out, io):
        return elementwise_work(out, io, 0)


class Add(OpDef[Attrs]):
    name = "add"
    traits = frozenset({Trait.MERGE, Trait.RANGE_EXACT})
    host_merge = "add"
    extensions = (Extension(
        "TesseraAdd", "Elementwise sum of two tensors of the same shape and layout.", "merge", "nnet_tessera_merge.h",
        config_keys=("n_elem", "n_chan"), output_shape=out_shape_attr, attributes=("n_elem", "n_chan"), prefix="add_",
        n_inputs=2),)

    def infer(self, attrs, ins, node):
        a, b = ins
        if a.shape != b.shape:
            raise UnsupportedModelError(f"node '{node}': Add of shapes {a.shape} and {b.shape} (no broadcasting)")
        f = max(a.ftype.frac, b.ftype.frac)
        lo = (a.lo << (f - a.ftype.frac)) + (b.lo << (f - b.ftype.frac))
        hi = (a.hi << (f - a.ftype.frac)) + (b.hi << (f - b.ftype.frac))
        return check_width(TensorType.from_range(a.shape, min(lo, 0), max(hi, 0), f), node, "Add")

    def semantics(self, attrs, xs, ins, out):
        f = out.ftype.frac
        return _aligned(xs[0], ins[0], f) + _aligned(xs[1], ins[1], f)

    def onnx_reference(self, attrs, builder, xs, ins, out):
        parts = [builder.op("Mul", [x, builder.const(np.array(1 << (out.ftype.frac - t.ftype.frac), dtype=np.int64))])
                 for x, t in zip(xs, ins)]
        return builder.op("Add", parts)

    def lower(self, attrs, hls, node, ins, out):
        a = ins[0]
        if hls.perm[node.inputs[0]].tolist() != hls.perm[node.inputs[1]].tolist():
            raise UnsupportedModelError(f"node '{node.name}': Add of tensors in different layouts")
        hls.add_layer(node, {"class_name": "TesseraAdd", "n_elem": a.size,
                            "out_shape": [*a.shape[1:], a.shape[0]] if len(a.shape) > 1 else [a.shape[0]],
                            "n_chan": a.shape[0] if len(a.shape) > 1 else a.shape[0]},
                     {"result": out.ftype.hls()})

    def cost(self, attrs, ins, out, io):
        return elementwise_work(out, io, 1)


CONCAT = Concat()
ADD = Add()
