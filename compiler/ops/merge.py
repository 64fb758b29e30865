"""Two-input merges on activations: channel Concat (or, for sequences, feature Concat) and
elementwise Add.

Inputs may have different fixed-point types: both are aligned to ``frac = max(f1, f2)`` by
exact left shifts, so nothing rounds.  Concat is along channels (ONNX axis 1), the U-Net
skip connection, or along the features of two ``(T, F)`` sequences (a bidirectional recurrent
layer's directions side by side; stored step by step, the steps are the kernel's positions).
Add is the residual sum, ``k1_c * a + k2_c * b`` with integer weights per channel or per
tensor, ``k1`` positive, ``k2`` positive or negative (a ``Sub`` of two branches); 1 and 1
unless the frontend aligns two differently scaled inputs: the residual Add of a float-scaled
model is an integer accumulator whose real meaning, and the Quant that rounds it, the exact
requantization primitive carries (:mod:`.rescale`).  Both lower to Tessera extension layers
(``hls_templates/merge``) that work on channels-last tensors of any rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import TensorType
from .base import IoType, Layout, OpDef, Trait, check_width
from .base.extension import Extension, LayerConfig, MergeCall, Weight, out_shape_attr
from .base.cost import elementwise_work


@dataclass(frozen=True)
class Attrs:
    k1: tuple[int, ...] = (1,)  # Add only: integer weights of the aligned inputs, per channel (axis 0) or one
    k2: tuple[int, ...] = (1,)
    #: Concat only: along the features (last axis) of ``(T, F)`` sequences stored step by step
    #: (a bidirectional recurrent layer), not along channels (axis 0)
    features: bool = False

    @property
    def unit(self) -> bool:
        return set(self.k1) == set(self.k2) == {1}


def _weights(k: tuple[int, ...], t: TensorType) -> np.ndarray:
    """(C,) weights broadcast against (N, *shape) codes."""
    return np.asarray(k, dtype=np.int64).reshape(((1, -1) + (1,) * (len(t.shape) - 1)) if len(k) > 1 else ())


def _aligned(x: np.ndarray, t: TensorType, frac: int) -> np.ndarray:
    return x.astype(np.int64) << np.int64(frac - t.ftype.frac)


def _sample_weights(k: tuple[int, ...], t: TensorType) -> np.ndarray | int:
    """The weights against one sample's codes (no batch axis): (C, 1, ...) per channel, else one."""
    return _weights(k, t)[0] if len(k) > 1 else k[0]


def aligned_rtl(rtl, xs: list, ins: list[TensorType], frac: int) -> list:
    """The RTL facets' :func:`_aligned`: each input's symbolic codes shifted onto ``frac``."""
    return [rtl.shift_left(x, frac - t.ftype.frac) for x, t in zip(xs, ins)]


@dataclass(frozen=True)
class ConcatConfig(LayerConfig):
    template: ClassVar[str] = "merge/concat_config.tpl"
    n_pos: int
    n_chan1: int
    n_chan2: int


@dataclass(frozen=True)
class ConcatCall(MergeCall):
    template: ClassVar[str] = "merge/concat_function.tpl"


@dataclass(frozen=True)
class AddConfig(LayerConfig):
    template: ClassVar[str] = "merge/add_config.tpl"
    n_elem: int
    n_chan: int
    n_k: int
    k1_t: str
    k2_t: str


@dataclass(frozen=True)
class AddCall(MergeCall):
    template: ClassVar[str] = "merge/add_function.tpl"
    k1: str
    k2: str


class Concat(OpDef[Attrs]):
    name = "concat"
    traits = frozenset({Trait.MERGE, Trait.RANGE_EXACT})
    host_merge = "concat"
    extensions = (Extension(
        "TesseraConcat", "Channel concatenation of two channels-last tensors of any rank.", "merge",
        "nnet_tessera_merge.h", config=ConcatConfig, call=ConcatCall, output_shape=out_shape_attr),)

    def infer(self, attrs, ins, node):
        a, b = ins
        if attrs.features and (len(a.shape) != 2 or a.shape[0] != b.shape[0] or len(b.shape) != 2):
            raise UnsupportedModelError(f"node '{node}': Concat of shapes {a.shape} and {b.shape} along the features "
                                        "of (T, F) sequences")
        if not attrs.features and a.shape[1:] != b.shape[1:]:
            raise UnsupportedModelError(f"node '{node}': Concat of shapes {a.shape} and {b.shape} along channels")
        f = max(a.ftype.frac, b.ftype.frac)
        lo = min(a.lo << (f - a.ftype.frac), b.lo << (f - b.ftype.frac))
        hi = max(a.hi << (f - a.ftype.frac), b.hi << (f - b.ftype.frac))
        shape = (a.shape[0], a.shape[1] + b.shape[1]) if attrs.features else (a.shape[0] + b.shape[0], *a.shape[1:])
        return check_width(TensorType.from_range(shape, lo, hi, f), node, "Concat")

    def semantics(self, attrs, xs, ins, out):
        f = out.ftype.frac
        return np.concatenate([_aligned(xs[0], ins[0], f), _aligned(xs[1], ins[1], f)], axis=-1 if attrs.features else 1)

    def onnx_reference(self, attrs, builder, xs, ins, out):
        parts = [builder.op("Mul", [x, builder.const(np.array(1 << (out.ftype.frac - t.ftype.frac), dtype=np.int64))])
                 for x, t in zip(xs, ins)]
        return builder.op("Concat", parts, axis=-1 if attrs.features else 1)

    has_rtl = True

    def rtl(self, attrs, rtl, xs, ins, out):
        return rtl.concat(aligned_rtl(rtl, xs, ins, out.ftype.frac), axis=-1 if attrs.features else 0)

    def lower(self, attrs, hls, node, ins, out):
        a, b = ins
        words = a.shape[0] if attrs.features else int(np.prod(a.shape[1:]))
        layout = Layout.FLAT if attrs.features else Layout.CHANNELS
        for value, t in zip(node.inputs, ins):
            if not np.array_equal(hls.flat_perm(value), hls.layout_perm(t.shape, layout)):
                raise UnsupportedModelError(
                    f"node '{node.name}': its input '{value}' of shape {tuple(t.shape)} is stored in another order "
                    f"than the concatenation reads (a flatten of a map stored channels-last); not supported")
            if hls.opts.io_type == IoType.STREAM and hls.stream_words(value) != words:
                raise UnsupportedModelError(
                    f"node '{node.name}': in io_stream its input '{value}' of shape {tuple(t.shape)} is a flatten "
                    f"whose stream keeps the {hls.stream_words(value)} words of the map before it, where the "
                    f"concatenation reads {words} per input; not supported (compile with --io-type parallel)")
        if attrs.features:  # (T, F) sequences are stored step by step: the steps are the positions
            hls.add_layer(node, {"class_name": "TesseraConcat", "n_pos": a.shape[0], "n_chan1": a.shape[1],
                                "n_chan2": b.shape[1], "out_shape": list(out.shape)},
                         {"result": out.ftype.hls()}, layout=Layout.FLAT)
            return
        hls.add_layer(node, {"class_name": "TesseraConcat", "n_pos": int(np.prod(a.shape[1:])), "n_chan1": a.shape[0],
                            "n_chan2": b.shape[0], "out_shape": [*out.shape[1:], out.shape[0]]},
                     {"result": out.ftype.hls()}, layout=Layout.CHANNELS)

    def host_merge_of(self, attrs: Attrs) -> str | None:
        return None if attrs.features else self.host_merge  # the host joins channels only

    def cost(self, attrs, ins, out, io):
        return elementwise_work(out, io, 0)


class Add(OpDef[Attrs]):
    name = "add"
    traits = frozenset({Trait.MERGE, Trait.RANGE_EXACT})
    host_merge = "add"
    extensions = (Extension(
        "TesseraAdd", "Elementwise sum of two tensors of the same shape and layout.", "merge", "nnet_tessera_merge.h",
        config=AddConfig, call=AddCall, output_shape=out_shape_attr,
        weights=(Weight("k1", "k1_{index}"), Weight("k2", "k2_{index}"))),)

    def host_merge_of(self, attrs: Attrs) -> str | None:
        return self.host_merge if attrs.unit else None  # the C++ host adds unweighted

    def infer(self, attrs, ins, node):
        a, b = ins
        if a.shape != b.shape:
            raise UnsupportedModelError(f"node '{node}': Add of shapes {a.shape} and {b.shape} (no broadcasting)")
        if min(attrs.k1) < 1 or 0 in attrs.k2 or {len(attrs.k1), len(attrs.k2)} - {1, a.shape[0]}:
            raise UnsupportedModelError(f"node '{node}': Add weights must be integers, positive (negative too for the "
                                        "second input: a subtraction), one or one per channel")
        f = max(a.ftype.frac, b.ftype.frac)
        (alo, ahi), (blo, bhi) = ((t.lo << (f - t.ftype.frac), t.hi << (f - t.ftype.frac)) for t in (a, b))
        sums = [(min(k1 * alo, k1 * ahi) + min(k2 * blo, k2 * bhi), max(k1 * alo, k1 * ahi) + max(k2 * blo, k2 * bhi))
                for k1, k2 in _pairs(attrs)]
        # the result type also holds each aligned input: the kernel converts both into it first
        lo, hi = min(0, alo, blo, *(v for v, _ in sums)), max(0, ahi, bhi, *(v for _, v in sums))
        return check_width(TensorType.from_range(a.shape, lo, hi, f), node, "Add")

    def semantics(self, attrs, xs, ins, out):
        f = out.ftype.frac
        return _weights(attrs.k1, ins[0]) * _aligned(xs[0], ins[0], f) + _weights(attrs.k2, ins[1]) * _aligned(xs[1], ins[1], f)

    def onnx_reference(self, attrs, builder, xs, ins, out):
        parts = [builder.op("Mul", [x, builder.const(_weights(k, t) << np.int64(out.ftype.frac - t.ftype.frac))])
                 for x, t, k in zip(xs, ins, (attrs.k1, attrs.k2))]
        return builder.op("Add", parts)

    has_rtl = True

    def rtl(self, attrs, rtl, xs, ins, out):
        a, b = aligned_rtl(rtl, xs, ins, out.ftype.frac)
        weigh = lambda v, k, t: v if set(k) == {1} else rtl.scale(v, _sample_weights(k, t))  # noqa: E731
        return rtl.add(weigh(a, attrs.k1, ins[0]), weigh(b, attrs.k2, ins[1]))

    def lower(self, attrs, hls, node, ins, out):
        a = ins[0]
        if hls.perm[node.inputs[0]].tolist() != hls.perm[node.inputs[1]].tolist():
            raise UnsupportedModelError(f"node '{node.name}': Add of tensors in different layouts")
        n_k = max(len(attrs.k1), len(attrs.k2))
        channel_last = np.arange(a.size) % a.shape[0]
        if n_k > 1 and not np.array_equal(hls.perm[node.inputs[0]] // (a.size // a.shape[0]), channel_last):
            raise UnsupportedModelError(f"node '{node.name}': per-channel Add weights on a tensor that is not channels-last")
        k1, k2 = (np.broadcast_to(np.asarray(k, dtype=np.float64), (n_k,)).copy() for k in (attrs.k1, attrs.k2))
        hls.add_layer(node, {"class_name": "TesseraAdd", "n_elem": a.size,
                            "out_shape": [*a.shape[1:], a.shape[0]] if len(a.shape) > 1 else [a.shape[0]],
                            "n_chan": a.shape[0], "n_k": n_k, "k1_data": k1, "k2_data": k2},
                     {"result": out.ftype.hls(), "k1": _integer_type(k1), "k2": _integer_type(k2)})

    def cost(self, attrs, ins, out, io):
        return elementwise_work(out, io, 1 + (not attrs.unit))  # weighted: constant multiplies


def _pairs(attrs: Attrs) -> list[tuple[int, int]]:
    n = max(len(attrs.k1), len(attrs.k2))
    return [(attrs.k1[c % len(attrs.k1)], attrs.k2[c % len(attrs.k2)]) for c in range(n)]


def _integer_type(k: np.ndarray) -> str:
    """The narrowest hls4ml integer type of the weights (unsigned unless one is negative)."""
    if min(k) >= 0:
        width = max(int(v).bit_length() for v in k)
        return f"ufixed<{width},{width}>"
    width = 1 + max(int(v).bit_length() if v >= 0 else (-int(v) - 1).bit_length() for v in k)
    return f"fixed<{width},{width}>"


CONCAT = Concat()
ADD = Add()
