"""A project's manifest, ``tessera.json``: what ``emulate``, ``verify`` and ``check`` know of a
compiled project, as typed values.

:class:`Manifest` is the whole file (``from_json`` / ``to_json``, :meth:`Manifest.read` /
:meth:`Manifest.write`), with a format number: a project written by another format is
refused in one line asking for a recompile.  The design's input and output are
:class:`IoEntry` values, and their encodings live here, once each: ONNX-order codes <->
hls4ml's channels-last layout and the bridge's real values (:meth:`IoEntry.to_hls`,
:meth:`IoEntry.from_hls`), codes -> the user's real values (:meth:`IoEntry.real`), and the
model's input quantizer on real data (:meth:`InputQuantEntry.quantize`).  No other module
reads the file's keys.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from .. import __version__
from .errors import InputDataError, ProjectError, SimulationError, TesseraError
from .ir.graph import Graph, InputPort, Node, pack, packed_shape, unpack
from .ir.meaning import CodeScale, InputMap
from .ir.types import FixedType
from .lower.hls4ml_lower import HlsOptions
from .ops import OPS
from .rtl.design import RtlDesign
from .ops import quant

#: The manifest's file name in a project folder.
MANIFEST = "tessera.json"
#: The packed entry point's source in a project folder (``tessera_packed_double``: one
#: sample's ports packed, ``ir.graph.pack``), what the C-simulation and the testbench call.
PORTS = "tessera_ports.cpp"
#: ... and its symbol.
PACKED_ENTRY = "tessera_packed_double"
#: An RTL project's testbench samples: input codes and the exact reference's output codes
#: (int64, packed in ONNX order), written at compile and run by ``sim/rtlsim.py``.
RTL_TB_INPUT, RTL_TB_EXPECTED = "tb_data/tessera_rtl_input_codes.bin", "tb_data/tessera_rtl_expected_codes.bin"
#: The manifest format this Tessera writes and reads (1: before the format was recorded; 4:
#: the back end recorded, an RTL project's design).
FORMAT = 4


def sha256(path: str | Path) -> str:
    """The hex sha256 of a file (the manifest's model hash)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _fixed_json(t: FixedType) -> dict:
    return {"width": t.width, "frac": t.frac, "signed": t.signed}


def _fixed(d: dict) -> FixedType:
    return FixedType(int(d["width"]), int(d["frac"]), bool(d["signed"]))


@dataclass(frozen=True)
class IoEntry:
    """A design input or output: its ONNX shape (batch excluded), fixed-point type, reachable
    code range, hls4ml layout (``hls_flat[k] == onnx_flat[perm[k]]``) and, for codes that are
    not fixed point, their :class:`CodeScale`."""

    shape: tuple[int, ...]
    ftype: FixedType
    lo: int
    hi: int
    perm: tuple[int, ...]
    scale: CodeScale | None = None
    #: the model file's name of this input or output
    name: str = ""

    @classmethod
    def of(cls, graph: Graph, value: str, perm: np.ndarray, name: str = "") -> "IoEntry":
        t = graph.values[value]
        return cls(tuple(t.shape), t.ftype, int(t.lo), int(t.hi), tuple(int(i) for i in perm), graph.scales.get(value),
                   name)

    @property
    def size(self) -> int:
        """Values per sample."""
        return int(np.prod(self.shape))

    @cached_property
    def _index(self) -> np.ndarray:
        return np.asarray(self.perm, dtype=np.int64)

    def require_shape(self, codes: np.ndarray) -> None:
        """One line when ``codes`` is not ``(N, *shape)``."""
        if codes.shape[1:] != self.shape:
            raise InputDataError(f"input shape {codes.shape[1:]} does not match the model input {self.shape}")

    def check_codes(self, x: np.ndarray, what: str) -> np.ndarray:
        """Integer codes given by a user, within the type's reachable range."""
        if not np.issubdtype(x.dtype, np.integer):
            raise InputDataError(f"{what}: --codes needs an integer array, got {x.dtype}")
        if x.size and (x.min() < self.lo or x.max() > self.hi):
            raise InputDataError(f"{what}: codes outside the input type's range [{self.lo}, {self.hi}]")
        return x

    def hls_order(self, codes: np.ndarray) -> np.ndarray:
        """Codes ``(N, *shape)`` in ONNX order -> ``(N, size)`` in hls4ml's order."""
        codes = np.asarray(codes)
        return codes.reshape(len(codes), -1)[:, self._index]

    def to_hls(self, codes: np.ndarray) -> np.ndarray:
        """Codes in ONNX order -> the bridge's doubles ``(N, size)``: hls4ml's layout and real
        values, as its ``predict`` takes them."""
        return np.ldexp(self.hls_order(codes).astype(np.float64), -self.ftype.frac)

    def from_hls(self, values: np.ndarray) -> np.ndarray:
        """The bridge's doubles ``(N, size)`` -> int64 codes ``(N, *shape)`` in ONNX order."""
        scaled = np.ldexp(np.asarray(values, dtype=np.float64).reshape(len(values), -1), self.ftype.frac)
        if not np.all(scaled == np.round(scaled)):
            raise SimulationError("C-simulation produced values off the output type's grid")
        out = np.empty(scaled.shape, dtype=np.int64)
        out[:, self._index] = scaled.astype(np.int64)
        return out.reshape(len(values), *self.shape)

    def real(self, codes: np.ndarray) -> np.ndarray:
        """The user's real values of codes (``(code - zero) * scale``, or ``code * 2**-frac``)."""
        if self.scale is not None:
            return self.scale.real(codes, self.shape).reshape(np.shape(codes))
        return np.ldexp(np.asarray(codes, dtype=np.float64), -self.ftype.frac)

    def to_json(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), **_fixed_json(self.ftype), "range": [self.lo, self.hi],
                "perm": list(self.perm), "scale": None if self.scale is None else self.scale.to_json()}

    @classmethod
    def from_json(cls, d: dict) -> "IoEntry":
        lo, hi = d["range"]
        return cls(tuple(int(s) for s in d["shape"]), _fixed(d), int(lo), int(hi), tuple(int(i) for i in d["perm"]),
                   None if d["scale"] is None else CodeScale.from_json(d["scale"]), str(d["name"]))


@dataclass(frozen=True)
class IoGroup:
    """A design's inputs (or outputs) as one packed sample (``ir.graph.pack``): one port is
    its :class:`IoEntry` unchanged; several are each port's values side by side, in ONNX
    order for codes and each port's hls4ml order for the bridge, port after port."""

    entries: tuple[IoEntry, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return packed_shape([e.shape for e in self.entries])

    @property
    def size(self) -> int:
        return sum(e.size for e in self.entries)

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.entries]

    def split(self, codes: np.ndarray) -> list[np.ndarray]:
        return unpack(codes, [e.shape for e in self.entries])

    def _columns(self, values: np.ndarray) -> list[np.ndarray]:
        """The bridge's ``(N, size)`` values, port by port."""
        ends = np.cumsum([0, *(e.size for e in self.entries)])
        values = np.asarray(values).reshape(len(values), -1)
        return [values[:, a:b] for a, b in zip(ends[:-1], ends[1:])]

    def require_shape(self, codes: np.ndarray) -> None:
        """One line when ``codes`` is not ``(N, *shape)``."""
        if len(self.entries) == 1:
            return self.entries[0].require_shape(codes)
        if codes.shape[1:] != self.shape:
            raise InputDataError(f"packed input shape {codes.shape[1:]} does not match the {len(self.entries)} model "
                                 f"inputs ({self.shape[0]} values per sample)")

    def check_codes(self, x: np.ndarray, what: str) -> np.ndarray:
        """Integer codes given by a user (packed), each port's within its type's reachable range."""
        for e, c in zip(self.entries, self.split(x)):
            e.check_codes(c, what if len(self.entries) == 1 else f"{what} ({e.name})")
        return x

    def hls_order(self, codes: np.ndarray) -> np.ndarray:
        return np.concatenate([e.hls_order(c) for e, c in zip(self.entries, self.split(codes))], axis=1)

    def to_hls(self, codes: np.ndarray) -> np.ndarray:
        return np.concatenate([e.to_hls(c) for e, c in zip(self.entries, self.split(codes))], axis=1)

    def from_hls(self, values: np.ndarray) -> np.ndarray:
        return pack([e.from_hls(v) for e, v in zip(self.entries, self._columns(values))])

    def real(self, codes: np.ndarray) -> np.ndarray:
        return pack([e.real(c) for e, c in zip(self.entries, self.split(codes))])


@dataclass(frozen=True)
class InputQuantEntry:
    """The model's input quantizer on real data: its fixed-point Quant, or (float scales,
    zero points, a datatype annotation) its :class:`InputMap`; the declared type of a float
    input no Quant reads, and the model file's input shape when the design's is a reshape."""

    quantizer: quant.Attrs
    input_map: InputMap | None = None
    declared_type: str | None = None
    model_shape: tuple[int, ...] | None = None

    @classmethod
    def of(cls, graph: Graph, port: InputPort) -> "InputQuantEntry":
        model_shape = None if port.model_shape is None else tuple(port.model_shape)
        return cls(port.quant, port.input_map, graph.input_type, model_shape)

    def quantize(self, x: np.ndarray, shape: tuple[int, ...], what: str = "input") -> np.ndarray:
        """Real inputs ``(N, *shape)`` (or one sample, or the model file's shape) -> codes."""
        if self.model_shape is not None and x.shape[1:] == self.model_shape:  # reshaped before the model's Quant
            x = x.reshape(len(x), *shape)
        if x.shape[1:] != shape:
            if x.shape != shape:
                raise InputDataError(f"{what}: array of shape {x.shape} does not match the model input "
                                     f"(N, {', '.join(map(str, shape))})")
            x = x[None]
        if not np.all(np.isfinite(x)):
            raise InputDataError(f"{what}: contains NaN or Inf")
        if self.input_map is None:
            return quant.quantize_float(self.quantizer, x)
        try:
            return self.input_map.codes(x)
        except ValueError as exc:
            raise InputDataError(f"{what}: {exc}") from None

    def to_json(self) -> dict:
        q = self.quantizer
        return {**_fixed_json(q.out), "narrow": q.narrow, "rounding": q.rounding.value,
                "input_map": None if self.input_map is None else self.input_map.to_json(),
                "declared_type": self.declared_type,
                "model_shape": None if self.model_shape is None else list(self.model_shape)}

    @classmethod
    def from_json(cls, d: dict) -> "InputQuantEntry":
        return cls(quant.Attrs(_fixed(d), bool(d["narrow"]), d["rounding"]),
                   None if d["input_map"] is None else InputMap.from_json(d["input_map"]), d["declared_type"],
                   None if d["model_shape"] is None else tuple(int(s) for s in d["model_shape"]))


def _packed(arrays: list[np.ndarray], what: str) -> np.ndarray:
    """Each input's samples packed (``ir.graph.pack``); one line when their counts differ."""
    if len({len(a) for a in arrays}) > 1:
        raise InputDataError(f"{what}: the inputs hold different numbers of samples "
                             f"({', '.join(str(len(a)) for a in arrays)})")
    return pack(arrays)


@dataclass(frozen=True)
class LayerRow:
    """One IR node as the manifest (and ``tessera inspect``) lists it."""

    node: str
    op: str
    shape: tuple[int, ...]
    ftype: FixedType
    lo: int
    hi: int
    macs: int
    form: str

    @classmethod
    def of(cls, graph: Graph, node: Node) -> "LayerRow":
        t = graph.values[node.output]
        ins = [graph.values[v] for v in node.inputs]
        op = OPS[node.op]
        return cls(node.name, node.op, tuple(t.shape), t.ftype, int(t.lo), int(t.hi), int(op.macs(node.attrs, ins, t)),
                   op.form(node.attrs, ins, t))

    def to_json(self) -> dict:
        return {"node": self.node, "op": self.op, "shape": list(self.shape), "type": self.ftype.describe(),
                **_fixed_json(self.ftype), "range": [self.lo, self.hi], "macs": self.macs, "form": self.form}

    @classmethod
    def from_json(cls, d: dict) -> "LayerRow":
        lo, hi = d["range"]
        return cls(d["node"], d["op"], tuple(d["shape"]), _fixed(d), int(lo), int(hi), int(d["macs"]), d["form"])


@dataclass(frozen=True)
class HlsLayerEntry:
    """One layer of the hls4ml model as written: its name, class and precisions."""

    name: str
    class_name: str
    types: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"name": self.name, "class": self.class_name, "types": dict(self.types)}

    @classmethod
    def from_json(cls, d: dict) -> "HlsLayerEntry":
        return cls(d["name"], d["class"], {str(k): str(v) for k, v in d["types"].items()})


@dataclass(frozen=True)
class RegisterArrays:
    """The design-size guard's numbers: the array-partition limit and the part's register bits."""

    maximum_size: int
    bits: int | None


@dataclass(frozen=True)
class PartitionEntry:
    """A partitioned project's schedule: mode, grid and cut (the schedule is recomputed from
    the model with them), the kernel folder of every block / layer graph signature, the
    tail's folder, and the planner's numbers."""

    mode: str
    grid: tuple[int, ...]
    cut: str
    kernels: dict[str, str]
    tail: str | None
    blocks: int
    redundant_compute: float
    halo_bytes: int
    max_block_bytes: int

    def folders(self) -> list[str]:
        """The HLS projects inside: the kernels' folders, then the tail's."""
        return [*dict.fromkeys(self.kernels.values()), *([self.tail] if self.tail else [])]

    def to_json(self) -> dict:
        return {**asdict(self), "grid": list(self.grid), "kernels": dict(self.kernels)}

    @classmethod
    def from_json(cls, d: dict) -> "PartitionEntry":
        return cls(d["mode"], tuple(int(g) for g in d["grid"]), d["cut"], {str(k): str(v) for k, v in d["kernels"].items()},
                   d["tail"], int(d["blocks"]), float(d["redundant_compute"]), int(d["halo_bytes"]),
                   int(d["max_block_bytes"]))


def _rtl_json(d: RtlDesign) -> dict:
    return {**asdict(d), "sources": list(d.sources), "tables": list(d.tables)}


def _rtl(d: dict) -> RtlDesign:
    return RtlDesign(str(d["top"]), int(d["pipeline"]), int(d["latency"]), int(d["stages"]), int(d["n_in"]),
                     int(d["in_width"]), int(d["n_out"]), int(d["out_width"]), bool(d["out_signed"]),
                     int(d["lut_estimate"]), int(d["register_bits"]), tuple(str(s) for s in d["sources"]),
                     tuple(str(t) for t in d["tables"]))


def _options_json(opts: HlsOptions) -> dict:
    return {**asdict(opts), "io_type": opts.io_type.value}


@dataclass(frozen=True)
class Manifest:
    """``tessera.json``: the model (file name and sha256; none for a partitioned project's
    kernels), the options, the design's input, input quantizer and output, and either the
    unpartitioned design's layers, hls4ml layers, notices and size-guard numbers or the
    partition."""

    model_file: str | None
    model_sha256: str | None
    options: HlsOptions
    inputs: tuple[IoEntry, ...]
    input_quants: tuple[InputQuantEntry, ...]
    outputs: tuple[IoEntry, ...]
    layers: tuple[LayerRow, ...] = ()
    hls_layers: tuple[HlsLayerEntry, ...] = ()
    notices: tuple[str, ...] = ()
    register_arrays: RegisterArrays | None = None
    testbench_samples: int | None = None
    lowering_seconds: float | None = None
    partition: PartitionEntry | None = None
    #: an RTL project's design (``--backend rtl``: Verilog under ``rtl/``); None: an HLS project
    rtl: RtlDesign | None = None
    tessera_version: str = __version__
    format: int = FORMAT

    @classmethod
    def of(cls, graph: Graph, model_path: str | Path | None, opts: HlsOptions, perms: dict[str, np.ndarray],
           **rest) -> "Manifest":
        """The manifest of ``graph`` compiled from ``model_path`` with ``opts`` (``perms``: each
        port value's hls4ml index map); ``rest``: the other fields."""
        return cls(Path(model_path).name if model_path else None, sha256(model_path) if model_path else None, opts,
                   tuple(IoEntry.of(graph, p.value, perms[p.value], p.onnx_name) for p in graph.input_ports),
                   tuple(InputQuantEntry.of(graph, p) for p in graph.input_ports),
                   tuple(IoEntry.of(graph, p.value, perms[p.value], p.onnx_name) for p in graph.output_ports), **rest)

    @property
    def input(self) -> IoGroup:
        """The design's inputs, packed."""
        return IoGroup(self.inputs)

    @property
    def output(self) -> IoGroup:
        """The design's outputs, packed."""
        return IoGroup(self.outputs)

    @property
    def backend(self) -> str:
        """``rtl`` for a project of Verilog (``rtl/``), ``hls`` for an HLS project."""
        return "hls" if self.rtl is None else "rtl"

    @property
    def declared_type(self) -> str | None:
        """The declared type of a float input no Quant reads (``--input-type``), as given."""
        return self.input_quants[0].declared_type

    def quantize_inputs(self, xs: list[np.ndarray], what: str = "input") -> np.ndarray:
        """Real inputs, one array per input in the model's order, through the model's input
        quantizers -> packed codes."""
        return _packed([q.quantize(np.asarray(a), e.shape, what if len(xs) == 1 else f"{what} ({e.name})")
                        for q, e, a in zip(self.input_quants, self.inputs, xs)], what)

    def input_codes(self, xs: list[np.ndarray], what: str = "input") -> np.ndarray:
        """Integer codes given by a user, one array per input -> packed codes, each within its
        type's range (:meth:`IoGroup.check_codes`)."""
        xs = [np.asarray(c) for c in xs]
        if len(xs) > 1:  # one input's shape is checked where the codes are run
            for e, c in zip(self.inputs, xs):
                e.require_shape(c)
        return self.input.check_codes(_packed(xs, what), what)

    def compiled_from(self, model_path: str | Path) -> bool:
        """Whether the project was compiled from this model file (its sha256)."""
        return self.model_sha256 == sha256(model_path)

    def to_json(self) -> dict:
        return {
            "format": self.format, "tessera_version": self.tessera_version, "model_file": self.model_file,
            "model_sha256": self.model_sha256, "options": _options_json(self.options),
            "inputs": [e.to_json() for e in self.inputs], "input_quants": [q.to_json() for q in self.input_quants],
            "outputs": [e.to_json() for e in self.outputs],
            "layers": [r.to_json() for r in self.layers], "hls_layers": [h.to_json() for h in self.hls_layers],
            "notices": list(self.notices),
            "register_arrays": None if self.register_arrays is None else asdict(self.register_arrays),
            "testbench_samples": self.testbench_samples, "lowering_seconds": self.lowering_seconds,
            "partition": None if self.partition is None else self.partition.to_json(),
            "backend": self.backend, "rtl": None if self.rtl is None else _rtl_json(self.rtl),
        }

    @classmethod
    def from_json(cls, d: dict, project: str | Path = "the project") -> "Manifest":
        """The manifest of ``d`` (a project of this format), or one line naming ``project``."""
        found = d.get("format", 1) if isinstance(d, dict) else None
        if found is not None and found != FORMAT:
            raise ProjectError(f"project {project} was written by tessera format {found}; this tessera reads "
                               f"format {FORMAT}: recompile it")
        try:
            return cls._from_json(d)
        except (KeyError, TypeError, ValueError, AttributeError, TesseraError) as exc:
            raise ProjectError(f"project {project} has a corrupt {MANIFEST} ({type(exc).__name__}: {exc})") from None

    @classmethod
    def _from_json(cls, d: dict) -> "Manifest":
        regs, part, rtl = d["register_arrays"], d["partition"], d["rtl"]
        return cls(
            d["model_file"], d["model_sha256"], HlsOptions(**d["options"]), tuple(IoEntry.from_json(e) for e in d["inputs"]),
            tuple(InputQuantEntry.from_json(q) for q in d["input_quants"]), tuple(IoEntry.from_json(e) for e in d["outputs"]),
            tuple(LayerRow.from_json(r) for r in d["layers"]), tuple(HlsLayerEntry.from_json(h) for h in d["hls_layers"]),
            tuple(str(n) for n in d["notices"]), None if regs is None else RegisterArrays(**regs),
            d["testbench_samples"], d["lowering_seconds"], None if part is None else PartitionEntry.from_json(part),
            None if rtl is None else _rtl(rtl), str(d["tessera_version"]), int(d["format"]))

    @classmethod
    def read(cls, prj: str | Path) -> "Manifest":
        """The manifest of project folder ``prj``, or one line: not a project, corrupt, or
        written by another format."""
        path = Path(prj) / MANIFEST
        if not path.is_file():
            raise ProjectError(f"{prj} is not a Tessera project (no {MANIFEST}; was the compile interrupted?)")
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ProjectError(f"{path} is corrupt (not JSON)") from None
        return cls.from_json(data, prj)

    def write(self, prj: str | Path) -> Path:
        """Write ``tessera.json`` into project folder ``prj``; its path."""
        path = Path(prj) / MANIFEST
        path.write_text(json.dumps(self.to_json(), indent=1))
        return path


__all__ = ["FORMAT", "PACKED_ENTRY", "PORTS", "RTL_TB_EXPECTED", "RTL_TB_INPUT", "HlsLayerEntry", "InputQuantEntry", "IoEntry", "IoGroup", "LayerRow", "MANIFEST", "Manifest",
           "PartitionEntry", "RegisterArrays", "sha256"]
