"""The op contract: every facet of an op lives in its module, and consumers ask the op.

An op module defines an ``Attrs`` dataclass and one :class:`OpDef` subclass (generic over
those attributes) with

- ``infer``: output shape, fixed-point type and reachable code range (from the input
  ranges and the actual weights: the source of every accumulator width),
- ``semantics``: the integer semantics on int64 codes (numpy, batch-first): the definition
  every other form must equal,
- ``onnx_reference``: the same semantics as exact onnxruntime nodes (integer kernels, or
  float64 only where every intermediate is provably an integer below 2**53), built with a
  :class:`ReferenceBuilder`,
- ``lower``: the hls4ml layer(s) and every precision, through an :class:`HlsBuilder`; the
  hls4ml extension layers the op needs where hls4ml lacks one (``extensions``, declared as
  :class:`.extension.Extension` and registered by the lowering),
- ``macs``: multiply-accumulates per sample,
- ``cost``: what its kernel does per sample (:class:`.cost.Work`) for the estimator,
- ``rtl``: the same semantics traced as fixed-point arithmetic for the RTL back end, through
  an :class:`RtlBuilder` (ops without it are refused there, naming ``--backend hls``),
- ``input_span``: the box of its input an output box reads, for the partitioner (spatial
  ops only), and its ``traits`` (:class:`Trait`), which consumers ask instead of op names.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import Enum, StrEnum
from typing import TYPE_CHECKING, ClassVar, Generic, Protocol, TypeVar

import numpy as np

from ...errors import UnsupportedModelError
from ...ir.meaning import CodeScale
from ...ir.types import MAX_WIDTH, TensorType
from ...exact.integer import int8_limbs, interval_dot
from ...exact.rounding import Rounding
from ...exact.spans import Span

if TYPE_CHECKING:
    from ...ir.graph import Node
    from .extension import Extension
    from .cost import Work
    from .requantization import Requantization


class Trait(Enum):
    """What kind of op an op is; consumers ask ``trait in OPS[node.op].traits``."""

    #: each output pixel reads a window of input pixels (conv, pools): a block runs it on its
    #: input span with the padding kept only where the span leaves the volume
    WINDOW = "window"
    #: output pixels gather from a spread of input pixels (transposed convolution, upsampling):
    #: a block computes its local output and crops it (``scatter_origin``, ``spatial_stride``)
    SCATTER = "scatter"
    #: one output element per input element, same position (activations, requantization)
    ELEMENTWISE = "elementwise"
    #: combines several inputs position by position (concatenation, addition)
    MERGE = "merge"
    #: reads a whole sequence stored step by step (the recurrent cells)
    SEQUENCE = "sequence"
    #: the result type holds every reachable value: the op never rounds or saturates
    RANGE_EXACT = "range-exact"
    #: reads its (C, *spatial) input as a map stored channels-last, a 1D map (C, W) included,
    #: without being a window or scatter op the partitioner splits (linear interpolation)
    MAP = "map"
    #: a relabelling of its input that hls4ml folds into the input's type (flatten)
    RESHAPE = "reshape"
    #: its output codes are input codes, moved, selected or maxed (pools, reshapes, upsampling):
    #: the real meaning of the input's codes (``ir.meaning.CodeScale``) is the output's
    CODE_SELECT = "code-select"
    #: integer weights and an optional bias (``bias_size``, ``with_bias``): a constant Add
    #: after it is its bias
    LINEAR = "linear"


#: Traits of the ops that map output boxes to input boxes: the partitioner can split them.
SPATIAL = frozenset({Trait.WINDOW, Trait.SCATTER, Trait.ELEMENTWISE, Trait.MERGE})


class IoType(StrEnum):
    """hls4ml's io types: whole arrays in registers, or one word per cycle on FIFOs."""

    PARALLEL = "io_parallel"
    STREAM = "io_stream"


class Layout(Enum):
    """How a lowered value is laid out in hls4ml (the permutation the lowering records)."""

    CHANNELS = "channels"  # (C, *spatial) stored channels-last
    FLAT = "flat"  # stored in ONNX order
    SEQUENCE = "sequence"  # (T, C, H, W) frame sequences stored channels-last per frame
    SAME = "same"  # the layout of the first input


class ReferenceBuilder(Protocol):
    """Builds the exact onnxruntime reference (``reference.model.OnnxBuilder``)."""

    def op(self, op_type: str, inputs: list[str], **attrs) -> str: ...

    def const(self, value: np.ndarray) -> str: ...

    def round(self, v: str, mode: Rounding) -> str: ...

    def div_round(self, num: str, den: str, mode: Rounding) -> str: ...

    def int_shift_round(self, x: str, shift: int, mode: Rounding) -> str: ...


class HlsBuilder(Protocol):
    """Collects hls4ml layers with explicit precisions (``lower.hls4ml_lower.HlsLowering``)."""

    perm: dict[str, np.ndarray]

    def add_layer(self, node: "Node", layer: dict, precision: dict, layout: Layout = Layout.SAME) -> None: ...

    def alias(self, node: "Node", perm: np.ndarray) -> None: ...

    def flat_perm(self, value: str) -> np.ndarray: ...

    def layout_perm(self, shape: tuple[int, ...], layout: Layout) -> np.ndarray: ...


class RtlBuilder(Protocol):
    """Traces integer arithmetic into an adder-graph design (``rtl.builder.DaBuilder``).

    Its arrays hold one symbolic integer code per element, shaped as the IR value (no batch
    axis).  Constants are integer numpy arrays; every method is exact integer arithmetic."""

    #: the node being traced (for one-line refusals)
    node: str

    def const(self, values: np.ndarray | int): ...

    def matmul(self, x, weight: np.ndarray): ...

    def add(self, a, b): ...

    def sub(self, a, b): ...

    def scale(self, x, factor: np.ndarray | int): ...

    def maximum(self, a, b): ...

    def minimum(self, a, b): ...

    def clamp(self, x, lo: np.ndarray | int, hi: np.ndarray | int): ...

    def shift_left(self, x, shift: int): ...

    def floor_shift(self, x, shift: int): ...

    def round_shift(self, x, shift: int, mode: Rounding): ...

    def div_round(self, x, divisor: int, mode: Rounding): ...

    def multiply_shift(self, x, mult: np.ndarray, add: np.ndarray, shift: int): ...

    def count_at_least(self, x, thresholds: np.ndarray): ...

    def lookup(self, x, table: np.ndarray, lo: int): ...

    def gather(self, x, index: np.ndarray): ...

    def reduce_sum(self, x, axis: int): ...

    def reduce_max(self, x, axis: int): ...

    def concat(self, xs: list, axis: int): ...


A = TypeVar("A")


class OpDef(ABC, Generic[A]):
    """One op of the IR: its name, traits and facets (see the module docstring)."""

    name: ClassVar[str]
    traits: ClassVar[frozenset[Trait]] = frozenset()
    #: Tessera's hls4ml extension layers this op lowers to (none when hls4ml has the layer)
    extensions: ClassVar[tuple["Extension", ...]] = ()
    #: merges: the step of the partitioned C++ host (partition_host.cpp) that merges blocks
    host_merge: ClassVar[str | None] = None

    def host_merge_of(self, attrs: A) -> str | None:
        """The host's merge step for this node's attributes (None: the host cannot merge it)."""
        return self.host_merge

    @abstractmethod
    def infer(self, attrs: A, ins: list[TensorType], node: str) -> TensorType:
        """Output type and reachable code range; refuses (naming ``node``) what it cannot make exact."""

    @abstractmethod
    def semantics(self, attrs: A, xs: list[np.ndarray], ins: list[TensorType], out: TensorType) -> np.ndarray:
        """The integer semantics: int64 codes ``(N, *shape)`` of every input -> output codes."""

    @abstractmethod
    def onnx_reference(self, attrs: A, builder: ReferenceBuilder, xs: list[str], ins: list[TensorType],
                       out: TensorType) -> str:
        """Nodes computing :meth:`semantics` exactly on onnxruntime; returns the output's name."""

    @abstractmethod
    def lower(self, attrs: A, hls: HlsBuilder, node: "Node", ins: list[TensorType], out: TensorType) -> None:
        """The hls4ml layer(s) of this node, every precision set."""

    @abstractmethod
    def cost(self, attrs: A, ins: list[TensorType], out: TensorType, io: IoType) -> "Work":
        """What the node's kernel does for one sample, before a reuse factor."""

    def macs(self, attrs: A, ins: list[TensorType], out: TensorType) -> int:
        """Multiply-accumulates per sample."""
        return 0

    #: whether the op has an RTL form (:meth:`rtl`); the RTL back end refuses the others
    has_rtl: ClassVar[bool] = False

    def rtl(self, attrs: A, rtl: RtlBuilder, xs: list, ins: list[TensorType], out: TensorType):
        """:meth:`semantics` on the RTL builder's symbolic codes: the output array, shaped as
        ``out`` (ops with :attr:`has_rtl`)."""
        raise NotImplementedError(f"op '{self.name}' has no RTL form")

    def carry_scale(self, attrs: A, meaning: CodeScale, ins: list[TensorType]) -> CodeScale | None:
        """What the output's codes mean when the input's codes mean ``meaning``: an op that only
        moves, selects or maxes codes (``CODE_SELECT``) keeps it, channels on axis 0; None where
        the op cannot carry it (the frontend refuses the node)."""
        return meaning if Trait.CODE_SELECT in self.traits else None

    def form(self, attrs: A, ins: list[TensorType], out: TensorType) -> str:
        """The hardware form the lowering chose, in words (``tessera inspect``); empty when
        the op has one form."""
        return ""

    def requantization(self, attrs: A, ins: list[TensorType], out: TensorType) -> "Requantization | None":
        """A requantizing op's form, constants and why they are exact (``tessera report``);
        None for the others."""
        return None

    # -- the partitioner's facets ------------------------------------------------------------

    @property
    def spatial(self) -> bool:
        """Whether the op maps output boxes to input boxes (:meth:`input_span`)."""
        return bool(self.traits & SPATIAL)

    def input_span(self, attrs: A, span: Span) -> Span:
        """The (unclipped) box of the input that an output box reads; indices outside the
        input are the op's zero padding.  Elementwise ops and merges read the same box."""
        if self.traits & {Trait.ELEMENTWISE, Trait.MERGE}:
            return span
        raise NotImplementedError(f"{self.name} is not a spatial op")

    def with_pads(self, attrs: A, pads: tuple[int, ...]) -> A:
        """The attributes with other zero padding (begins then ends per spatial dim); ops
        without padding accept only none."""
        if any(pads):
            raise ValueError(f"{self.name} has no padding")
        return attrs

    def tiling_refusal(self, attrs: A) -> str | None:
        """Why a block may not replace this op's padding by its neighbours' voxels (None: it may)."""
        return None

    def spatial_stride(self, attrs: A) -> tuple[int, ...]:
        """Per spatial dim: input pixels per output pixel (window ops) or output pixels per
        input pixel (scatter ops); block boundaries scale by it from output to input."""
        raise NotImplementedError(f"{self.name} has no spatial stride")

    def scatter_origin(self, attrs: A, have: Span) -> tuple[int, ...]:
        """Scatter ops: the global index of local output 0 when run without padding on ``have``."""
        raise NotImplementedError(f"{self.name} is not a scatter op")

    # -- linear ops ---------------------------------------------------------------------------

    def bias_size(self, attrs: A) -> int:
        """Linear ops: the number of bias values (one per output channel)."""
        raise NotImplementedError(f"{self.name} is not a linear op")

    def weight_bits(self, attrs: A) -> int:
        """Bits of the weights and biases as stored on chip (0 without weights)."""
        return 0


def check_width(t: TensorType, node: str, what: str) -> TensorType:
    """Refuse types wider than the exact float64 bridge allows, naming the node."""
    if t.ftype.width > MAX_WIDTH:
        raise UnsupportedModelError(
            f"node '{node}': {what} needs {t.ftype.width} bits, more than the {MAX_WIDTH} the exact flow supports"
        )
    return t


def fits_int8(t: TensorType) -> str | None:
    """'int8' / 'uint8' when every reachable code fits that ONNX integer type, else None."""
    if 0 <= t.lo and t.hi <= 255:
        return "uint8"
    if -128 <= t.lo and t.hi <= 127:
        return "int8"
    return None


def limb_kernel(builder, op_type: str, x: str, x_type: TensorType, weight: np.ndarray, out_axis: int, **kernel_attrs) -> str | None:
    """``x (*) weight`` exactly with onnxruntime's integer kernels (``MatMulInteger``,
    ``ConvInteger``: 8-bit operands, int32 accumulation), or None when an int32 sum could
    overflow (``out_axis``: the weight's output axis; each output sums the rest).  Input codes
    wider than 8 bits enter as radix-128 digits, ``x == low + 128 * high`` with ``low`` in
    [0, 127], one pass per digit (the product is linear in ``x``; a zero pad is zero in every
    digit).

    The weights always enter as balanced 7-bit digits (:func:`...exact.integer.int8_limbs`, every
    limb in [-64, 63]), one kernel per limb, recombined in int64.  That keeps every pair of
    products below 2**15: x86 CPUs without VNNI compute 8-bit products with ``vpmaddubsw``,
    which saturates pairs of ``uint8 x int8`` products to int16 (measured: a 255 x 127
    ``MatMulInteger`` off by half on an AVX2 CPU), and ``ConvInteger`` mis-reads unsigned
    weights with signed inputs.  With 7-bit signed limbs the result is the exact sum on every
    CPU."""
    xt = fits_int8(x_type)
    if xt is None:
        radix = builder.const(np.array(128, dtype=np.int64))
        low = builder.op("Mod", [x, radix])
        high = builder.op("Div", [builder.op("Sub", [x, low]), radix])
        parts = [limb_kernel(builder, op_type, digit, TensorType(x_type.shape, x_type.ftype, lo, hi), weight, out_axis,
                             **kernel_attrs)
                 for digit, lo, hi in ((low, 0, 127), (high, x_type.lo // 128, x_type.hi // 128))]
        if None in parts:
            return None
        return builder.op("Add", [parts[0], builder.op("Mul", [parts[1], radix])])
    limbs = int8_limbs(weight)
    xmax = max(abs(x_type.lo), abs(x_type.hi))
    rows = lambda w: np.moveaxis(np.abs(w.astype(np.int64)), out_axis, 0).reshape(w.shape[out_axis], -1)  # noqa: E731
    if any(int(max(interval_dot(rows(w), 0, xmax, axis=1)[1])) >= 2**31 for w, _ in limbs):
        return None
    xq = builder.op("Cast", [x], to=xt)
    acc = None
    for w, shift in limbs:
        part = builder.op("Cast", [builder.op(op_type, [xq, builder.const(w)], **kernel_attrs)], to="int64")
        if shift:
            part = builder.op("Mul", [part, builder.const(np.array(1 << shift, dtype=np.int64))])
        acc = part if acc is None else builder.op("Add", [acc, part])
    return acc


__all__ = ["HlsBuilder", "IoType", "Layout", "OpDef", "ReferenceBuilder", "RtlBuilder", "SPATIAL", "Trait", "check_width",
           "fits_int8", "limb_kernel"]
