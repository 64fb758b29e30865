"""IR -> hls4ml ModelGraph (Vitis back end), every precision set explicitly from the IR.

hls4ml keeps tensors channels-last; the IR keeps ONNX's NCHW order.  For every value the
lowering records ``perm`` with ``hls_flat[k] == onnx_flat[perm[k]]`` so Dense weights are
read in the right order and the host can reorder inputs and outputs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.graph import Graph, Node
from ..ir.types import FixedType
from ..ops import OPS, IoType, Layout, Trait
from .arrays import HLS4ML_MAXIMUM_SIZE, size_guard

PARTS = {
    "xcu250": "xcu250-figd2104-2L-e",
    "vu9p": "xcvu9p-flga2104-2L-e",
    "zu9eg": "xczu9eg-ffvb1156-2-e",
}


@dataclass(frozen=True)
class HlsOptions:
    io_type: IoType = IoType.PARALLEL
    reuse: int = 1
    part: str = "xcu250-figd2104-2L-e"
    clock_period: float = 5.0
    project_name: str = "tessera_model"
    strategy: str = "Latency"
    #: per-layer reuse factors by IR node name (hls4ml's per-layer ReuseFactor); others use ``reuse``
    layer_reuse: dict[str, int] = field(default_factory=dict)
    #: the project's config_array_partition -maximum_size (raised by the size guard, .arrays)
    maximum_size: int = HLS4ML_MAXIMUM_SIZE
    #: flip-flops the part offers to completely partitioned arrays (None: not checked)
    register_bits: int | None = None

    def __post_init__(self):
        try:
            object.__setattr__(self, "io_type", IoType(self.io_type))
        except ValueError:
            raise UnsupportedModelError(f"io type must be io_parallel or io_stream, got {self.io_type}") from None
        if min([self.reuse, *self.layer_reuse.values()]) < 1:
            raise UnsupportedModelError(f"reuse factors must be >= 1, got {self.reuse} and {self.layer_reuse}")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.project_name):
            raise UnsupportedModelError(f"project name '{self.project_name}' must be a C identifier")


def channels_last_perm(shape: tuple[int, ...]) -> np.ndarray:
    """Flat ONNX index of each channels-last position for a (C, *spatial) tensor."""
    return np.moveaxis(np.arange(int(np.prod(shape))).reshape(shape), 0, -1).ravel()


def sequence_perm(shape: tuple[int, ...]) -> np.ndarray:
    """Flat ONNX index of each position of a (T, C, H, W) frame sequence stored channels-last
    per frame ((T, H, W, C), the recurrent kernels' and streams' order)."""
    return np.moveaxis(np.arange(int(np.prod(shape))).reshape(shape), 1, -1).ravel()


def hls_shape(shape: tuple[int, ...], layout: Layout = Layout.CHANNELS) -> list[int]:
    if layout == Layout.SEQUENCE and len(shape) == 4:
        return [shape[0], shape[2], shape[3], shape[1]]
    if len(shape) in (3, 4):
        return [*shape[1:], shape[0]]
    if len(shape) in (1, 2):  # (N,) vectors and (T, F) sequences: already in hls4ml's order
        return list(shape)
    raise UnsupportedModelError(
        f"tensors of shape {shape} are not supported (expected (C,H,W), (C,D,H,W), (T,F) or (N,))")


def held_type(t: FixedType) -> FixedType:
    """The type a range-exact value is held in: ``t`` with at least one integer bit (same
    fractional bits, so the same codes).  Xilinx's ap_fixed conversion from a type whose
    MSB lies below the destination's rounding bit (e.g. ap_fixed<18,-8> into
    ap_fixed<8,2> with rounding) reads a bit beyond the source's MSB and aborts the
    C-simulation (an assertion in ap_private::get_bit)."""
    return t if t.int_bits >= 1 else FixedType(t.width + 1 - t.int_bits, t.frac, t.signed)


class HlsLowering:
    def __init__(self, graph: Graph, opts: HlsOptions):
        self.graph, self.opts = graph, opts
        self.layers: list[dict] = []
        self.precisions: dict[str, dict] = {}
        self.held: dict[str, str] = {}  # value -> the hls4ml precision it is held in
        self.layer_of: dict[str, str] = {}
        self.perm: dict[str, np.ndarray] = {}
        self.layouts: dict[str, Layout] = {}  # value -> how it is stored (never SAME)
        self.size = size_guard(graph, opts.io_type, opts.maximum_size, opts.register_bits, opts.part)

    def flat_perm(self, value: str) -> np.ndarray:
        return self.perm[value]

    def add_layer(self, node: Node, layer: dict, precision: dict, layout: Layout = Layout.SAME) -> None:
        out_t = self.graph.values[node.output].ftype
        traits = OPS[node.op].traits
        if Trait.RANGE_EXACT in traits and precision.get("result") == out_t.hls():
            # the type holds every reachable value, so it may be held wider (same codes)
            precision = dict(precision, result=held_type(out_t).hls())
        elif Trait.RESHAPE in traits and precision.get("result") == out_t.hls():
            # hls4ml folds a reshape into its input's type: keep the type the input is held in
            precision = dict(precision, result=self.held.get(node.inputs[0], out_t.hls()))
        self.held[node.output] = precision.get("result")
        name = f"l{len(self.layers)}_{node.op}"
        layer = dict(layer, name=name, inputs=[self.layer_of[v] for v in node.inputs])
        out = self.graph.values[node.output]
        self.perm[node.output] = self.perm[node.inputs[0]] if layout == Layout.SAME else self.layout_perm(out.shape, layout)
        self.layouts[node.output] = self.layouts.get(node.inputs[0], Layout.CHANNELS) if layout == Layout.SAME else layout
        self.layers.append(layer)
        self.precisions[name] = {"Precision": precision, "ReuseFactor": self.opts.layer_reuse.get(node.name, self.opts.reuse)}
        self.layer_of[node.output] = name

    @staticmethod
    def layout_perm(shape: tuple[int, ...], layout: Layout) -> np.ndarray:
        """The index map of a value of ``shape`` stored in ``layout`` (not ``SAME``)."""
        if layout == Layout.CHANNELS:
            return channels_last_perm(shape)
        if layout == Layout.SEQUENCE and len(shape) == 4:
            return sequence_perm(shape)
        return np.arange(int(np.prod(shape)))

    def alias(self, node: Node, perm: np.ndarray) -> None:
        """A layout-only op: its output is its input's hls4ml tensor with another index map."""
        self.layer_of[node.output] = self.layer_of[node.inputs[0]]
        self.held[node.output] = self.held.get(node.inputs[0])
        self.perm[node.output] = perm
        self.layouts[node.output] = self.layouts.get(node.inputs[0], Layout.CHANNELS)

    def stream_words(self, value: str) -> int:
        """io_stream: the words ``value``'s stream carries.  A flatten (hls4ml ``Reshape`` to one
        axis) is hls4ml's in-place stream flatten (``InplaceStreamFlatten``): its input's stream,
        word for word; a (C, *spatial) map channels-last has a word per position, a (T, F)
        sequence stored step by step one per step, (T, C, H, W) frames one per pixel per frame."""
        layer = next(L for L in self.layers if L["name"] == self.layer_of[value])
        node = next((n for n in self.graph.nodes if n.output == value), None)
        if layer["class_name"] == "Reshape" and node is not None:
            return self.stream_words(node.inputs[0])
        shape = self.graph.values[value].shape
        layout = self.layouts.get(value, Layout.CHANNELS)
        if len(shape) == 1:
            return 1
        if layout == Layout.SEQUENCE and len(shape) == 4:
            return shape[0] * shape[2] * shape[3]
        return int(np.prod(shape[1:])) if layout == Layout.CHANNELS else int(np.prod(shape[:-1]))

    def held_int_bits(self, value: str) -> int:
        """The integer bits of the type ``value`` is held in (as its producer wrote it)."""
        held = self.held.get(value)
        m = re.match(r"u?fixed<\s*(\d+)\s*,\s*(-?\d+)", held or "")
        return int(m.group(2)) if m else self.graph.values[value].ftype.int_bits

    def run(self) -> None:
        for value, name in zip(self.graph.inputs, self.input_layers()):
            self.add_input(value, name)
        for node in self.graph.nodes:
            ins = [self.graph.values[v] for v in node.inputs]
            OPS[node.op].lower(node.attrs, self, node, ins, self.graph.values[node.output])
        for value in self.graph.outputs:
            hls_shape(self.graph.values[value].shape)

    def output_layers(self) -> list[str]:
        """The hls4ml output layers (the top function's output arguments), in port order.  An
        output held in an input's buffer (a design that only relabels its input: a Transpose to
        the output) or in an earlier output's is copied into a layer of its own, so that every
        argument of the top function is its own array."""
        taken = set(self.input_layers())
        for value in self.graph.outputs:
            if self.buffer(self.layer_of[value]) in taken:
                self.add_copy(value)
            taken.add(self.buffer(self.layer_of[value]))
        return [self.layer_of[v] for v in self.graph.outputs]

    def buffer(self, layer: str) -> str:
        """The layer whose array holds ``layer``'s output: in io_parallel a Reshape writes no
        array of its own (hls4ml's InplaceParallelReshape makes its output its input's array)."""
        found = next(L for L in self.layers if L["name"] == layer)
        if found["class_name"] == "Reshape" and self.opts.io_type == IoType.PARALLEL:
            return self.buffer(found["inputs"][0])
        return layer

    def add_copy(self, value: str) -> None:
        """A linear Activation from ``value``'s buffer into one of the same width and integer bits:
        no code changes.  Its saturation mode differs from the held type's so that hls4ml keeps
        it (its EliminateLinearActivation drops a linear Activation that casts nothing)."""
        held = self.held.get(value) or held_type(self.graph.values[value].ftype).hls()
        base, args = held.replace(" ", "").rstrip(">").split("<")
        width, integer, *modes = args.split(",")
        saturation = "WRAP" if modes[1:2] == ["SAT"] else "SAT"
        name = f"l{len(self.layers)}_copy"
        self.layers.append({"class_name": "Activation", "activation": "linear", "name": name,
                            "inputs": [self.layer_of[value]]})
        precision = f"{base}<{width},{integer},{(modes or ['TRN'])[0]},{saturation}>"
        self.precisions[name] = {"Precision": {"result": precision}, "ReuseFactor": self.opts.reuse}
        self.layer_of[value] = name
        self.held[value] = precision

    def input_layers(self) -> list[str]:
        """The hls4ml input layers (the top function's input arguments), in port order."""
        n = len(self.graph.inputs)
        return ["x_in"] if n == 1 else [f"x_in_{k}" for k in range(n)]

    def add_input(self, value: str, name: str) -> None:
        """One design input as hls4ml input layer ``name``, stored as its first reader wants."""
        tin = self.graph.values[value]
        layout = self.input_layout(value)
        # a (C, W) input of a 1D window op (Conv1D, pooling) is stored channels-last, (W, C)
        signal = len(tin.shape) == 2 and layout == Layout.CHANNELS and self.reaches_window(value)
        shape = [tin.shape[1], tin.shape[0]] if signal else hls_shape(tin.shape, layout)
        self.layers.append({"class_name": "InputLayer", "name": name, "input_shape": shape})
        self.precisions[name] = {"Precision": {"result": held_type(tin.ftype).hls()}}
        self.held[value] = held_type(tin.ftype).hls()
        self.layer_of[value] = name
        if layout == Layout.SEQUENCE and len(tin.shape) == 4:
            self.perm[value] = sequence_perm(tin.shape)
        else:
            self.perm[value] = channels_last_perm(tin.shape) if len(tin.shape) > 2 or signal else np.arange(tin.size)
        self.layouts[value] = layout if len(tin.shape) > 2 or signal else Layout.FLAT

    def reaches_window(self, value: str) -> bool:
        """Whether ``value`` feeds a window, scatter or map op (through elementwise ops) on any of its
        paths: a (C, W) input that fans out to a Conv1D and another layer is stored as the
        Conv1D reads it (the other layers read any layout through the index map)."""
        for user in self.graph.consumers(value):
            traits = OPS[user.op].traits
            if traits & {Trait.WINDOW, Trait.SCATTER, Trait.MAP} or \
                    (Trait.ELEMENTWISE in traits and self.reaches_window(user.output)):
                return True
        return False

    def input_layout(self, value: str) -> Layout:
        """SEQUENCE when the input ``value`` feeds a sequence op (through elementwise ops), so
        that a (T, C, H, W) input is stored frame by frame."""
        while True:
            users = self.graph.consumers(value)
            if len(users) != 1:
                return Layout.CHANNELS
            traits = OPS[users[0].op].traits
            if Trait.SEQUENCE in traits:
                return Layout.SEQUENCE
            if Trait.ELEMENTWISE not in traits:
                return Layout.CHANNELS
            value = users[0].output

    def config(self, output_dir: str) -> dict:
        return {
            "Backend": "Vitis",
            "OutputDir": output_dir,
            "ProjectName": self.opts.project_name,
            "Part": PARTS.get(self.opts.part, self.opts.part),
            "ClockPeriod": self.opts.clock_period,
            "IOType": self.opts.io_type.value,
            "MaximumSize": self.size.maximum_size,
            "HLSConfig": {
                "Model": {"Precision": "fixed<16,6>", "ReuseFactor": self.opts.reuse, "Strategy": self.opts.strategy},
                "LayerName": self.precisions,
            },
        }


def lower_to_hls4ml(graph: Graph, opts: HlsOptions, output_dir: str):
    """Build the hls4ml ModelGraph for ``graph``; returns (model, lowering)."""
    import contextlib
    import io
    import warnings

    from hls4ml.model.graph import ModelGraph

    from .extensions import register

    register()
    lowering = HlsLowering(graph, opts)
    lowering.run()
    outputs = lowering.output_layers()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        model = ModelGraph.from_layer_list(lowering.config(output_dir), lowering.layers, lowering.input_layers(),
                                           outputs)
    check_precisions(model, lowering)
    return model, lowering


def check_precisions(model, lowering: HlsLowering) -> None:
    """Fail loudly if an hls4ml optimizer pass changed a precision we set."""
    for layer in model.get_layers():
        wanted = lowering.precisions.get(layer.name, {}).get("Precision", {})
        for key, prec in wanted.items():
            t = layer.get_attr(f"{key}_t")
            if t is None:
                continue
            got = str(t.precision).replace("ap_", "").replace(" ", "")
            if not _same_precision(got, prec):
                raise RuntimeError(f"hls4ml changed {layer.name}.{key}_t from {prec} to {got}")


def _same_precision(got: str, wanted: str) -> bool:
    """Same signedness and bit layout; rounding/saturation must match where we set them.

    Types we leave at TRN/WRAP hold values that are exact by construction (accumulators,
    ReLU, pooling, reshapes): no conversion into them ever rounds or overflows, so hls4ml may
    change their modes (it does, e.g. when it folds a stream Reshape into the previous type).
    Requantization types carry the Quant's rounding and saturation; those must survive.
    """

    def norm(s: str) -> tuple:
        base, args = s.split("<")
        args = [a.strip() for a in args.rstrip(">").split(",")]
        args = (args + ["TRN", "WRAP"])[:4] if len(args) < 4 else args[:4]
        return (base, *args)

    g, w = norm(got), norm(wanted)
    if g[:3] != w[:3]:
        return False
    return w[3:] == ("TRN", "WRAP") or g[3:] == w[3:]
